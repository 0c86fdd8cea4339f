//! The native HTTP API against the real binary and the example plugins.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::{PluginsDir, Server, kind};

fn examples() -> Server {
    Server::start(PluginsDir::new().add("calc", "calc").add("files", "files"))
}

#[test]
fn discovery_schema_and_invoke() {
    let s = examples();
    assert_eq!(s.get("/health"), (200, json!({"status": "ok"})));

    let (status, body) = s.get("/tools");
    assert_eq!(status, 200);
    let ids: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tool_id"].as_str().unwrap())
        .collect();
    for id in [
        "calc_evaluate",
        "files_list",
        "files_modify",
        "files_read",
        "files_write",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    let calc = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool_id"] == "calc_evaluate")
        .unwrap();
    assert_eq!(calc["category"], "calc");
    assert_eq!(calc["name"], "evaluate");
    assert_eq!(calc["status"], "active");
    assert!(!calc["description"].as_str().unwrap().is_empty());

    let (status, schema) = s.get("/tools/calc_evaluate/schema");
    assert_eq!(status, 200);
    assert_eq!(schema["tool_id"], "calc_evaluate");
    assert_eq!(
        schema["input_schema"]["properties"]["expression"]["type"],
        "string"
    );
    assert!(
        schema["output_schema"].is_object(),
        "calc returns typed JSON: {schema}"
    );

    let (status, out) = s.invoke("calc_evaluate", json!({"expression": "2 * (3 + 4) - 2^3"}));
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["status"], "success");
    assert_eq!(out["error"], Value::Null);
    assert_eq!(out["result"]["value"], 6.0);
    assert_eq!(out["content"][0]["type"], "json");

    let (status, tool) = s.get("/tools/calc_evaluate");
    assert_eq!(status, 200);
    assert_eq!(tool["backend"], "wasm");
    assert_eq!(
        tool["limits"]["memory_mb"], 16,
        "limits come from calc.toml"
    );
    assert_eq!(tool["stats"]["call_count"], 1);
    assert_eq!(tool["stats"]["error_rate"], 0.0);
    assert!(tool["stats"]["last_used_time"].is_u64());
    assert_eq!(tool["version"].as_str().unwrap().len(), 64);
}

