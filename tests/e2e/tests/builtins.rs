//! The shipped plugins that give agents what the seeds' frameworks give
//! them (#23): `storage` (Qwen-Agent's key-value store per session) and
//! `code_interpreter` (the notebook where Docker is, else `python_run`).

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

/// The items of a call's content of `kind` (`text`, `json`, `binary`).
fn items<'a>(body: &'a serde_json::Value, kind: &str) -> Vec<&'a serde_json::Value> {
    body["content"]
        .as_array()
        .map(|a| a.iter().filter(|c| c["type"] == kind).collect())
        .unwrap_or_default()
}

#[test]
fn code_interpreter_runs_in_python_run_without_docker() {
    // A notebook toolkit whose image is missing cannot serve: the call goes on
    // to the sandboxed interpreter, and says so.
    let plugins = PluginsDir::new()
        .add("python", "python")
        .add_toolkit("code")
        .add_toolkit_with("notebook", |t| {
            t.replace("toolhost-node:latest", "toolhost-missing-image:never")
        });
    let s = Server::start(plugins);
    let (code, body) = s.invoke_in(
        "a",
        "code_interpreter",
        json!({"code": "print(6 * 7)\n2 ** 10"}),
    );
    assert_eq!(code, 200, "{body}");
    let text = items(&body, "text")[0]["text"].as_str().unwrap();
    assert!(text.contains("stdout:\n```\n42\n```"), "{text}");
    assert!(text.contains("execute_result:\n```\n1024\n```"), "{text}");
    assert!(text.contains("sandboxed interpreter (wasm)"), "{text}");
    assert_eq!(items(&body, "json")[0]["json"]["served_by"], "python_run");
    // An exception in the code is an answer, not a failure.
    let (code, body) = s.invoke_in("a", "code_interpreter", json!({"code": "1/0"}));
    assert_eq!(code, 200, "{body}");
    assert!(
        items(&body, "text")[0]["text"]
            .as_str()
            .unwrap()
            .contains("ZeroDivisionError"),
        "{body}"
    );
    // Only Python.
    let (code, body) = s.invoke_in(
        "a",
        "code_interpreter",
        json!({"code": "console.log(1)", "language": "javascript"}),
    );
    assert_eq!((code, kind(&body)), (422, "invalid_input"), "{body}");
}

#[test]
fn code_interpreter_uses_the_notebook_where_docker_is() {
    if !require_docker() {
        return;
    }
    let plugins = PluginsDir::new()
        .add("python", "python")
        .add_toolkit("code")
        .add_toolkit("notebook");
    let s = Server::start(plugins);
    let (code, body) = s.invoke_in(
        "n",
        "code_interpreter",
        json!({"code": "import matplotlib.pyplot as plt\nx = 41\nplt.plot([1, 3, 2])\nplt.show()"}),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        items(&body, "json")[0]["json"]["served_by"],
        "notebook_execute"
    );
    let image = items(&body, "binary");
    assert_eq!(image.len(), 1, "{body}");
    assert_eq!(image[0]["media_type"], "image/png");
    // The notebook keeps state between calls.
    let (_, body) = s.invoke_in("n", "code_interpreter", json!({"code": "x + 1"}));
    let text = items(&body, "text")[0]["text"].as_str().unwrap();
    assert!(text.contains("execute_result:\n```\n42\n```"), "{text}");
    assert!(text.contains("notebook node (Docker)"), "{text}");
}
