//! The plugin admin API: `GET /plugins`, `PUT` / `DELETE /plugins/{name}`,
//! behind the admin token; bad uploads change nothing.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use reqwest::blocking::multipart;
use serde_json::{Value, json};
use toolhost_e2e::{PluginsDir, Server, component, kind, sha256_hex, wait_for};

const TOKEN: &str = "test-admin-token-0123456789";

fn server() -> Server {
    Server::start_env(
        PluginsDir::new().add("calc", "calc"),
        None,
        &[("TOOLHOST_ADMIN_TOKEN", TOKEN)],
    )
    .unwrap()
}

/// A client that does not reuse connections: the server may answer a refused
/// upload before reading its body and then close the connection.
fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

fn put(s: &Server, name: &str, token: Option<&str>, body: Vec<u8>) -> (u16, Value) {
    let mut req = client()
        .put(s.url(&format!("/plugins/{name}")))
        .header("content-type", "application/wasm")
        .body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().unwrap();
    (r.status().as_u16(), r.json().unwrap_or(Value::Null))
}

#[test]
fn admin_routes_need_a_configured_token() {
    let s = Server::start(PluginsDir::new().add("calc", "calc"));
    let calc = std::fs::read(component("calc").0).unwrap();
    let (status, body) = put(&s, "maths", Some("anything"), calc);
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("TOOLHOST_ADMIN_TOKEN")
    );
    let r = client().delete(s.url("/plugins/calc")).send().unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // Reading the status needs no token.
    let (status, body) = s.get("/plugins");
    assert_eq!(status, 200);
    assert_eq!(body["plugins"][0]["name"], "calc");
    assert_eq!(body["plugins"][0]["state"], "ready");
    assert_eq!(body["plugins"][0]["tools"], json!(["calc_evaluate"]));
    assert!(body["plugins"][0]["loaded_at"].as_u64().unwrap() > 1_700_000_000_000);
    // What the host has is admin-only too.
    assert_eq!(s.get("/system").0, 403);
}

