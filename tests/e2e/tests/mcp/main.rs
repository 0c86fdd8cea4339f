//! MCP over streamable HTTP at `/mcp`: the official Python client end to end
//! (list, call, errors, progress, cancellation, sessions, list_changed), and
//! raw JSON-RPC for version negotiation, session mapping, cancellation on the
//! server's side and the bad input a real client never sends.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_e2e::mcp::{McpClient, next_of};
use toolhost_e2e::{PluginsDir, Server, component, python_venv, run_python, wait_for};

mod cancel;
mod sessions;

fn server() -> Server {
    Server::start(
        PluginsDir::new()
            .add("calc", "calc")
            .add("files", "files")
            .add("hostile", "hostile"),
    )
}

/// The Python of the venv with the official MCP SDK (`tests/venv.sh`
/// installs it on first use).
fn mcp_python() -> PathBuf {
    python_venv("tests/mcp/requirements.txt")
}

#[test]
fn the_official_python_client_lists_calls_and_streams() {
    let s = server();
    let python = mcp_python();
    let (extra, _) = component("calc");
    let url = s.url("/mcp");
    let (ok, report) = run_python(
        &python,
        "tests/mcp/mcp_client.py",
        &[
            "--url".as_ref(),
            url.as_ref(),
            "--plugins-dir".as_ref(),
            s.plugins_dir().as_os_str(),
            "--extra-plugin".as_ref(),
            extra.as_os_str(),
        ],
    );
    assert!(
        ok,
        "the MCP Python client failed:\n{report}\nserver log:\n{}",
        s.log()
    );
    for scenario in [
        "list",
        "call",
        "tool_error",
        "bad_arguments",
        "unknown_tool",
        "limit",
        "progress",
        "cancel",
        "session",
        "list_changed",
        "sdk_warnings",
    ] {
        assert!(
            report
                .lines()
                .any(|l| l.starts_with(&format!("ok {scenario} "))),
            "scenario {scenario} did not pass:\n{report}"
        );
    }
}

#[test]
fn initialize_negotiates_the_versions_clients_ask_for() {
    let s = server();
    for version in ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] {
        let mut c = McpClient::new(&s);
        let info = c.initialize(version);
        assert_eq!(info["protocolVersion"], version, "{info}");
        assert_eq!(info["serverInfo"]["name"], "toolhost");
        assert_eq!(info["capabilities"]["tools"]["listChanged"], true, "{info}");
        assert!(c.session.is_some(), "a session id for {version}");
        assert!((200..300).contains(&c.close()));
    }
    // A version the server does not know: it answers with its newest one
    // that still has an initialize handshake.
    let mut c = McpClient::new(&s);
    let info = c.initialize("2099-01-01");
    assert_eq!(info["protocolVersion"], "2025-11-25", "{info}");
}