#[test]
fn bad_requests_get_clear_errors_and_the_server_carries_on() {
    let mut s = Server::start_with(
        PluginsDir::new().add("calc", "calc"),
        Some("[server]\nmax_body_kb = 64\n"),
    )
    .unwrap();
    let post = |path: &str, body: &str| {
        let r = s
            .client()
            .post(s.url(path))
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .unwrap();
        (
            r.status().as_u16(),
            r.json::<Value>().unwrap_or(Value::Null),
        )
    };

    let (status, body) = post("/tools/calc_evaluate/invoke", "{\"params\": {");
    assert_eq!((status, kind(&body)), (400, "invalid_input"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );

    let (status, body) = post(
        "/tools/calc_evaluate/invoke",
        r#"{"params": {"expression": 12}}"#,
    );
    assert_eq!((status, kind(&body)), (422, "invalid_input"), "{body}");
    assert!(
        body["error"]["details"][0]
            .as_str()
            .unwrap()
            .contains("/expression"),
        "{body}"
    );

    let (status, body) = post("/tools/calc_evaluate/invoke", r#"{"params": {}}"#);
    assert_eq!((status, kind(&body)), (422, "invalid_input"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expression"),
        "{body}"
    );

    let (status, body) = post("/tools/calc_evaluate/invoke", r#"{"parms": {}}"#);
    assert_eq!(
        (status, kind(&body)),
        (422, "invalid_input"),
        "unknown fields are refused: {body}"
    );

    let (status, body) = post("/tools/nope_nothing/invoke", r#"{"params": {}}"#);
    assert_eq!((status, kind(&body)), (404, "not_found"), "{body}");

    let big = format!(
        r#"{{"params": {{"expression": "{}"}}}}"#,
        "1+".repeat(50_000)
    );
    let (status, body) = post("/tools/calc_evaluate/invoke", &big);
    assert_eq!((status, kind(&body)), (413, "invalid_input"), "{body}");

    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let (status, _) = post(
        "/tools/calc_evaluate/invoke",
        &format!(r#"{{"params": {deep}}}"#),
    );
    assert!(
        status == 400 || status == 413,
        "deep nesting refused, got {status}"
    );

    // The plugin's own invalid-input error.
    let (status, body) = s.invoke("calc_evaluate", json!({"expression": "1/0"}));
    assert_eq!((status, kind(&body)), (422, "invalid_input"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("division by zero"),
        "{body}"
    );

    let (status, body) = s.get("/no/such/route");
    assert_eq!((status, kind(&body)), (404, "not_found"));
    let (status, _) = s.get("/tools/nope_nothing/schema");
    assert_eq!(status, 404);

    let r = s
        .client()
        .post(s.url("/tools/calc_evaluate/invoke"))
        .header("x-toolhost-session", "../../etc")
        .body(r#"{"params": {"expression": "1"}}"#)
        .send()
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        400,
        "a session id is a directory name: no traversal"
    );

    assert!(s.is_alive());
    let (status, out) = s.invoke("calc_evaluate", json!({"expression": "1+1"}));
    assert_eq!((status, out["result"]["value"].as_f64()), (200, Some(2.0)));
}

/// A body sent where no route reads one (a `DELETE` whose body is chunked
/// and ends a moment after its head, as plugins built with the SDK before
/// 2026-11-30 sent) is read before the answer, and the connection stays
/// open: answered at once, hyper closed the connection under the answer
/// while the client was still sending (wasmtime's client reported
/// `IncompleteMessage`, the answer lost). More than the body limit there is
/// refused, and the refusal reaches a client still sending.
#[test]
fn a_body_where_none_is_read_is_read_before_the_answer() {
    use std::io::{Read, Write};
    let mut s = examples();
    let addr = s
        .url("/")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        conn,
        "DELETE /sessions/no-such-session HTTP/1.1\r\nhost: {addr}\r\n\
         transfer-encoding: chunked\r\n\r\n"
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // The body's end, then a second request on the same connection.
    let _ = write!(
        conn,
        "0\r\n\r\nGET /health HTTP/1.1\r\nhost: {addr}\r\n\r\n"
    );
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("HTTP/1.1 200") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    let seen = String::from_utf8_lossy(&seen).to_ascii_lowercase();
    let first = seen.split("\r\n\r\n").next().unwrap_or_default();
    assert!(first.starts_with("http/1.1 404"), "{seen}");
    assert!(!first.contains("connection: close"), "{seen}");
    assert!(
        seen.contains("http/1.1 200"),
        "the connection stayed open: {seen}"
    );

    /// A body of `size` bytes whose end comes 300 ms after the head.
    struct Late {
        size: usize,
        slept: bool,
    }
    impl Read for Late {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if !self.slept {
                self.slept = true;
                std::thread::sleep(Duration::from_millis(300));
            }
            let n = self.size.min(buf.len());
            buf[..n].fill(b' ');
            self.size -= n;
            Ok(n)
        }
    }
    // Over `[server] max_body_kb` (4 MiB): refused, and answered.
    let r = s
        .client()
        .delete(s.url("/sessions/no-such-session"))
        .body(reqwest::blocking::Body::new(Late {
            size: 6 << 20,
            slept: false,
        }))
        .send()
        .expect("the refusal reached the client");
    assert_eq!(r.status().as_u16(), 413);
    assert!(s.is_alive());
}

#[test]
fn sessions_own_their_workspace_and_files_stay_inside() {
    let s = examples();
    // A call without a session header gets a new session, returned in the header.
    let r = s
        .client()
        .post(s.url("/tools/files_list/invoke"))
        .body(r#"{"params": {}}"#)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let new_id = r.headers()["x-toolhost-session"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(new_id.len() >= 16);

    let (status, out) = s.invoke_in(
        "alice",
        "files_write",
        json!({"path": "notes/todo.txt", "content": "one\ntwo\nthree\n"}),
    );
    assert_eq!(status, 200, "{out}");
    let (status, out) = s.invoke_in("alice", "files_read", json!({"path": "notes/todo.txt"}));
    assert_eq!(
        (status, out["result"].as_str()),
        (200, Some("one\ntwo\nthree\n")),
        "{out}"
    );
    let (status, out) = s.invoke_in(
        "alice",
        "files_modify",
        json!({"path": "notes/todo.txt", "start_line": 2, "end_line": 2, "new_text": "TWO"}),
    );
    assert_eq!(status, 200, "{out}");
    let (_, out) = s.invoke_in("alice", "files_read", json!({"path": "notes/todo.txt"}));
    assert_eq!(out["result"], "one\nTWO\nthree\n");
    let (status, out) = s.invoke_in("alice", "files_list", json!({}));
    assert_eq!(status, 200, "{out}");
    assert!(out.to_string().contains("todo.txt"), "{out}");

    // The file is really in alice's workspace on the host, and only there.
    let host_file = s.data.path().join("data/workspaces/alice/notes/todo.txt");
    assert_eq!(
        std::fs::read_to_string(&host_file).unwrap(),
        "one\nTWO\nthree\n"
    );
    let (status, out) = s.invoke_in("bob", "files_read", json!({"path": "notes/todo.txt"}));
    assert_eq!(status, 422, "bob cannot see alice's files: {out}");

    // Escapes are refused: `..`, absolute paths, and a symlink pointing out.
    for path in [
        "../bob/x.txt",
        "/etc/passwd",
        "notes/../../x",
        "/workspace/../etc/passwd",
    ] {
        let (status, out) = s.invoke_in("alice", "files_read", json!({"path": path}));
        assert_eq!(
            (status, kind(&out)),
            (422, "invalid_input"),
            "{path}: {out}"
        );
        let (status, out) = s.invoke_in(
            "alice",
            "files_write",
            json!({"path": path, "content": "x"}),
        );
        assert_eq!(
            (status, kind(&out)),
            (422, "invalid_input"),
            "{path}: {out}"
        );
    }
    std::os::unix::fs::symlink("/etc", s.data.path().join("data/workspaces/alice/etc-link"))
        .unwrap();
    let (status, out) = s.invoke_in("alice", "files_read", json!({"path": "etc-link/passwd"}));
    assert_ne!(
        status, 200,
        "a symlink out of the workspace is not followed: {out}"
    );
    assert!(!out.to_string().contains("root:"), "{out}");
    let (status, out) = s.invoke_in(
        "alice",
        "files_write",
        json!({"path": "etc-link/evil", "content": "x"}),
    );
    assert_ne!(status, 200, "{out}");
    assert!(!std::path::Path::new("/etc/evil").exists());
}

#[test]
fn invoke_streams_progress_over_sse() {
    let s = Server::start(PluginsDir::new().add("hostile", "hostile"));
    let r = s
        .client()
        .post(s.url("/tools/hostile_host_calls/invoke"))
        .header("accept", "text/event-stream")
        .body(r#"{"params": {"key": "greeting"}}"#)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = r.text().unwrap();
    let progress = text.find("event: progress").expect(&text);
    let result = text.find("event: result").expect(&text);
    assert!(progress < result, "{text}");
    // Each event is `data: {...}`: chunks with done:false, the result with done:true.
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{text}");
    assert_eq!(events[0]["done"], false);
    assert_eq!(events[0]["chunk"]["message"], "half");
    assert_eq!(events[0]["chunk"]["done"], 1.0);
    assert_eq!(events[0]["chunk"]["total"], 2.0);
    assert_eq!(events[1]["done"], true);
    assert_eq!(events[1]["status"], "success");
    assert!(
        text.contains("hello from the manifest"),
        "config import: {text}"
    );
    assert!(
        s.log().contains("hello from hostile"),
        "log import reaches the server log"
    );

    // The same call as plain JSON: config visible, unset keys are none.
    let (status, out) = s.invoke("hostile_host_calls", json!({"key": "nope"}));
    assert_eq!(
        (status, out["result"].as_str()),
        (200, Some("<unset>")),
        "{out}"
    );
}

#[test]
fn a_client_that_disconnects_mid_stream_cancels_the_call() {
    use std::io::{Read, Write};
    let s = Server::start(PluginsDir::new().add("hostile", "hostile"));
    let addr = s.base.trim_start_matches("http://").to_owned();
    let body = r#"{"params": {}, "stream": true}"#;
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "POST /tools/hostile_spin/invoke HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut head = [0u8; 256];
    let n = conn.read(&mut head).unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"));
    std::thread::sleep(Duration::from_millis(200));
    drop(conn);
    // The spin would end by its 2 s timeout and be counted; cancelled, it never is.
    std::thread::sleep(Duration::from_millis(3000));
    let (_, tool) = s.get("/tools/hostile_spin");
    assert_eq!(
        tool["stats"]["call_count"], 0,
        "the call was dropped with its client: {tool}"
    );
    let (status, _) = s.invoke("hostile_echo", json!({"value": 1}));
    assert_eq!(status, 200);
}

#[test]
fn descriptions_in_openai_lagent_and_mcp_formats() {
    let s = examples();
    let (status, body) = s.get("/tools?format=openai");
    assert_eq!(status, 200);
    let tools = body["tools"].as_array().unwrap();
    assert!(tools.len() >= 5);
    for t in tools {
        assert_eq!(t["type"], "function");
        let name = t["function"]["name"].as_str().unwrap();
        assert!(
            !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "{name} is not an OpenAI function name"
        );
        assert_eq!(t["function"]["parameters"]["type"], "object");
        assert!(t["function"]["description"].as_str().is_some());
    }

    let (_, body) = s.get("/tools?format=mcp");
    let calc = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "calc_evaluate")
        .unwrap();
    assert_eq!(calc["inputSchema"]["type"], "object");
    assert!(
        calc["outputSchema"].is_object(),
        "calc publishes an output schema: {calc}"
    );

    let (_, body) = s.get("/tools?format=lagent");
    let entries = body["tools"].as_array().unwrap();
    let files = entries
        .iter()
        .find(|e| e["name"] == "files")
        .expect("files toolkit");
    let read = files["api_list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "read")
        .unwrap();
    let path = read["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "path")
        .unwrap();
    assert_eq!(path["type"], "STRING");
    assert!(!path["description"].as_str().unwrap().is_empty());
    assert_eq!(read["required"], json!(["path"]));
    let calc = entries
        .iter()
        .find(|e| e["name"] == "calc_evaluate")
        .expect("a one-tool toolkit is the tool");
    assert_eq!(calc["parameters"][0]["name"], "expression");

    let (status, body) = s.get("/tools?format=yaml");
    assert_eq!(status, 400, "{body}");
}

/// Issue #37, item 1, without a browser: a loopback server answers its own
/// names only (DNS rebinding), on every route; a request carrying a foreign
/// `Origin` is refused, the server's own origin (the console) is not; a
/// JSON route refuses bodies typed as text or forms (415); CORS headers go
/// to listed origins only, whose preflights are answered. Refused calls
/// never run the tool.
#[test]
fn the_browser_guard_on_every_route() {
    let s = examples();
    let port = s.base.rsplit(':').next().unwrap().to_owned();
    let http = reqwest::blocking::Client::new();
    let calls = || s.get("/tools/calc_evaluate").1["stats"]["call_count"].as_u64();
    let before = calls();
    let body = json!({"params": {"expression": "6*7"}}).to_string();
    let send = |method: &str, path: &str, headers: &[(&str, &str)], body: &str| {
        let mut r = http.request(method.parse().unwrap(), s.url(path));
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        let r = r.body(body.to_owned()).send().unwrap();
        let cors = r.headers().get("access-control-allow-origin").cloned();
        (r.status().as_u16(), cors, r.text().unwrap())
    };
    let json_type = ("content-type", "application/json");
    for (method, path) in [
        ("GET", "/health"),
        ("GET", "/tools"),
        ("POST", "/tools/calc_evaluate/invoke"),
        ("POST", "/execute_tool"),
        ("POST", "/get_cookie"),
        ("GET", "/ui/"),
        ("POST", "/mcp"),
    ] {
        for host in [
            "evil.example",
            &format!("evil.example:{port}"),
            "localhost.",
            "127.1",
        ] {
            let (status, _, text) = send(method, path, &[("host", host), json_type], &body);
            assert_eq!(status, 403, "{method} {path} Host {host}: {text}");
        }
        let (status, _, text) = send(
            method,
            path,
            &[("origin", "http://evil.example"), json_type],
            &body,
        );
        assert_eq!(status, 403, "{method} {path} from a foreign origin: {text}");
        assert!(text.contains("cross-origin"), "{text}");
    }
    assert_eq!(calls(), before, "a refused request ran the tool");

    // The server's own names and origin; JSON typed or untyped.
    let invoke = "/tools/calc_evaluate/invoke";
    let own = format!("http://127.0.0.1:{port}");
    for headers in [
        vec![("host", format!("localhost:{port}"))],
        vec![
            ("host", format!("127.0.0.1:{port}")),
            ("origin", own.clone()),
        ],
        vec![("content-type", "application/json; charset=utf-8".to_owned())],
        vec![("content-type", "application/vnd.api+json".to_owned())],
    ] {
        let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (status, cors, text) = send("POST", invoke, &h, &body);
        assert_eq!(status, 200, "{headers:?}: {text}");
        assert!(cors.is_none(), "CORS only for listed origins");
    }
    // Bodies a page may send without a preflight are not JSON calls.
    for kind in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let (status, _, text) = send("POST", invoke, &[("content-type", kind)], &body);
        assert_eq!(status, 415, "{kind}: {text}");
        assert!(text.contains("application/json"), "{text}");
        let (status, _, text) = send(
            "POST",
            "/execute_tool",
            &[("content-type", kind)],
            r#"{"tool_name":"calc_evaluate","arguments":{"expression":"1"}}"#,
        );
        assert_eq!(status, 415, "XAgent, {kind}: {text}");
        assert!(text.contains("detail"), "XAgent's shape: {text}");
    }
    let preflight = [
        ("origin", "http://evil.example"),
        ("access-control-request-method", "POST"),
        ("access-control-request-headers", "content-type"),
    ];
    let (status, cors, _) = send("OPTIONS", invoke, &preflight, "");
    assert_eq!((status, cors), (403, None));
    assert_eq!(calls().unwrap(), before.unwrap() + 4);

    // A listed origin: preflight answered, answers readable.
    let config = "[server]\nallowed_origins = [\"https://agents.example\"]\nallowed_hosts = [\"toolhost.internal\"]\n";
    let listed = Server::start_with(PluginsDir::new().add("calc", "calc"), Some(config)).unwrap();
    let r = http
        .request(reqwest::Method::OPTIONS, listed.url(invoke))
        .header("origin", "https://agents.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type, authorization",
        )
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let h = r.headers();
    assert_eq!(h["access-control-allow-origin"], "https://agents.example");
    assert!(
        h["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    assert_eq!(
        h["access-control-allow-headers"],
        "content-type, authorization"
    );
    let r = http
        .post(listed.url(invoke))
        .header("origin", "https://agents.example")
        .header("host", "toolhost.internal")
        .json(&json!({"params": {"expression": "6*7"}}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://agents.example"
    );
    assert!(
        r.headers()["access-control-expose-headers"]
            .to_str()
            .unwrap()
            .contains("mcp-session-id")
    );
    let r = http
        .post(listed.url(invoke))
        .header("origin", "https://agents.example.evil")
        .json(&json!({"params": {"expression": "1"}}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
}
