//! Tools kept healthy over time (seed 004's `ToolState`): a tool whose calls
//! trap is `degraded` at the next look, with the reason and when it was last
//! healthy, and a `health_alert` (§5.4) goes out; calls failing on the
//! caller's input degrade nothing; with no more failing calls it is
//! `running` again by itself.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::services::Service;
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

/// A wasm plugin's manifest declaring a probe (its own interval): degraded
/// by the probe alone, no call made. Fallbacks checked when a toolkit
/// loads: one not there yet is a warning; one that cannot take the tool's
/// input, the tool itself, or a tool the toolkit lacks refuse it, named.
#[test]
fn declared_probes_degrade_without_calls_and_fallbacks_are_checked_at_load() {
    let (_, calc_toml) = component("calc");
    let calc_toml = std::fs::read_to_string(calc_toml.unwrap()).unwrap();
    let (_, hostile_toml) = component("hostile");
    let hostile_toml = std::fs::read_to_string(hostile_toml.unwrap()).unwrap();
    let mut s = Server::start_with(
        PluginsDir::new()
            .add("calc", "calc")
            .add("hostile", "hostile")
            .write(
                "hostile.toml",
                format!("{hostile_toml}\n[health]\ninterval_s = 1\nprobe = {{ tool = \"panic\", input = {{ message = \"probe\" }} }}\n"),
            ),
        Some(&format!(
            "[auth]\nadmin_token = \"{ADMIN}\"\n[health]\ninterval_s = 60\nrepair = \"auto\"\n"
        )),
    )
    .unwrap();
    let degraded = wait_for(Duration::from_secs(10), || {
        let h = health(&s, "hostile_panic");
        (h["state"] == "degraded").then_some(h)
    })
    .unwrap_or_else(|| panic!("{}\n{}", health(&s, "hostile_panic"), s.log()));
    let reason = degraded["reason"].as_str().unwrap();
    assert!(
        reason.contains("probe hostile_panic failed: trap"),
        "{degraded}"
    );
    assert_eq!(health(&s, "calc_evaluate")["state"], "running");
    // `repair = "auto"`: restarted at the first look, a repair task at the
    // next one that still finds it degraded.
    let repair = wait_for(Duration::from_secs(10), || {
        let r = s
            .client()
            .get(s.url("/tasks"))
            .bearer_auth(ADMIN)
            .send()
            .unwrap();
        let tasks: Value = r.json().unwrap();
        tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "repair_tool")
            .cloned()
    })
    .unwrap_or_else(|| panic!("no repair task\n{}", s.log()));
    assert_eq!(repair["spec"]["name"], "hostile", "{repair}");
    let log = wait_for(Duration::from_secs(5), || {
        let log = s.log();
        log.contains("repair task opened").then_some(log)
    })
    .expect("the opening logged");
    let (restarted, opened) = (
        log.find("restarting a degraded toolkit")
            .expect("restarted first"),
        log.find("repair task opened").expect("then a task"),
    );
    assert!(restarted < opened, "{log}");

    // Fallbacks, each toolkit a copy of calc with its own [fallback].
    let (wasm, _) = component("calc");
    let add = |name: &str, fallback: &str| {
        let dir = s.plugins_dir();
        std::fs::write(
            dir.join(format!("{name}.toml")),
            format!("{calc_toml}\n[fallback]\n{fallback}\n"),
        )
        .unwrap();
        std::fs::copy(&wasm, dir.join(format!("{name}.wasm"))).unwrap();
    };
    let settled = |name: &str| {
        wait_for(Duration::from_secs(20), || {
            s.plugin(name)
                .filter(|p| p["state"] == "ready" || p["state"] == "failed")
        })
        .unwrap_or_else(|| panic!("{name} never settled\n{}", s.log()))
    };
    add("later", "evaluate = [\"calc_evaluate\", \"nowhere_tool\"]");
    let p = settled("later");
    assert_eq!(p["state"], "ready", "{p}");
    assert!(
        p["warnings"][0]
            .as_str()
            .unwrap()
            .contains("no tool `nowhere_tool`"),
        "{p}"
    );
    let (code, body) = s.invoke("later_evaluate", json!({"expression": "1+2"}));
    assert_eq!(code, 200, "{body}");
    assert!(body.get("served_by").is_none(), "{body}");
    let (_, tool) = s.get("/tools/later_evaluate");
    assert_eq!(
        tool["fallback_strategy"],
        json!(["calc_evaluate", "nowhere_tool"])
    );
    // Set through the registry, over the manifest's; checked, named.
    let put = |id: &str, body: Value, token: Option<&str>| {
        let mut r = s
            .client()
            .put(s.url(&format!("/tools/{id}/fallback")))
            .json(&body);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let r = r.send().unwrap();
        (
            r.status().as_u16(),
            r.json::<Value>().unwrap_or(Value::Null),
        )
    };
    let (code, body) = put(
        "later_evaluate",
        json!({"fallback_strategy": ["calc_evaluate"]}),
        Some(ADMIN),
    );
    assert_eq!(
        (code, &body["fallback_strategy"]),
        (200, &json!(["calc_evaluate"])),
        "{body}"
    );
    assert_eq!(
        s.get("/tools/later_evaluate").1["fallback_strategy"],
        json!(["calc_evaluate"])
    );
    for (list, needle) in [
        (
            json!(["hostile_panic"]),
            "cannot take `later_evaluate`'s input: it requires `message`",
        ),
        (json!(["nowhere_x"]), "unknown fallback `nowhere_x`"),
        (json!(["later_evaluate"]), "cannot fall back to itself"),
    ] {
        let (code, body) = put(
            "later_evaluate",
            json!({"fallback_strategy": list}),
            Some(ADMIN),
        );
        assert_eq!(code, 422, "{body}");
        assert!(body.to_string().contains(needle), "{needle}: {body}");
    }
    assert_eq!(
        put("nowhere_x", json!({"fallback_strategy": []}), Some(ADMIN)).0,
        404
    );
    assert_eq!(
        put("later_evaluate", json!({"fallback_strategy": []}), None).0,
        401
    );
    assert_eq!(
        put("later_evaluate", json!({"fallbacks": []}), Some(ADMIN)).0,
        422
    );
    // null: the manifest's again.
    let (code, body) = put(
        "later_evaluate",
        json!({"fallback_strategy": null}),
        Some(ADMIN),
    );
    assert_eq!(
        (code, &body["fallback_strategy"]),
        (200, &json!(["calc_evaluate", "nowhere_tool"])),
        "{body}"
    );
    let (code, _) = put(
        "later_evaluate",
        json!({"fallback_strategy": []}),
        Some(ADMIN),
    );
    assert_eq!(code, 200);
    assert_eq!(
        s.get("/tools/later_evaluate").1["fallback_strategy"],
        json!([])
    );
    for (name, fallback, needle) in [
        (
            "unlike",
            "evaluate = [\"hostile_panic\"]",
            "`hostile_panic` cannot take its input: it requires `message`",
        ),
        (
            "itself",
            "evaluate = [\"itself_evaluate\"]",
            "names the tool itself",
        ),
        (
            "nothing",
            "nope = [\"calc_evaluate\"]",
            "`nope`, which is not one of its tools",
        ),
    ] {
        add(name, fallback);
        let p = settled(name);
        assert_eq!(p["state"], "failed", "{p}");
        assert!(p["error"].as_str().unwrap().contains(needle), "{name}: {p}");
        assert!(
            !s.tool_ids()
                .iter()
                .any(|t| t.starts_with(&format!("{name}_")))
        );
    }
    // The fallbacks set through the registry are kept: the same after a
    // restart.
    s.restart().unwrap();
    let ready = wait_for(Duration::from_secs(20), || {
        s.plugin("later").filter(|p| p["state"] == "ready")
    });
    assert!(ready.is_some(), "{}", s.log());
    assert_eq!(
        s.get("/tools/later_evaluate").1["fallback_strategy"],
        json!([])
    );
}