#[test]
fn refusals_are_audited_with_their_request_id() {
    let s = server();
    let r = client()
        .get(s.url("/system"))
        .header("x-request-id", "audit-me-1")
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = client()
        .get(s.url("/system"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().unwrap();
    assert!(body["cpu_count"].as_u64().unwrap() >= 1, "{body}");
    let seen = wait_for(Duration::from_secs(5), || {
        s.log()
            .lines()
            .find(|l| l.contains("request refused") && l.contains("audit-me-1"))
            .map(str::to_owned)
    });
    let line = seen.unwrap_or_else(|| panic!("no audit line:\n{}", s.log()));
    assert!(
        line.contains("toolhost::audit") && line.contains("401"),
        "{line}"
    );
}

#[test]
fn upload_replace_and_delete() {
    let s = server();
    let calc = std::fs::read(component("calc").0).unwrap();

    assert_eq!(put(&s, "maths", None, calc.clone()).0, 401);
    assert_eq!(
        put(&s, "maths", Some("wrong-token-wrong-token"), calc.clone()).0,
        401
    );

    // Raw body: a new plugin (201), written into the directory, serving.
    let (status, body) = put(&s, "maths", Some(TOKEN), calc.clone());
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["state"], "ready");
    assert_eq!(body["version"], sha256_hex(&calc));
    assert!(s.plugins_dir().join("maths.wasm").is_file());
    let (status, out) = s.invoke("maths_evaluate", json!({"expression": "2+2"}));
    assert_eq!((status, out["result"]["value"].as_f64()), (200, Some(4.0)));

    // Multipart with a manifest: replaces (200), the manifest's limits apply.
    let form = multipart::Form::new()
        .part(
            "component",
            multipart::Part::bytes(calc.clone()).file_name("maths.wasm"),
        )
        .text(
            "manifest",
            "description = \"Maths.\"\n[limits]\nfuel = 7654321\n",
        );
    let r = client()
        .put(s.url("/plugins/maths"))
        .bearer_auth(TOKEN)
        .multipart(form)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (_, tool) = s.get("/tools/maths_evaluate");
    assert_eq!(tool["limits"]["fuel"], 7654321);
    assert!(s.plugins_dir().join("maths.toml").is_file());

    // Bad uploads: refused with the reason, the old version keeps serving.
    let (status, body) = put(&s, "maths", Some(TOKEN), b"not wasm".to_vec());
    assert_eq!(status, 422);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a WebAssembly file"),
        "{body}"
    );
    let wrong = std::fs::read(component("wrong-version").0).unwrap();
    let (status, body) = put(&s, "maths", Some(TOKEN), wrong);
    assert_eq!(status, 422);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("toolhost:plugin@0.9.0"),
        "{body}"
    );
    let form = multipart::Form::new()
        .part("component", multipart::Part::bytes(calc.clone()))
        .text("manifest", "[limits]\nfuel = -1\n");
    let r = client()
        .put(s.url("/plugins/maths"))
        .bearer_auth(TOKEN)
        .multipart(form)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 422);
    assert_eq!(
        std::fs::read(s.plugins_dir().join("maths.wasm")).unwrap(),
        calc
    );
    let (status, _) = s.invoke("maths_evaluate", json!({"expression": "1"}));
    assert_eq!(status, 200);

    // Names that are not plugin names (path separators, dots) are refused.
    for name in ["..%2Fetc", "a%2Fb", "Maths", "a.b", "x_y"] {
        let (status, body) = put(&s, name, Some(TOKEN), calc.clone());
        assert_eq!(status, 400, "{name}: {body}");
        assert_eq!(kind(&body), "invalid_input");
    }
    let (status, _) = put(&s, "maths", Some(TOKEN), Vec::new());
    assert_eq!(status, 400);

    // Delete: files and tools go; a second delete is 404.
    let r = client()
        .delete(s.url("/plugins/maths"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(!s.plugins_dir().join("maths.wasm").exists());
    assert!(!s.plugins_dir().join("maths.toml").exists());
    assert_eq!(s.invoke("maths_evaluate", json!({})).0, 404);
    let r = client()
        .delete(s.url("/plugins/maths"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(s.tool_ids(), ["calc_evaluate"]);
}

/// Connections beyond `[server] max_connections_per_peer` are answered 503
/// and closed; once some close, requests are served again.
#[test]
fn connections_beyond_the_limit_are_refused_and_room_comes_back() {
    let s = Server::start_with(
        PluginsDir::new().add("calc", "calc"),
        Some("[server]\nmax_connections_per_peer = 8\n"),
    )
    .unwrap();
    let addr = s.base.trim_start_matches("http://").to_owned();
    let mut held = Vec::new();
    let mut refused = None;
    for _ in 0..20 {
        let mut conn = TcpStream::connect(&addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut answer = vec![0u8; 1024];
        match conn.read(&mut answer) {
            // An admitted connection says nothing until asked.
            Err(_) => held.push(conn),
            Ok(n) => {
                refused = Some(String::from_utf8_lossy(&answer[..n]).into_owned());
                break;
            }
        }
    }
    let refused = refused.expect("a connection beyond the limit is refused");
    assert!(held.len() <= 8, "{} admitted", held.len());
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("Retry-After: 1") && refused.contains("too many open connections"));
    drop(held);
    let back = wait_for(Duration::from_secs(5), || {
        (s.invoke("calc_evaluate", json!({"expression": "1"})).0 == 200).then_some(())
    });
    assert!(back.is_some(), "served again once connections closed");
    assert!(s.log().contains("connection refused: too many open"));
}

/// A connection whose request headers do not arrive within `[server]
/// header_timeout_ms` (a slow-header client, or a kept-alive connection
/// left idle) is closed, and counts no more towards the limits; a request
/// in time is served.
#[test]
fn slow_headers_and_idle_connections_are_closed() {
    let s = Server::start_with(
        PluginsDir::new().add("calc", "calc"),
        Some("[server]\nheader_timeout_ms = 800\nmax_connections_per_peer = 4\n"),
    )
    .unwrap();
    let addr = s.base.trim_start_matches("http://").to_owned();
    // Closed by the server: the read ends (EOF, or a reset) within the time.
    let closed_within = |conn: &mut TcpStream, limit: Duration| {
        conn.set_read_timeout(Some(limit)).unwrap();
        let started = Instant::now();
        let mut buf = [0u8; 4096];
        loop {
            match conn.read(&mut buf) {
                Ok(0) => return Some(started.elapsed()),
                Ok(_) => continue,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    return None;
                }
                Err(_) => return Some(started.elapsed()),
            }
        }
    };
    // The harness's own kept-alive connection (its readiness polls) counts
    // toward this peer's four until the server closes it, idle, after the
    // header timeout: let that pass first.
    std::thread::sleep(Duration::from_millis(1500));
    // Headers started, never finished: four of them, the peer's whole room.
    let mut slow: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut c = TcpStream::connect(&addr).unwrap();
            write!(c, "GET /health HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ").unwrap();
            c
        })
        .collect();
    for c in &mut slow {
        let took = closed_within(c, Duration::from_secs(5));
        assert!(took.is_some(), "a slow-header connection was kept past 5 s");
    }
    // A kept-alive connection: served, then closed once idle.
    let mut conn = TcpStream::connect(&addr).unwrap();
    write!(conn, "GET /health HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = vec![0u8; 1024];
    let n = conn.read(&mut answer).unwrap();
    assert!(
        String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer[..n])
    );
    assert!(
        closed_within(&mut conn, Duration::from_secs(5)).is_some(),
        "an idle kept-alive connection was kept past 5 s"
    );
    // The room is back: a request in time is served.
    assert_eq!(s.invoke("calc_evaluate", json!({"expression": "1"})).0, 200);
}

