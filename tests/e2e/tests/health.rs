//! Tools kept healthy over time (seed 004's `ToolState`): a tool whose calls
//! trap is `degraded` at the next look, with the reason and when it was last
//! healthy, and a `health_alert` (§5.4) goes out; calls failing on the
//! caller's input degrade nothing; with no more failing calls it is
//! `running` again by itself.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::*;

const ADMIN: &str = "admin-admin-admin-admin";

fn health(s: &Server, id: &str) -> Value {
    s.get(&format!("/tools/{id}")).1["health"].clone()
}

#[test]
fn a_failing_tool_turns_degraded_alerts_and_recovers_by_itself() {
    let config = format!(
        "[auth]\nadmin_token = \"{ADMIN}\"\n[health]\nhealth_check_interval_s = 1\nmin_calls = 3\n"
    );
    let s = Server::start_with(
        PluginsDir::new()
            .add("calc", "calc")
            .add("hostile", "hostile"),
        Some(&config),
    )
    .unwrap();
    let alerts = toolhost_e2e::events::subscribe(&s, ADMIN);
    // A first look has found every tool healthy.
    assert!(
        wait_for(Duration::from_secs(5), || {
            health(&s, "hostile_panic")["last_healthy"]
                .as_str()
                .map(str::to_owned)
        })
        .is_some()
    );
    let before = health(&s, "hostile_panic");
    assert_eq!(before["state"], "running", "{before}");

    // The caller's mistakes (a bad expression, a wrong field) are no trouble.
    for _ in 0..4 {
        assert_ne!(
            s.invoke("calc_evaluate", json!({"expression": "nope("})).0,
            200
        );
        assert_eq!(s.invoke("hostile_panic", json!({"nope": 1})).0, 422);
    }
    // Traps are.
    for _ in 0..4 {
        let (status, body) = s.invoke("hostile_panic", json!({"message": "boom"}));
        assert_eq!((status, kind(&body)), (500, "trap"), "{body}");
    }
    let alert = alerts
        .recv_timeout(Duration::from_secs(10))
        .expect("a health_alert");
    assert_eq!(alert["type"], "health_alert", "{alert}");
    let payload = &alert["payload"];
    assert_eq!(payload["tool_id"], "hostile_panic", "{alert}");
    assert!(
        payload["error"].as_str().unwrap().starts_with("4 of its "),
        "{alert}"
    );
    // The last look before the traps (ISO times compare as text).
    let last = payload["last_healthy"].as_str().unwrap();
    assert!(last >= before["last_healthy"].as_str().unwrap(), "{alert}");
    assert!(last.ends_with('Z') && last.len() == 20, "{last}");
    assert!(
        payload.get("container_id").is_some(),
        "§5.4's fields: {alert}"
    );
    let degraded = health(&s, "hostile_panic");
    assert_eq!(degraded["state"], "degraded", "{degraded}");
    assert_eq!(degraded["reason"], payload["error"]);
    assert_eq!(health(&s, "calc_evaluate")["state"], "running");

    // No more failures: running again at the next look, no second alert.
    assert!(
        wait_for(Duration::from_secs(5), || {
            (health(&s, "hostile_panic")["state"] == "running").then_some(())
        })
        .is_some()
    );
    assert!(health(&s, "hostile_panic")["reason"].is_null());
    assert!(alerts.recv_timeout(Duration::from_millis(1500)).is_err());
}
