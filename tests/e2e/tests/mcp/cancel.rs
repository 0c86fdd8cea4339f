//! Calls stopped over MCP (a client gone, `notifications/cancelled` for wasm
//! and shell calls) and a long call become a task.

use super::*;

/// A client that goes away mid-call stops it, stateless or in a session
/// (whose slow answers are streams): the sandbox is torn down, so the call
/// is never counted.
#[test]
fn a_client_that_goes_away_stops_its_call() {
    let s = server();
    let mut c = McpClient::new(&s);
    c.initialize("2025-11-25");
    let impatient = reqwest::blocking::Client::builder()
        .timeout(Duration::from_millis(400))
        .build()
        .unwrap();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toolhost-e2e", "version": "0"}
    });
    let call = |id: i64, meta: Option<&Value>| {
        let mut params = json!({"name": "hostile_sleep", "arguments": {"ms": 2500}});
        if let Some(meta) = meta {
            params["_meta"] = meta.clone();
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
    };
    // Stateless.
    let gone = impatient
        .post(s.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "hostile_sleep")
        .body(call(1, Some(&meta)))
        .send()
        .and_then(|r| r.text());
    assert!(gone.is_err(), "{gone:?}");
    // In a session: the answer is a stream; the client reads a little, then
    // goes away.
    let mut r = c
        .post()
        .timeout(Duration::from_millis(400))
        .body(call(2, None))
        .send()
        .unwrap();
    let mut rest = String::new();
    assert!(std::io::Read::read_to_string(&mut r, &mut rest).is_err());
    drop(r);
    std::thread::sleep(Duration::from_millis(3000));
    let (_, tool) = s.get("/tools/hostile_sleep");
    assert_eq!(tool["stats"]["call_count"], 0, "{tool}");
    // A call seen to its end is counted.
    let ok = c.call(3, "hostile_sleep", json!({"ms": 10}));
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    let (_, tool) = s.get("/tools/hostile_sleep");
    assert_eq!(tool["stats"]["call_count"], 1, "{tool}");
}

#[test]
fn cancellation_stops_the_wasm_call() {
    let s = server();
    let mut c = McpClient::new(&s);
    c.initialize("2025-11-25");
    let started = Instant::now();
    std::thread::scope(|scope| {
        let spin = scope.spawn(|| {
            c.send(&json!({
                "jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "hostile_spin", "arguments": {}}
            }))
        });
        std::thread::sleep(Duration::from_millis(300));
        let ack = c.send(&json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "the user changed their mind"}
        }));
        assert!(ack.status < 300, "{}", ack.text);
        let answer = spin.join().unwrap();
        // The spin would run into its 2 s time limit; cancelled, its stream
        // ends at once and carries no result.
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "the cancelled call ended after {:?}",
            started.elapsed()
        );
        assert!(
            answer.response(7).and_then(|r| r.get("result")).is_none(),
            "{}",
            answer.text
        );
    });
    // Cancelled calls are never counted: the sandbox was torn down mid-call.
    std::thread::sleep(Duration::from_millis(2500));
    let (_, tool) = s.get("/tools/hostile_spin");
    assert_eq!(tool["stats"]["call_count"], 0, "{tool}");
    let ok = c.call(8, "calc_evaluate", json!({"expression": "1+1"}));
    assert_eq!(ok["result"]["isError"], false, "{ok}");
}

/// Cancelling a call whose shell command is running removes the session's
/// node: the container, and the command with it, stop; the next call gets a
/// fresh node and a note saying why.
#[test]
fn cancellation_stops_a_running_shell_command() {
    if !toolhost_e2e::require_docker() {
        return;
    }
    let s = Server::start(PluginsDir::new().add_toolkit("shell"));
    let mut c = McpClient::new(&s);
    c.initialize("2025-11-25");
    let run = |id: i64, command: &str| {
        let r = c.call(id, "shell_run", json!({"command": command}));
        assert_eq!(r["result"]["isError"], false, "{r}");
        r["result"]["content"].to_string()
    };
    let first = run(1, "export MARK=before; hostname");
    let host: String = serde_json::from_str::<Value>(&first).unwrap()[0]["text"]
        .as_str()
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .and_then(|v| v["stdout"].as_str().map(|s| s.trim().to_owned()))
        .unwrap_or_else(|| panic!("hostname in {first}"));
    assert!(
        s.containers().iter().any(|id| id.starts_with(&host)),
        "{host} among {:?}",
        s.containers()
    );
    std::thread::scope(|scope| {
        let long = scope.spawn(|| {
            c.send(&json!({
                "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "shell_run", "arguments": {"command": "sleep 120"}}
            }))
        });
        std::thread::sleep(Duration::from_millis(1000));
        c.send(&json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 2}
        }));
        let answer = long.join().unwrap();
        assert!(answer.response(2).and_then(|r| r.get("result")).is_none());
    });
    let gone = wait_for(Duration::from_secs(30), || {
        (!s.containers().iter().any(|id| id.starts_with(&host))).then_some(())
    });
    assert!(
        gone.is_some(),
        "the node of the cancelled command is removed"
    );
    let after = run(3, "echo \"mark=$MARK\"");
    assert!(
        after.contains("mark=\\\\n") || after.contains("mark=\\n"),
        "fresh shell: {after}"
    );
    assert!(after.contains("cancelled"), "the note says why: {after}");
}

#[test]
fn a_long_call_becomes_a_task_whose_status_changes_are_told() {
    let s = server();
    let mut c = McpClient::new(&s);
    let init = c.initialize_with(
        "2025-11-25",
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    );
    assert!(
        init["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "{init}"
    );
    let rx = c.listen();

    let created = c.call(1, "hostile_sleep", json!({"ms": 1500}));
    let task = &created["result"];
    assert_eq!(task["resultType"], "task", "{created}");
    let id = task["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"));
    assert_eq!(task["status"], "working", "{created}");

    let told = next_of(&rx, "notifications/tasks", Duration::from_secs(20));
    assert_eq!(told["params"]["taskId"], id, "{told}");
    assert_eq!(told["params"]["status"], "completed", "{told}");
    assert_eq!(
        told["params"]["result"]["content"][0]["text"], "woke up",
        "the result comes with the status: {told}"
    );
    let got = c.request(2, "tasks/get", json!({"taskId": id}));
    assert_eq!(got["result"]["status"], "completed", "{got}");
}