/// On every surface, a body declared over `[server] max_body_kb` is refused
/// (413, the connection closed) without waiting for it: only a short linger
/// for what the client is already sending (a second), not `body_timeout_ms`.
#[test]
fn a_declared_body_over_the_limit_is_refused_at_once_on_every_surface() {
    let s = server();
    let addr = s.base.trim_start_matches("http://").to_owned();
    for path in ["/tools/calc_evaluate/invoke", "/mcp", "/execute_tool"] {
        let mut conn = TcpStream::connect(&addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            conn,
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
            1u64 << 30
        )
        .unwrap();
        let started = Instant::now();
        let mut answer = vec![0u8; 4096];
        let n = conn.read(&mut answer).unwrap();
        let head = String::from_utf8_lossy(&answer[..n]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 413"), "{path}: {head}");
        assert!(head.contains("connection: close"), "{path}: {head}");
        assert!(started.elapsed() < Duration::from_secs(5), "{path}");
    }
    assert_eq!(s.invoke("calc_evaluate", json!({"expression": "1"})).0, 200);
}

#[test]
fn a_one_gigabyte_upload_is_refused_without_reading_it() {
    let mut s = server();
    let rss_before = s.rss_kib().unwrap();
    let addr = s.base.trim_start_matches("http://").to_owned();
    let mut conn = TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        conn,
        "PUT /plugins/huge HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
        1u64 << 30
    )
    .unwrap();
    // Send a little of the body, then read the answer.
    let started = Instant::now();
    let _ = conn.write_all(&vec![0u8; 1 << 20]);
    let mut answer = vec![0u8; 4096];
    let n = conn.read(&mut answer).unwrap();
    let head = String::from_utf8_lossy(&answer[..n]);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(head.contains("max_upload_mb"), "{head}");
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(conn);
    assert!(s.is_alive());
    assert!(
        s.rss_kib().unwrap() < rss_before + 64 * 1024,
        "the body was not buffered"
    );
    assert_eq!(s.invoke("calc_evaluate", json!({"expression": "1"})).0, 200);
    assert!(s.plugin("huge").is_none());
}