/// An MCP server's ping at each look (the manifest's own interval): asked
/// and answered while it runs; once the server is gone, the tools of its
/// toolkit are degraded, named.
#[test]
fn an_mcp_servers_ping_is_its_check() {
    let everything = Service::everything();
    let manifest = format!(
        "{}timeout_ms = 3000\n[health]\ninterval_s = 1\n",
        everything.mcp_manifest()
    );
    let s = Server::start_with(
        PluginsDir::new().folder("every", &[("every.toml", &manifest)]),
        Some(&format!(
            "[auth]\nadmin_token = \"{ADMIN}\"\n[health]\ninterval_s = 60\n"
        )),
    )
    .unwrap();
    let answered = wait_for(Duration::from_secs(10), || {
        let h = health(&s, "every_echo");
        (h["last_check"] == "ping answered").then_some(h)
    });
    assert!(
        answered.is_some(),
        "{}\n{}",
        health(&s, "every_echo"),
        s.log()
    );
    assert_eq!(health(&s, "every_echo")["state"], "running");
    drop(everything);
    let degraded = wait_for(Duration::from_secs(20), || {
        let h = health(&s, "every_echo");
        (h["state"] == "degraded").then_some(h)
    })
    .unwrap_or_else(|| panic!("{}\n{}", health(&s, "every_echo"), s.log()));
    assert!(
        degraded["reason"].as_str().unwrap().contains("ping"),
        "{degraded}"
    );
}
