//! Replicas on one PostgreSQL registry: their call statistics add up,
//! and the database going away and coming back loses nothing: calls go
//! on, a status change is refused (503, not changed) rather than kept on
//! one replica, the writes that waited are saved when it is back, and the
//! replicas follow each other again.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::*;

const ADMIN: &str = "admin-admin-admin-admin";

fn set_status(s: &Server, id: &str, status: &str) -> (u16, Value) {
    let r = s
        .client()
        .put(s.url(&format!("/tools/{id}/status")))
        .bearer_auth(ADMIN)
        .json(&json!({ "status": status }))
        .send()
        .unwrap();
    (r.status().as_u16(), r.json().unwrap_or(Value::Null))
}

fn replica(pg: &pg::Postgres) -> Server {
    let config = format!(
        "[registry]\nflush_ms = 100\nurl = \"{}\"\n[auth]\nadmin_token = \"{ADMIN}\"\n",
        pg.url
    );
    Server::start_with(PluginsDir::new().add("calc", "calc"), Some(&config)).unwrap()
}

fn calls_on(s: &Server) -> u64 {
    s.get("/tools/calc_evaluate").1["stats"]["call_count"]
        .as_u64()
        .unwrap_or(0)
}

fn evaluate(s: &Server, n: u64) {
    for i in 0..n {
        let (status, body) = s.invoke("calc_evaluate", json!({ "expression": format!("{i} + 1") }));
        assert_eq!(status, 200, "{body}");
    }
}

/// Whether `check` holds within 10 s.
fn soon(check: impl Fn() -> bool) -> bool {
    wait_for(Duration::from_secs(10), || check().then_some(())).is_some()
}

#[test]
fn replicas_add_up_their_statistics_and_ride_out_the_database_going_away() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let a = replica(&pg);
    let b = replica(&pg);
    evaluate(&a, 7);
    evaluate(&b, 5);
    // Each shows every replica's calls once the flushes have gone through.
    assert!(soon(|| calls_on(&a) == 12), "A shows {}", calls_on(&a));
    assert!(soon(|| calls_on(&b) == 12), "B shows {}", calls_on(&b));
    let (_, tool) = a.get("/tools/calc_evaluate");
    assert!(tool["stats"]["p50_latency_ms"].as_f64().is_some(), "{tool}");

    // The database goes away.
    pg.stop();
    // Calls never wait on it.
    evaluate(&a, 3);
    evaluate(&b, 2);
    assert!(
        soon(|| calls_on(&a) == 15),
        "A's own calls count: {}",
        calls_on(&a)
    );
    // A status change that cannot be saved is refused, and not made.
    let (status, body) = set_status(&a, "calc_evaluate", "inactive");
    assert_eq!(
        (status, kind(&body)),
        (503, "registry_unavailable"),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("stays active")),
        "{body}"
    );
    assert_eq!(a.get("/tools/calc_evaluate").1["status"], "active");
    assert_eq!(a.invoke("calc_evaluate", json!({"expression": "1"})).0, 200);

    // Back: what waited is saved, and the replicas agree again.
    pg.resume();
    assert!(
        soon(|| calls_on(&b) == 18),
        "B shows {} (want 18)",
        calls_on(&b)
    );
    assert!(
        soon(|| calls_on(&a) == 18),
        "A shows {} (want 18)",
        calls_on(&a)
    );
    assert!(
        soon(|| set_status(&a, "calc_evaluate", "inactive").0 == 200),
        "the status change is taken again"
    );
    assert!(
        soon(|| b.get("/tools/calc_evaluate").1["status"] == "inactive"),
        "B follows A again: {}",
        b.get("/tools/calc_evaluate").1["status"]
    );
}
