//! MCP sessions: idle ones closed, a cap, handshakes that never finish, and
//! each session's own workspace, served as resources.

use super::*;

/// An MCP session in use stays open, its calls answered directly or not;
/// one unused for the session idle timeout is closed (404 after).
#[test]
fn idle_mcp_sessions_are_closed_and_busy_ones_are_not() {
    let config = "[sessions]\nidle_timeout_s = 2\nreap_interval_s = 1\n";
    let s = Server::start_with(PluginsDir::new().add("calc", "calc"), Some(config)).unwrap();
    // One session answered directly, one whose `initialized` came without a
    // version header: its calls all go through rmcp (SSE answers).
    let mut direct = McpClient::new(&s);
    direct.initialize("2025-11-25");
    let mut via_rmcp = McpClient::new(&s);
    let init = via_rmcp.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "toolhost-e2e", "version": "0"}}}));
    let session = init.session.expect("a session id");
    let ack = via_rmcp
        .http
        .post(s.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header(toolhost_e2e::mcp::SESSION_ID, &session)
        .body(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
        .send()
        .unwrap();
    assert!(ack.status().is_success(), "{ack:?}");
    via_rmcp.session = Some(session);
    let call = |c: &McpClient, id: i64| {
        c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "calc_evaluate", "arguments": {"expression": "1+1"}}}))
    };
    // The direct session is registered by rmcp's handler of `initialized`,
    // which may run just after that request is answered: on a busy machine
    // the first call can still go to rmcp. Wait until it is answered directly.
    let mut id = 1000;
    let registered = wait_for(Duration::from_secs(10), || {
        id += 1;
        let answer = call(&direct, id);
        (!answer.text.starts_with("data:") && !answer.text.starts_with("id:")).then_some(())
    });
    assert!(
        registered.is_some(),
        "the direct session was never answered directly"
    );
    let started = Instant::now();
    let mut id = 1;
    while started.elapsed() < Duration::from_secs(5) {
        for (c, sse) in [(&direct, false), (&via_rmcp, true)] {
            let answer = call(c, id);
            let r = answer
                .response(id)
                .unwrap_or_else(|| panic!("after {:?}: {}", started.elapsed(), answer.text));
            assert_eq!(r["result"]["isError"], false, "{r}");
            assert_eq!(
                answer.text.starts_with("data:") || answer.text.starts_with("id:"),
                sse,
                "{}",
                answer.text
            );
        }
        id += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    // Idle for 2 s, found within the next 1 s sweep: closed.
    std::thread::sleep(Duration::from_millis(4500));
    for c in [&direct, &via_rmcp] {
        let answer = call(c, 99);
        assert_eq!(
            answer.status, 404,
            "an idle MCP session is closed: {}",
            answer.text
        );
    }
}

#[test]
fn mcp_sessions_are_capped_and_a_closed_one_makes_room() {
    let config = "[sessions]\nmax_mcp_sessions = 3\n";
    let s = Server::start_with(PluginsDir::new().add("calc", "calc"), Some(config)).unwrap();
    let mut open: Vec<McpClient> = (0..3)
        .map(|_| {
            let mut c = McpClient::new(&s);
            c.initialize("2025-11-25");
            c
        })
        .collect();
    let initialize = json!({"jsonrpc": "2.0", "id": 7, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "toolhost-e2e", "version": "0"}}});
    // A fourth is refused with a JSON-RPC error naming the setting, and a
    // Retry-After; the open ones go on serving.
    let refused = McpClient::new(&s)
        .post()
        .body(initialize.to_string())
        .send()
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "30");
    let body: Value = refused.json().unwrap();
    assert_eq!(body["id"], 7, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_mcp_sessions"),
        "{body}"
    );
    let answer = open[0].call(1, "calc_evaluate", json!({"expression": "2+2"}));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    // Stateless requests open no session: still answered.
    let (status, _) = s.get("/tools");
    assert_eq!(status, 200);
    // One closed: room for one more.
    let closed = open.pop().unwrap();
    assert!(closed.close() < 300);
    let mut again = McpClient::new(&s);
    again.initialize("2025-11-25");
    assert!(
        s.log()
            .contains("initialize refused: the most sessions are open")
    );
}