/// 2026-07-28: no initialize, no session; each request carries its version
/// and capabilities in `_meta`.
#[test]
fn stateless_2026_07_28_requests_list_and_call() {
    let s = server();
    let c = McpClient::new(&s);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toolhost-e2e", "version": "0"}
    });
    // A stateless request, in the toolhost session `pinned` names if any.
    let post = |id: i64, method: &str, mut params: Value, pinned: Option<&str>| {
        params["_meta"] = meta.clone();
        let mut r = c.http.post(s.url("/mcp")).header("mcp-method", method);
        if let Some(name) = params["name"].as_str() {
            r = r.header("mcp-name", name);
        }
        if let Some(session) = pinned {
            r = r.header("x-toolhost-session", session);
        }
        r.header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .body(
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
            )
            .send()
            .unwrap()
    };
    let send = |id: i64, method: &str, params: Value| {
        let r = post(id, method, params, None);
        // Nothing comes before the result: plain JSON, not a stream.
        let content_type = r.headers()["content-type"].to_str().unwrap().to_owned();
        let answer = toolhost_e2e::mcp::read(r);
        assert_eq!(answer.status, 200, "{method}: {}", answer.text);
        assert_eq!(content_type, "application/json", "{method}");
        assert!(answer.session.is_none(), "no session in 2026-07-28");
        answer
            .response(id)
            .cloned()
            .unwrap_or_else(|| panic!("{}", answer.text))
    };
    let list = send(1, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|t| t["name"] == "calc_evaluate"), "{list}");
    let call = send(
        2,
        "tools/call",
        json!({"name": "calc_evaluate", "arguments": {"expression": "6*7"}}),
    );
    assert_eq!(call["result"]["isError"], false, "{call}");
    assert_eq!(call["result"]["structuredContent"]["value"], 42.0, "{call}");
    let write = send(
        3,
        "tools/call",
        json!({"name": "files_write", "arguments": {"path": "a.txt", "content": "x"}}),
    );
    assert_eq!(write["result"]["isError"], false, "{write}");
    // Each stateless request had a toolhost session of its own, closed with it.
    let workspaces = s.data.path().join("data/workspaces");
    let left = wait_for(Duration::from_secs(5), || {
        let n = std::fs::read_dir(&workspaces)
            .map(|d| d.count())
            .unwrap_or(0);
        (n == 0).then_some(())
    });
    assert!(
        left.is_some(),
        "stateless sessions are closed with their request"
    );
    assert!(
        !write.to_string().contains("resource_link"),
        "no link into a workspace gone with its request: {write}"
    );

    // A session named by X-Toolhost-Session outlives its requests: a listen
    // stream subscribed to one of its files hears of a change by another
    // request, and the writing call links the file.
    let uri = "toolhost://workspace/notes/b.txt";
    let listen = post(
        4,
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": [uri, "file:///etc/passwd"]}}),
        Some("pinned-1"),
    );
    assert_eq!(listen.status(), 200);
    let rx = toolhost_e2e::mcp::sse_messages(listen);
    let ack = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("acknowledged");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "first on the stream: {ack}"
    );
    let accepted = ack.to_string();
    assert!(
        accepted.contains(uri),
        "the workspace file is accepted: {ack}"
    );
    assert!(
        !accepted.contains("/etc/passwd"),
        "a foreign URI is not: {ack}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let write = toolhost_e2e::mcp::read(post(
        5,
        "tools/call",
        json!({"name": "files_write", "arguments": {"path": "notes/b.txt", "content": "hi"}}),
        Some("pinned-1"),
    ));
    let write = write.response(5).cloned().expect("answer");
    assert_eq!(write["result"]["isError"], false, "{write}");
    assert!(
        write["result"]["content"].as_array().is_some_and(|c| c
            .iter()
            .any(|b| b["type"] == "resource_link" && b["uri"] == uri)),
        "{write}"
    );
    let note = next_of(
        &rx,
        "notifications/resources/updated",
        Duration::from_secs(5),
    );
    assert_eq!(note["params"]["uri"], uri, "{note}");
    assert!(
        note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_string()
            || note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_number(),
        "{note}"
    );
}

#[test]
fn results_errors_and_limits_map_onto_mcp() {
    let s = server();
    let mut c = McpClient::new(&s);
    c.initialize("2025-11-25");

    let ok = c.call(1, "calc_evaluate", json!({"expression": "2^10"}));
    let result = &ok["result"];
    assert_eq!(result["isError"], false, "{ok}");
    assert_eq!(result["structuredContent"]["value"], 1024.0);
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["value"], 1024.0);
    assert!(result["_meta"]["toolhost/version"].is_string(), "{ok}");

    let cases = [
        (
            "hostile_fail",
            json!({"invalid": false}),
            "tool_error",
            "tool failed on purpose",
        ),
        (
            "hostile_fail",
            json!({"invalid": true}),
            "invalid_input",
            "bad input on purpose",
        ),
        (
            "calc_evaluate",
            json!({"expr": "1"}),
            "invalid_input",
            "schema",
        ),
        ("hostile_spin", json!({}), "timeout", "time limit"),
        ("hostile_hog", json!({}), "out_of_memory", "memory"),
        ("hostile_panic", json!({"message": "boom"}), "trap", "boom"),
    ];
    for (i, (tool, args, kind, text)) in cases.into_iter().enumerate() {
        let r = c.call(10 + i as i64, tool, args);
        let result = &r["result"];
        assert_eq!(result["isError"], true, "{tool}: {r}");
        assert_eq!(result["_meta"]["toolhost/error_kind"], kind, "{tool}: {r}");
        let message = result["content"][0]["text"].as_str().unwrap();
        assert!(message.starts_with(&format!("[{kind}]")), "{message}");
        assert!(message.contains(text), "{tool}: {message}");
    }

    // Protocol errors: unknown tool, arguments that are not an object.
    let r = c.call(30, "no_such_tool", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no_such_tool")
    );
    let r = c.request(
        31,
        "tools/call",
        json!({"name": "calc_evaluate", "arguments": [1, 2]}),
    );
    assert!(r["error"]["code"].as_i64().is_some(), "{r}");
    let r = c.request(32, "no/such/method", json!({}));
    assert_eq!(r["error"]["code"], -32601, "{r}");

    // Nothing above disturbed the session.
    let ok = c.call(40, "calc_evaluate", json!({"expression": "1+1"}));
    assert_eq!(ok["result"]["structuredContent"]["value"], 2.0, "{ok}");
}

