//! Capabilities a manifest grants, denied otherwise: outbound HTTP through
//! wasi:http with a host allow-list (the `fetch` plugin against pages served
//! on 127.0.0.1 by this test; a body-less request sent without a body, from
//! the conformance fixture's admin hook), and environment variables by name.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::json;
use toolhost_e2e::{PluginsDir, Server, component, kind};

/// A tiny HTTP server on 127.0.0.1: answers every request with `page` and
/// records the request lines it saw, and their header lines.
struct PageServer {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    headers: Arc<Mutex<Vec<Vec<String>>>>,
}

impl PageServer {
    fn start(page: &'static str) -> PageServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let headers = Arc::new(Mutex::new(Vec::new()));
        let (log, heads) = (seen.clone(), headers.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                let mut head = Vec::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push(line.trim().to_ascii_lowercase());
                }
                log.lock().unwrap().push(first.trim().to_owned());
                heads.lock().unwrap().push(head);
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                );
            }
        });
        PageServer {
            port,
            seen,
            headers,
        }
    }

    fn hits(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

const PAGE: &str = "<html><head><title>Test page</title><script>alert(1)</script></head>\
<body><h1>Hello agents</h1><p>Some <b>bold</b> text &amp; more.</p>\
<a href=\"/next?x=1\">Next</a></body></html>";

fn fetch_dir(allow: &str) -> PluginsDir {
    let (wasm, _) = component("fetch");
    PluginsDir::new()
        .write("fetch.wasm", std::fs::read(wasm).unwrap())
        .write(
            "fetch.toml",
            format!(
                "description = \"fetch\"\n[limits]\ntimeout_ms = 5000\n[http]\nallow = {allow}\n"
            ),
        )
}

#[test]
fn outbound_http_reaches_only_the_allowed_hosts() {
    let pages = PageServer::start(PAGE);
    let other = PageServer::start(PAGE);
    let s = Server::start(fetch_dir(&format!("[\"127.0.0.1:{}\"]", pages.port)));

    let (status, out) = s.invoke(
        "fetch_page",
        json!({"url": format!("http://127.0.0.1:{}/a/b", pages.port)}),
    );
    assert_eq!(status, 200, "{out}\n{}", s.log());
    let page = &out["result"];
    assert_eq!(page["status"], 200, "{out}");
    assert_eq!(page["title"], "Test page");
    assert_eq!(page["text"], "Hello agents\nSome bold text & more.\nNext");
    assert_eq!(
        page["links"],
        json!([{"text": "Next", "href": format!("http://127.0.0.1:{}/next?x=1", pages.port)}])
    );
    assert_eq!(pages.seen.lock().unwrap()[0], "GET /a/b HTTP/1.1");
    // Sent as a request without a body (the SDK opens none): not chunked
    // with an end still to come, which a server answering at once (and so
    // closing) made hyper report as `IncompleteMessage`, the answer lost.
    let head = pages.headers.lock().unwrap()[0].clone();
    assert!(
        !head
            .iter()
            .any(|h| h.starts_with("transfer-encoding") || h.starts_with("content-length")),
        "a GET went out with a body: {head:?}"
    );

    // Refused before any connection: another port, another name for the
    // same address, another scheme's default port.
    for url in [
        format!("http://127.0.0.1:{}/", other.port),
        format!("http://localhost:{}/", pages.port),
        "http://127.0.0.1/".to_owned(),
        "https://example.com/".to_owned(),
    ] {
        let (status, out) = s.invoke("fetch_page", json!({"url": url}));
        assert_eq!((status, kind(&out)), (500, "tool_error"), "{url}: {out}");
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("HTTP request denied"),
            "{url}: {out}"
        );
    }
    assert_eq!(other.hits(), 0, "the refused port was never contacted");
    assert_eq!(pages.hits(), 1, "localhost was refused before connecting");
    let log = s.log();
    assert!(
        log.contains("outbound HTTP refused") && log.contains(&format!("localhost:{}", pages.port)),
        "each refusal is logged: {log}"
    );

    // Bad input is the agent's fault.
    let (status, out) = s.invoke("fetch_page", json!({"url": "file:///etc/passwd"}));
    assert_eq!((status, kind(&out)), (422, "invalid_input"), "{out}");
}

/// A plugin's request without a body goes out without one. The SDK once
/// opened an empty body for every request and finished it after sending:
/// a `DELETE` then went out chunked with its end still to come, and a
/// server that answered at once closed the connection under its own answer
/// (hyper reported `IncompleteMessage`, the conformance fixture's admin call
/// failed under load).
#[test]
fn a_request_without_a_body_is_sent_without_one() {
    let admin = PageServer::start("{}");
    let (wasm, _) = component("conformance-fixture");
    let manifest = format!(
        "{}\n[config]\nadmin_url = \"http://127.0.0.1:{port}\"\n\
         [http]\nallow = [\"127.0.0.1:{port}\"]\nmethods = [\"PUT\", \"DELETE\"]\n",
        std::fs::read_to_string(
            toolhost_e2e::repo_root().join("tests/fixtures/conformance/test.toml")
        )
        .unwrap(),
        port = admin.port
    );
    let dir = PluginsDir::new()
        .write("test.wasm", std::fs::read(wasm).unwrap())
        .write("test.toml", manifest);
    let s = Server::start(dir);
    // Its list-changed hook removes plugin `hook-tool` (answered 200 here).
    let (status, out) = s.invoke("test_trigger_tool_change", json!({}));
    assert_eq!(status, 200, "{out}\n{}", s.log());
    assert_eq!(
        admin.seen.lock().unwrap()[0],
        "DELETE /plugins/hook-tool HTTP/1.1"
    );
    let head = admin.headers.lock().unwrap()[0].clone();
    assert!(
        !head.iter().any(|h| h.starts_with("transfer-encoding")),
        "a DELETE without a body went out chunked: {head:?}"
    );
}

#[test]
fn without_a_grant_every_request_is_refused() {
    let pages = PageServer::start(PAGE);
    // The example manifest as shipped: an empty allow-list.
    let s = Server::start(PluginsDir::new().add("fetch", "fetch"));
    let (status, out) = s.invoke(
        "fetch_page",
        json!({"url": format!("http://127.0.0.1:{}/", pages.port)}),
    );
    assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");
    assert_eq!(pages.hits(), 0);
    assert!(s.log().contains("grants no outbound HTTP"), "{}", s.log());

    // A bad allow-list keeps the plugin from loading, with the entry named.
    let bad = Server::start(fetch_dir("[\"http://127.0.0.1/\"]"));
    let status = bad.plugin("fetch").unwrap();
    assert!(
        status["error"]
            .as_str()
            .is_some_and(|e| e.contains("http.allow entry `http://127.0.0.1/`")),
        "{status}"
    );
}

#[test]
fn environment_variables_pass_by_name_only() {
    let manifest = std::fs::read_to_string(component("hostile").1.unwrap()).unwrap()
        + "[env]\npass = [\"TOOLHOST_TEST_PASSED\", \"TOOLHOST_TEST_UNSET\"]\n";
    let s = Server::start_env(
        PluginsDir::new()
            .add("hostile", "hostile")
            .write("hostile.toml", manifest),
        None,
        &[
            ("TOOLHOST_TEST_PASSED", "visible"),
            ("TOOLHOST_TEST_SECRET", "do-not-leak"),
        ],
    )
    .unwrap();
    let (status, out) = s.invoke("hostile_env_dump", json!({}));
    assert_eq!(
        (status, &out["result"]),
        (200, &json!({"TOOLHOST_TEST_PASSED": "visible"})),
        "{out}"
    );
}
