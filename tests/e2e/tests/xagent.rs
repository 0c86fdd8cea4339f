//! The XAgent ToolServer protocol, as XAgent's client
//! (`XAgent/toolserver_interface.py`) speaks it: cookie sessions, tool lists
//! and retrieval, `/execute_tool` status codes and result wrapping, workspace
//! files, session close / release.

use std::time::Duration;

use reqwest::blocking::multipart;
use serde_json::json;
use toolhost_e2e::xagent::XAgent;
use toolhost_e2e::{PluginsDir, Server, require_docker, wait_for};

fn server() -> Server {
    Server::start(
        PluginsDir::new()
            .add("calc", "calc")
            .add("files", "files")
            .add("hostile", "hostile"),
    )
}

#[test]
fn tools_envs_retrieval_and_schemas() {
    let s = server();
    let x = XAgent::connect(&s);
    let (status, body) = x.post("/get_available_tools", json!({}));
    assert_eq!(status, 200);
    let envs = body["available_envs"].as_array().unwrap();
    let files = envs.iter().find(|e| e["name"] == "files").unwrap();
    assert!(
        files["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("files_read"))
    );
    assert!(
        body["available_tools"]
            .as_array()
            .unwrap()
            .contains(&json!("calc_evaluate"))
    );
    let calc = body["tools_json"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "calc_evaluate")
        .unwrap();
    assert_eq!(calc["parameters"]["type"], "object");

    let (status, body) = x.post(
        "/retrieving_tools",
        json!({"question": "evaluate an arithmetic expression", "top_k": 3}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["retrieved_tools"][0], "calc_evaluate", "{body}");
    assert_eq!(body["tools_json"][0]["name"], "calc_evaluate");
    let (_, body) = x.post(
        "/retrieving_tools",
        json!({"question": "write text to a file in the workspace", "top_k": 2}),
    );
    assert_eq!(body["retrieved_tools"][0], "files_write", "{body}");

    let (_, body) = x.post(
        "/get_json_schema_for_tools",
        json!({"tool_names": ["files_read", "nope_tool"]}),
    );
    assert_eq!(body["tools_json"][0]["name"], "files_read");
    assert_eq!(body["missing_tools"], json!(["nope_tool"]));
    let (_, body) = x.post(
        "/get_json_schema_for_envs",
        json!({"env_names": ["calc", "nope"]}),
    );
    assert_eq!(body["envs_json"][0]["name"], "calc");
    assert_eq!(body["missing_envs"], json!(["nope"]));

    // Wrong body keys are a clear 422.
    let (status, body) = x.post("/retrieving_tools", json!({"query": "x"}));
    assert_eq!(status, 422, "{body}");
}

#[test]
fn execute_tool_statuses_and_wrapping() {
    let s = server();
    let x = XAgent::connect(&s);
    let (status, body) = x.execute("calc_evaluate", json!({"expression": "6*7"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"type": "simple", "data": {"expression": "6*7", "value": 42.0}})
    );
    // env_name + a bare tool name.
    let r = x.post(
        "/execute_tool",
        json!({"tool_name": "evaluate", "env_name": "calc", "arguments": {"expression": "1"}}),
    );
    assert_eq!(r.0, 200);
    // Text results come back as plain strings.
    let (status, body) = x.execute("hostile_host_calls", json!({"key": "greeting"}));
    assert_eq!((status, body), (200, json!("hello from the manifest")));
    // Arguments as a JSON string (the client may send them so).
    let (status, _) = x.execute("calc_evaluate", json!("{\"expression\": \"2\"}"));
    assert_eq!(status, 200);

    let (status, body) = x.execute("calc_nope", json!({}));
    assert_eq!(status, 404, "{body}");
    let (status, body) = x.execute("calc_evaluate", json!({"expr": "1"}));
    assert_eq!(status, 422, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("invalid_input"));
    let (status, _) = x.execute("calc_evaluate", json!([1, 2]));
    assert_eq!(status, 422);
    let (status, _) = x.post("/execute_tool", json!({"name": "calc_evaluate"}));
    assert_eq!(status, 422, "missing tool_name");
    let (status, body) = x.execute("hostile_fail", json!({"invalid": false}));
    assert_eq!(status, 500, "{body}");
    let (status, body) = x.post(
        "/execute_tool",
        json!({"tool_name": "hostile_spin", "arguments": {}}),
    );
    assert_eq!(status, 500);
    assert!(
        body["detail"].as_str().unwrap().starts_with("timeout"),
        "{body}"
    );

    // No cookie, or one of no session: a clear 400.
    let r = x
        .http
        .post(s.url("/execute_tool"))
        .json(&json!({"tool_name": "calc_evaluate", "arguments": {}}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let r = x
        .http
        .post(s.url("/execute_tool"))
        .header("cookie", "node_id=no-such-session")
        .json(&json!({"tool_name": "calc_evaluate", "arguments": {"expression": "1"}}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().unwrap().contains("unknown session"));
}

#[test]
fn workspace_files_and_session_lifecycle() {
    let s = server();
    let x = XAgent::connect(&s);
    // upload_file as the client sends it: a `file` part and a `filename` part.
    let form = multipart::Form::new()
        .part(
            "file",
            multipart::Part::bytes(b"uploaded\n".to_vec()).file_name("notes.txt"),
        )
        .text("filename", "notes.txt");
    let r = x
        .http
        .post(s.url("/upload_file"))
        .header("cookie", &x.cookie)
        .multipart(form)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (status, body) = x.execute("files_read", json!({"path": "notes.txt"}));
    assert_eq!((status, body), (200, json!("uploaded\n")));
    x.execute(
        "files_write",
        json!({"path": "sub/out.txt", "content": "written\n"}),
    );

    let r = x
        .http
        .post(s.url("/download_file"))
        .header("cookie", &x.cookie)
        .json(&json!({"file_path": "sub/out.txt"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.bytes().unwrap().as_ref(), b"written\n");
    for bad in ["../../etc/passwd", "/etc/passwd"] {
        let r = x
            .http
            .post(s.url("/download_file"))
            .header("cookie", &x.cookie)
            .json(&json!({"file_path": bad}))
            .send()
            .unwrap();
        assert!(
            matches!(r.status().as_u16(), 404 | 422),
            "{bad}: {}",
            r.status()
        );
    }
    let form = multipart::Form::new()
        .part("file", multipart::Part::bytes(b"x".to_vec()).file_name("x"))
        .text("filename", "../escape.txt");
    let r = x
        .http
        .post(s.url("/upload_file"))
        .header("cookie", &x.cookie)
        .multipart(form)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 422);

    let (status, tree) = x.post("/get_workspace_structure", json!({}));
    assert_eq!(status, 200);
    assert_eq!(tree["type"], "directory");
    let names: Vec<&str> = tree["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["notes.txt", "sub"]);
    let r = x
        .http
        .post(s.url("/download_workspace"))
        .header("cookie", &x.cookie)
        .send()
        .unwrap();
    assert_eq!(r.headers()["content-type"], "application/zip");
    assert_eq!(&r.bytes().unwrap()[..2], b"PK");

    // close keeps the workspace; release deletes it and forgets the session.
    assert_eq!(x.post("/close_session", json!({})).0, 200);
    assert_eq!(x.execute("files_read", json!({"path": "notes.txt"})).0, 200);
    assert_eq!(x.post("/release_session", json!({})).0, 200);
    assert_eq!(x.execute("files_read", json!({"path": "notes.txt"})).0, 400);
    let (status, _) = x.post("/reconnect_session", json!({}));
    assert_eq!(status, 200);
    let (status, body) = x.execute("files_read", json!({"path": "notes.txt"}));
    assert_eq!(status, 422, "a recreated session starts empty: {body}");

    // register_new_tool is an admin upload.
    let (status, _) = x.post(
        "/register_new_tool",
        json!({"tool_name": "maths", "code": "AAAA"}),
    );
    assert_eq!(status, 403);
}

#[test]
fn a_long_shell_command_answers_450_with_the_next_call() {
    if !require_docker() {
        return;
    }
    let s = Server::start(PluginsDir::new().add_toolkit_with("shell", |m| {
        m.replace("scheduling = \"hot\"", "scheduling = \"cold\"")
    }));
    let x = XAgent::connect(&s);
    assert!(s.containers().is_empty(), "/get_cookie makes no container");
    let (status, body) = x.execute(
        "shell_run",
        json!({"command": "sleep 2; echo done", "timeout_s": 0.5}),
    );
    assert_eq!(status, 450, "{body}");
    assert_eq!(body["detail"]["type"], "retry");
    assert_eq!(body["detail"]["next_calling"], "shell_read_output");
    let next = body["detail"]["next_calling"].as_str().unwrap().to_owned();
    let done = wait_for(Duration::from_secs(30), || {
        let (status, body) = x.execute(&next, json!({"timeout_s": 5}));
        (status == 200).then_some(body)
    })
    .expect("finishes");
    assert_eq!(done["type"], "simple");
    assert!(
        done["data"]["stdout"].as_str().unwrap().contains("done"),
        "{done}"
    );
    assert_eq!(x.post("/release_session", json!({})).0, 200);
    assert!(
        wait_for(Duration::from_secs(30), || s
            .containers()
            .is_empty()
            .then_some(()))
        .is_some()
    );
}

/// The continuation toolhost names for a call still running after the
/// patience (`[xagent] patience_ms`).
const AWAIT_CALL: &str = "ToolhostEnv_await_call";

#[test]
fn a_call_still_running_after_the_patience_answers_450_and_is_awaited() {
    let s = Server::start_with(
        PluginsDir::new().add("hostile", "hostile"),
        Some("[xagent]\npatience_ms = 300\n"),
    )
    .unwrap();
    let x = XAgent::connect(&s);
    // Quick calls are answered as before.
    assert_eq!(
        x.execute("hostile_echo", json!({"value": 7})),
        (200, json!(7))
    );

    let (status, body) = x.execute("hostile_sleep", json!({"ms": 1500}));
    assert_eq!(status, 450, "{body}");
    let detail = &body["detail"];
    assert_eq!(
        (&detail["type"], &detail["next_calling"]),
        (&json!("retry"), &json!(AWAIT_CALL)),
        "{body}"
    );
    assert_eq!(detail["partial"]["finished"], false, "{body}");
    assert!(
        detail["partial"]["elapsed_ms"].as_u64().unwrap() >= 300,
        "{body}"
    );
    let arguments = detail["arguments"].clone();
    assert!(arguments["call_id"].is_string(), "{body}");

    // XAgent's client can look the continuation up like any tool.
    let (status, schemas) = x.post(
        "/get_json_schema_for_tools",
        json!({"tool_names": [AWAIT_CALL]}),
    );
    assert_eq!(status, 200);
    assert_eq!(schemas["tools_json"][0]["name"], AWAIT_CALL, "{schemas}");
    assert_eq!(
        schemas["tools_json"][0]["parameters"]["required"],
        json!(["call_id"])
    );

    // Bad continuations: no id (422); another session's call (404).
    assert_eq!(x.execute(AWAIT_CALL, json!({})).0, 422);
    let other = XAgent::connect(&s);
    let (status, body) = other.execute(AWAIT_CALL, arguments.clone());
    assert_eq!(status, 404, "{body}");

    // Awaited: 450 again while it runs, then its result, once.
    let mut retries = 0;
    let result = loop {
        let (status, body) = x.execute(AWAIT_CALL, arguments.clone());
        match status {
            450 => {
                assert_eq!(body["detail"]["arguments"], arguments, "{body}");
                retries += 1;
                assert!(retries < 20, "{body}");
            }
            200 => break body,
            _ => panic!("{status} {body}"),
        }
    };
    assert_eq!(result, json!("woke up"));
    assert_eq!(x.execute(AWAIT_CALL, arguments.clone()).0, 404);

    // A tool's own errors come through the continuation with their status.
    let (status, body) = x.execute("hostile_sleep", json!({"ms": 5000}));
    assert_eq!(status, 450, "{body}");
    let arguments = body["detail"]["arguments"].clone();
    let (status, body) = loop {
        let (status, body) = x.execute(AWAIT_CALL, arguments.clone());
        if status != 450 {
            break (status, body);
        }
    };
    assert_eq!(status, 500, "{body}");
    assert!(
        body["detail"].as_str().unwrap().starts_with("timeout:"),
        "{body}"
    );

    // At most 8 calls of a session are parked (running, or done and not
    // yet asked for); the ninth is waited for.
    let parked: Vec<_> = (0..8)
        .map(|_| {
            let (status, body) = x.execute("hostile_sleep", json!({"ms": 1000}));
            assert_eq!(status, 450, "{body}");
            body["detail"]["arguments"].clone()
        })
        .collect();
    assert_eq!(
        x.execute("hostile_sleep", json!({"ms": 600})),
        (200, json!("woke up"))
    );
    for arguments in parked {
        assert_eq!(x.execute(AWAIT_CALL, arguments), (200, json!("woke up")));
    }
    // Closing the session cancels its parked calls.
    let (status, body) = x.execute("hostile_sleep", json!({"ms": 1500}));
    assert_eq!(status, 450, "{body}");
    let arguments = body["detail"]["arguments"].clone();
    assert_eq!(x.post("/close_session", json!({})).0, 200);
    let (status, body) = x.execute(AWAIT_CALL, arguments);
    assert_eq!(status, 404, "{body}");
}