#[test]
fn sessions_that_never_finish_their_handshake_expire_fast() {
    let config = "[sessions]\nmax_mcp_sessions = 3\nmcp_unfinished_timeout_s = 2\n";
    let s = Server::start_with(PluginsDir::new().add("calc", "calc"), Some(config)).unwrap();
    let mut real = McpClient::new(&s);
    real.initialize("2025-11-25");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "flood", "version": "0"}}});
    let bare = || {
        McpClient::new(&s)
            .post()
            .body(initialize.to_string())
            .send()
            .unwrap()
            .status()
    };
    // Two `initialize` calls that go no further fill the cap ...
    assert_eq!(bare(), 200);
    assert_eq!(bare(), 200);
    assert_eq!(bare(), 503);
    // ... for two seconds: then they are closed, and the finished session
    // serves on.
    let room = wait_for(Duration::from_secs(10), || (bare() == 200).then_some(()));
    assert!(room.is_some(), "unfinished sessions were never closed");
    let answer = real.call(1, "calc_evaluate", json!({"expression": "1+1"}));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
}

#[test]
fn each_mcp_session_has_its_own_workspace_closed_with_it() {
    let s = server();
    let workspaces = s.data.path().join("data/workspaces");
    let count = || {
        std::fs::read_dir(&workspaces)
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let mut a = McpClient::new(&s);
    a.initialize("2025-11-25");
    let mut b = McpClient::new(&s);
    b.initialize("2025-11-25");
    let w = a.call(
        1,
        "files_write",
        json!({"path": "note.txt", "content": "from a"}),
    );
    assert_eq!(w["result"]["isError"], false, "{w}");
    let r = a.call(2, "files_read", json!({"path": "note.txt"}));
    assert!(r["result"]["content"].to_string().contains("from a"), "{r}");
    let r = b.call(3, "files_read", json!({"path": "note.txt"}));
    assert_eq!(r["result"]["isError"], true, "b must not see a's file: {r}");
    assert_eq!(count(), 2, "one workspace per MCP session");

    // Ending the MCP session closes its toolhost session and workspace.
    // 200 or 204, as MCP clients accept (the Python SDK logs 202 as a failure).
    assert!(matches!(a.close(), 200 | 204));
    assert!(
        wait_for(Duration::from_secs(10), || (count() == 1).then_some(())).is_some(),
        "a's workspace is deleted with its MCP session"
    );
    // A closed MCP session id is unknown from then on.
    let gone = a.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}));
    assert_eq!(gone.status, 404, "{}", gone.text);

    // The native API's session header pins a toolhost session on MCP too.
    let (status, _) = s.invoke_in(
        "pinned-1",
        "files_write",
        json!({"path": "p.txt", "content": "native"}),
    );
    assert_eq!(status, 200);
    let mut p = McpClient::new(&s);
    p.header = Some(("x-toolhost-session".into(), "pinned-1".into()));
    p.initialize("2025-11-25");
    let r = p.call(1, "files_read", json!({"path": "p.txt"}));
    assert!(r["result"]["content"].to_string().contains("native"), "{r}");
    assert!((200..300).contains(&p.close()));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        workspaces.join("pinned-1").is_dir(),
        "a pinned session outlives the MCP session"
    );
    let mut bad = McpClient::new(&s);
    bad.initialize("2025-11-25");
    bad.header = Some(("x-toolhost-session".into(), "../etc".into()));
    let r = bad.call(2, "files_read", json!({"path": "p.txt"}));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("session"),
        "{r}"
    );
}

