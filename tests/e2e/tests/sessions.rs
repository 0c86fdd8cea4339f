//! One session lifecycle for every surface: a session closed through the
//! native API, XAgent's protocol or MCP releases its Docker nodes and its
//! workspace the same way, before the close answers (not seconds later by a
//! monitor); XAgent's `/close_session` releases the nodes and keeps the
//! workspace. And a Docker daemon that accepts and never answers costs the
//! heavy tools a 503 within the connect timeout, nothing else.

use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_e2e::mcp::McpClient;
use toolhost_e2e::*;

fn session_containers(s: &Server, session: &str) -> Vec<String> {
    containers(&[
        format!("toolhost.scope={}", s.scope()),
        format!("toolhost.session={session}"),
    ])
}

#[test]
fn a_session_closed_through_any_surface_leaves_no_container() {
    if !require_docker() {
        return;
    }
    let s = Server::start(
        PluginsDir::new()
            .add("files", "files")
            .add_toolkit_with("shell", cold),
    );
    let workspaces = s.data.path().join("data/workspaces");

    // Native: DELETE /sessions/{id}.
    let (status, body) = s.invoke_in("native-1", "shell_run", json!({"command": "echo x > f"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(session_containers(&s, "native-1").len(), 1);
    s.close_session("native-1");
    assert!(
        session_containers(&s, "native-1").is_empty(),
        "removed before the answer"
    );
    assert!(!workspaces.join("native-1").exists());

    // XAgent: /close_session releases the node and keeps the workspace;
    // /release_session deletes both.
    let r = s.client().post(s.url("/get_cookie")).send().unwrap();
    let cookie = xagent_cookie(&r);
    let id: Value = r.json().unwrap();
    let id = id["node_id"].as_str().unwrap().to_owned();
    let post = |path: &str, body: Value| {
        let r = s
            .client()
            .post(s.url(path))
            .header("cookie", &cookie)
            .json(&body)
            .send()
            .unwrap();
        (
            r.status().as_u16(),
            r.json::<Value>().unwrap_or(Value::Null),
        )
    };
    let (status, body) = post(
        "/execute_tool",
        json!({"tool_name": "shell_run", "arguments": {"command": "echo y > g"}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(session_containers(&s, &id).len(), 1);
    let (status, _) = post("/close_session", json!({}));
    assert_eq!(status, 200);
    assert!(session_containers(&s, &id).is_empty());
    assert!(
        workspaces.join(&id).join("g").is_file(),
        "the workspace stays"
    );
    let (status, body) = post(
        "/execute_tool",
        json!({"tool_name": "shell_run", "arguments": {"command": "cat g"}}),
    );
    assert_eq!(
        status, 200,
        "a released session's next call gets a node: {body}"
    );
    let (status, _) = post("/release_session", json!({}));
    assert_eq!(status, 200);
    assert!(session_containers(&s, &id).is_empty());
    assert!(!workspaces.join(&id).exists());

    // MCP: the session's end (DELETE /mcp) closes its own toolhost session.
    let mut c = McpClient::new(&s);
    c.initialize("2025-11-25");
    let before: Vec<String> = std::fs::read_dir(&workspaces)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let r = c.call(1, "shell_run", json!({"command": "echo z > h"}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    let mcp_session = std::fs::read_dir(&workspaces)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| !before.contains(n))
        .expect("the MCP session's workspace");
    assert_eq!(session_containers(&s, &mcp_session).len(), 1);
    assert_eq!(c.close(), 200);
    let gone = wait_for(Duration::from_secs(10), || {
        session_containers(&s, &mcp_session)
            .is_empty()
            .then_some(())
    });
    assert!(gone.is_some(), "{}", s.log());
    // Its workspace goes with it (deleted once the node is removed).
    let deleted = wait_for(Duration::from_secs(10), || {
        (!workspaces.join(&mcp_session).exists()).then_some(())
    });
    assert!(deleted.is_some(), "{}", s.log());
    assert!(s.containers().is_empty(), "{:?}", s.containers());
}

#[test]
fn a_daemon_that_never_answers_costs_a_503_within_the_timeout() {
    // A socket that accepts connections and never replies.
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("docker.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let host = format!("unix://{}", socket.display());
    let s = Server::start_env(
        PluginsDir::new()
            .add("calc", "calc")
            .add_toolkit_with("shell", cold),
        None,
        &[("DOCKER_HOST", host.as_str())],
    )
    .unwrap();
    let heavy = {
        let (client, url) = (s.client().clone(), s.url("/tools/shell_run/invoke"));
        std::thread::spawn(move || {
            let started = Instant::now();
            let r = client
                .post(url)
                .json(&json!({"params": {"command": "true"}}))
                .send()
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().unwrap(), started.elapsed())
        })
    };
    // Meanwhile the wasm tools answer as usual.
    for _ in 0..20 {
        let started = Instant::now();
        let (status, _) = s.invoke("calc_evaluate", json!({"expression": "1+1"}));
        assert_eq!(status, 200);
        assert!(started.elapsed() < Duration::from_secs(2));
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, body, took) = heavy.join().unwrap();
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    assert!(
        took < Duration::from_secs(15),
        "503 within the connect timeout, not a hang: {took:?}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not answer"),
        "{body}"
    );
}
