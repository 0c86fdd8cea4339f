//! The shipped plugins that give agents what the seeds' frameworks give
//! them (#23): so far `storage` (Qwen-Agent's key-value store per session).

use serde_json::json;
use toolhost_e2e::xagent::XAgent;
use toolhost_e2e::*;

#[test]
fn storage_keeps_values_per_session() {
    let s = Server::start(PluginsDir::new().add("storage", "storage"));
    let (code, body) = s.invoke_in(
        "alice",
        "storage_put",
        json!({"key": "notes/plan", "value": "ship it"}),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["result"],
        json!({"key": "notes/plan", "bytes": 7, "replaced": false})
    );
    s.invoke_in(
        "alice",
        "storage_put",
        json!({"key": "用户偏好", "value": "简洁"}),
    );
    let (_, body) = s.invoke_in("alice", "storage_get", json!({"key": "notes/plan"}));
    assert_eq!(body["result"], "ship it", "{body}");
    let (_, body) = s.invoke_in("alice", "storage_scan", json!({}));
    let keys: Vec<&str> = body["result"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["notes/plan", "用户偏好"], "{body}");
    // Another session sees nothing of it.
    let (_, body) = s.invoke_in("bob", "storage_scan", json!({}));
    assert_eq!(body["result"]["items"], json!([]), "{body}");
    let (code, body) = s.invoke_in("bob", "storage_get", json!({"key": "notes/plan"}));
    assert_eq!((code, kind(&body)), (422, "invalid_input"), "{body}");
    // Bad keys are the caller's error.
    let (code, _) = s.invoke_in("alice", "storage_put", json!({"key": "", "value": "x"}));
    assert_eq!(code, 422);
    let (code, _) = s.invoke_in(
        "alice",
        "storage_put",
        json!({"key": "k".repeat(600), "value": "x"}),
    );
    assert_eq!(code, 422);
    let (code, body) = s.invoke_in("alice", "storage_delete", json!({"key": "notes/plan"}));
    assert_eq!(
        (code, &body["result"]["deleted"]),
        (200, &json!(true)),
        "{body}"
    );
    assert_eq!(
        s.invoke_in("alice", "storage_delete", json!({"key": "notes/plan"}))
            .0,
        422
    );
    // The same store through XAgent (its session is the cookie's).
    let x = XAgent::connect(&s);
    assert_eq!(
        x.execute("storage_put", json!({"key": "k", "value": "v"}))
            .0,
        200
    );
    assert_eq!(
        x.execute("storage_get", json!({"key": "k"})),
        (200, json!("v"))
    );
}