#[test]
fn progress_reaches_the_client_before_the_result() {
    let s = server();
    let mut c = McpClient::new(&s);
    c.initialize("2025-11-25");
    let answer = c.send(&json!({
        "jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "hostile_host_calls", "arguments": {"key": "greeting"},
                   "_meta": {"progressToken": "tok-1"}}
    }));
    let progress = answer.notifications("notifications/progress");
    assert_eq!(progress.len(), 1, "{}", answer.text);
    let p = &progress[0]["params"];
    assert_eq!(p["progressToken"], "tok-1");
    assert_eq!(p["progress"], 1.0);
    assert_eq!(p["total"], 2.0);
    assert_eq!(p["message"], "half");
    let at = |pred: &dyn Fn(&Value) -> bool| answer.messages.iter().position(pred).unwrap();
    assert!(
        at(&|m| m["method"] == "notifications/progress") < at(&|m| m["id"] == 5),
        "progress comes first: {}",
        answer.text
    );
    assert_eq!(
        answer.response(5).unwrap()["result"]["content"][0]["text"],
        "hello from the manifest"
    );
    // Without a progress token there are no notifications.
    let answer = c.send(&json!({
        "jsonrpc": "2.0", "id": 6, "method": "tools/call",
        "params": {"name": "hostile_host_calls", "arguments": {"key": "greeting"}}
    }));
    assert!(answer.notifications("notifications/progress").is_empty());
}