/// #27: the session workspace as MCP resources: a file a wasm tool wrote is
/// listed, read (text and binary), completed as a path, and watched
/// (`notifications/resources/updated` on the standalone stream when another
/// tool call changes it); no URI reaches outside the workspace.
#[test]
fn the_session_workspace_is_served_as_resources() {
    let s = server();
    let mut c = McpClient::new(&s);
    let init = c.initialize("2025-11-25");
    let caps = &init["capabilities"];
    assert_eq!(caps["resources"]["subscribe"], true, "{init}");
    assert!(
        caps["prompts"].is_object() && caps["completions"].is_object(),
        "{init}"
    );
    assert!(caps["logging"].is_object(), "{init}");

    let w = c.call(
        1,
        "files_write",
        json!({"path": "dir/a.txt", "content": "hello"}),
    );
    assert_eq!(w["result"]["isError"], false, "{w}");
    // The result links the file the call wrote, and only that.
    let links: Vec<&Value> = w["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{w}"))
        .iter()
        .filter(|b| b["type"] == "resource_link")
        .collect();
    assert_eq!(links.len(), 1, "{w}");
    assert_eq!(links[0]["uri"], "toolhost://workspace/dir/a.txt", "{w}");
    assert_eq!(links[0]["mimeType"], "text/plain", "{w}");
    assert_eq!(links[0]["size"], 5, "{w}");
    let r = c.call(5, "files_read", json!({"path": "dir/a.txt"}));
    assert!(
        !r.to_string().contains("resource_link"),
        "a call that wrote nothing links nothing: {r}"
    );
    let list = c.request(2, "resources/list", json!({}));
    let uris: Vec<&str> = list["result"]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert_eq!(uris, vec!["toolhost://workspace/dir/a.txt"], "{list}");
    let read = c.request(
        3,
        "resources/read",
        json!({"uri": "toolhost://workspace/dir/a.txt"}),
    );
    assert_eq!(read["result"]["contents"][0]["text"], "hello", "{read}");
    assert_eq!(
        read["result"]["contents"][0]["mimeType"], "text/plain",
        "{read}"
    );
    // Bytes that are not UTF-8 come back as a blob.
    let root = s.data.path().join("data/workspaces");
    let session = std::fs::read_dir(&root)
        .expect("workspaces")
        .flatten()
        .next()
        .expect("one workspace")
        .path();
    std::fs::write(session.join("bin.dat"), [0xff, 0x00, 0x80]).expect("write");
    let read = c.request(
        4,
        "resources/read",
        json!({"uri": "toolhost://workspace/bin.dat"}),
    );
    assert_eq!(read["result"]["contents"][0]["blob"], "/wCA", "{read}");

    // Outside the workspace: refused, whatever the spelling.
    std::fs::write(s.data.path().join("secret.txt"), "secret").expect("write");
    #[cfg(unix)]
    std::os::unix::fs::symlink(s.data.path().join("secret.txt"), session.join("link.txt"))
        .expect("symlink");
    for (i, uri) in [
        "toolhost://workspace/../../secret.txt",
        "toolhost://workspace//etc/passwd",
        "toolhost://workspace/link.txt",
        "file:///etc/passwd",
    ]
    .iter()
    .enumerate()
    {
        let r = c.request(10 + i as i64, "resources/read", json!({"uri": uri}));
        assert!(r["error"]["code"].is_i64(), "{uri}: {r}");
        assert!(!r.to_string().contains("secret\""), "{uri}: {r}");
    }

    // Completion of workspace paths.
    let done = c.request(
        20,
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "toolhost://workspace/{+path}"},
               "argument": {"name": "path", "value": "dir/"}}),
    );
    assert_eq!(
        done["result"]["completion"]["values"],
        json!(["dir/a.txt"]),
        "{done}"
    );

    // Subscribed, then changed by another tool call: the update arrives on
    // the session's standalone stream.
    let sub = c.request(
        21,
        "resources/subscribe",
        json!({"uri": "toolhost://workspace/dir/a.txt"}),
    );
    assert!(sub["result"].is_object(), "{sub}");
    let rx = c.listen();
    std::thread::sleep(Duration::from_millis(300));
    let w = c.call(
        22,
        "files_write",
        json!({"path": "dir/a.txt", "content": "changed!"}),
    );
    assert_eq!(w["result"]["isError"], false, "{w}");
    let note = next_of(
        &rx,
        "notifications/resources/updated",
        Duration::from_secs(10),
    );
    assert_eq!(
        note["params"]["uri"], "toolhost://workspace/dir/a.txt",
        "{note}"
    );
}
