//! Requests with the admin token in tests (tasks, the budget, fallbacks),
//! and following a task to its end.

use std::time::Duration;

use serde_json::Value;

use crate::{Server, wait_for};

/// The admin token the tests' servers are configured with.
pub const TOKEN: &str = "admin-admin-admin-admin";

/// `method path` (with `body` as JSON) as the admin: status and JSON body.
pub fn request(
    s: &Server,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = s.client().request(method, s.url(path)).bearer_auth(TOKEN);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let r = req.send().unwrap();
    (r.status().as_u16(), r.json().unwrap_or(Value::Null))
}

/// Task `id`'s status once it has ended (5 minutes at most).
pub fn task_ended(s: &Server, id: &str) -> Value {
    wait_for(Duration::from_secs(300), || {
        let (_, t) = request(
            s,
            reqwest::Method::GET,
            &format!("/tasks/{id}/status"),
            None,
        );
        t["status"]
            .as_str()
            .is_some_and(|st| matches!(st, "completed" | "failed" | "cancelled"))
            .then_some(t)
    })
    .unwrap_or_else(|| panic!("task {id} did not end\n{}", s.log()))
}