/// A session's plain call is answered directly: with JSON when it is fast
/// (a `Content-Length`, one piece; rmcp would answer with a stream), with a
/// stream that starts at once when it is slow. A call with a progress token
/// goes through rmcp: its SSE answer, when fast, also leaves in one piece.
#[test]
fn fast_answers_leave_in_one_piece_and_slow_ones_still_stream() {
    let s = server();
    let mut c = McpClient::new(&s);
    c.initialize("2025-11-25");
    let call = |id: i64, tool: &str, arguments: Value, meta: Option<Value>| {
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
    };
    let content_type =
        |r: &reqwest::blocking::Response| r.headers()["content-type"].to_str().unwrap().to_owned();
    for (id, meta, expected) in [
        (1, None, "application/json"),
        (2, Some(json!({"progressToken": "p"})), "text/event-stream"),
    ] {
        // A call that ends within 20 ms is answered as JSON; on a machine
        // busy with other tests one may take longer (and stream), so the
        // fast case gets a few tries.
        let mut tries = 0;
        let fast = loop {
            tries += 1;
            let r = c
                .post()
                .body(call(
                    id,
                    "calc_evaluate",
                    json!({"expression": "1+1"}),
                    meta.clone(),
                ))
                .send()
                .unwrap();
            if tries >= 5 || content_type(&r).starts_with(expected) {
                break r;
            }
        };
        assert!(
            content_type(&fast).starts_with(expected),
            "{}",
            content_type(&fast)
        );
        assert!(
            fast.headers().get("content-length").is_some(),
            "a fast answer is sent whole: {:?}",
            fast.headers()
        );
        let answer = toolhost_e2e::mcp::read(fast);
        assert_eq!(
            answer.response(id).unwrap()["result"]["structuredContent"]["value"],
            2.0,
            "{}",
            answer.text
        );
        // 2025-11-25 results have no `resultType` (rmcp strips it for them).
        assert!(
            answer.response(id).unwrap()["result"]
                .get("resultType")
                .is_none()
        );
    }

    let started = Instant::now();
    let mut slow = c
        .post()
        .body(call(3, "hostile_sleep", json!({"ms": 1500}), None))
        .send()
        .unwrap();
    let head_after = started.elapsed();
    assert!(content_type(&slow).starts_with("text/event-stream"));
    assert!(
        slow.headers().get("content-length").is_none(),
        "{:?}",
        slow.headers()
    );
    // The first bytes (a comment) come before the call's end.
    let mut first = [0u8; 64];
    let n = std::io::Read::read(&mut slow, &mut first).unwrap();
    let first_after = started.elapsed();
    assert!(n > 0 && first.starts_with(b":"), "{:?}", &first[..n]);
    assert!(
        head_after < Duration::from_secs(1) && first_after < Duration::from_secs(1),
        "the stream started after {head_after:?} / {first_after:?}, not when the call ended"
    );
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut slow, &mut rest).unwrap();
    let data = toolhost_e2e::mcp::sse_data(&rest);
    let message: Value = serde_json::from_str(&data[0]).unwrap();
    assert_eq!(message["id"], 3, "{rest}");
    assert_eq!(message["result"]["isError"], false, "{rest}");
    assert!(started.elapsed() >= Duration::from_millis(1500));
}

#[test]
fn bad_input_on_mcp_gets_clear_errors_and_disturbs_nothing() {
    let s = server();
    let mut c = McpClient::new(&s);
    c.initialize("2025-11-25");

    // Not JSON, not JSON-RPC, a batch (removed from the protocol), a huge batch.
    for body in [
        "this is not json".to_owned(),
        "{\"jsonrpc\": \"2.0\", \"id\": 1}".to_owned(),
        "[]".to_owned(),
        json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]).to_string(),
        serde_json::to_string(&vec![json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}); 10_000]).unwrap(),
        "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": ".to_owned()
            + &"[".repeat(100_000),
    ] {
        let a = c.send_raw(body.clone());
        assert!(
            (400..500).contains(&a.status) || a.messages.iter().any(|m| m.get("error").is_some()),
            "{}...: {} {}",
            &body[..body.len().min(40)],
            a.status,
            a.text
        );
    }

    // Oversize body: refused before it is read in full.
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"hostile_echo\",\"arguments\":{{\"value\":\"{}\"}}}}}}",
        "x".repeat(5 << 20)
    );
    // Several times: a server that closed on a client still writing would
    // make some of these fail with a broken pipe instead of the 413.
    for _ in 0..5 {
        let mut fresh = McpClient::new(&s); // the server closes this connection
        fresh.session = c.session.clone();
        assert_eq!(fresh.send_raw(big.clone()).status, 413);
    }

    // Wrong headers.
    let r = c
        .http
        .post(s.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 406);
    let r = c
        .http
        .post(s.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);

    // An unknown session id, and a request without one after initialize.
    let mut ghost = McpClient::new(&s);
    ghost.session = Some("no-such-session".into());
    let a = ghost.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(a.status, 404, "{}", a.text);
    let r = c
        .http
        .post(s.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string())
        .send()
        .unwrap();
    assert!((400..500).contains(&r.status().as_u16()), "{}", r.status());

    // A foreign Host header (DNS rebinding) is refused on a loopback server.
    let r = c
        .http
        .post(s.url("/mcp"))
        .header("host", "evil.example")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);

    // The session still works, and so does the server.
    let ok = c.call(50, "calc_evaluate", json!({"expression": "3*3"}));
    assert_eq!(ok["result"]["structuredContent"]["value"], 9.0, "{ok}");
    assert_eq!(s.get("/health").0, 200);
}
