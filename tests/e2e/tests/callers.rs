//! Many callers on one server: with `[[auth.callers]]`, each request is a
//! named caller; the session ids it sends are its own, so another caller's
//! session answers exactly as one never made, on every surface (native,
//! XAgent, MCP); its policy limits the tools it sees and calls, its
//! sessions and the admin routes. The attack of the issue, replayed: caller
//! B with caller A's session id.

use reqwest::blocking::{RequestBuilder, Response};
use serde_json::{Value, json};
use toolhost_e2e::*;

const ALICE: &str = "alice-token-aaaaaaaaaaaa";
const BOB: &str = "bob-token-bbbbbbbbbbbbbb";
const CALC_ONLY: &str = "calc-only-token-cccccccc";
const ADMIN: &str = "admin-token-dddddddddddd";

fn config() -> String {
    // Bob's token is configured by its digest only.
    format!(
        r#"
[auth]
admin_token = "{ADMIN}"

[[auth.callers]]
name = "alice"
token = "{ALICE}"

[[auth.callers]]
name = "bob"
token_sha256 = "{}"

[[auth.callers]]
name = "calc-only"
token = "{CALC_ONLY}"
tools = ["calc_*"]
max_sessions = 2
"#,
        sha256_hex(BOB.as_bytes())
    )
}

fn start() -> Server {
    Server::start_with(
        PluginsDir::new()
            .add("files", "files")
            .add("calc", "calc")
            .add("storage", "storage"),
        Some(&config()),
    )
    .expect("server starts")
}

fn json_of(r: Response) -> (u16, Value) {
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn invoke(s: &Server, token: &str, session: &str, tool: &str, params: Value) -> (u16, Value) {
    let mut r = s
        .client()
        .post(s.url(&format!("/tools/{tool}/invoke")))
        .bearer_auth(token)
        .json(&json!({ "params": params }));
    if !session.is_empty() {
        r = r.header("x-toolhost-session", session);
    }
    json_of(r.send().unwrap())
}

fn mcp(s: &Server, token: &str, session: Option<&str>, body: Value) -> RequestBuilder {
    let mut r = s
        .client()
        .post(s.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&body);
    if let Some(id) = session {
        r = r.header("mcp-session-id", id);
    }
    r
}

/// An answer's status and body with `id` written as `<id>`, to compare the
/// answers to two ids.
fn shape(r: Response, id: &str) -> (u16, String) {
    let status = r.status().as_u16();
    (status, r.text().unwrap().replace(id, "<id>"))
}

#[test]
fn another_caller_s_session_is_one_never_made() {
    let s = start();

    // Native: Alice writes into her session `s1`; Bob's `s1` is his own.
    let (status, body) = invoke(
        &s,
        ALICE,
        "s1",
        "files_write",
        json!({"path": "secret.txt", "content": "A_TOKEN=sk-live-A"}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = invoke(&s, BOB, "s1", "files_read", json!({"path": "secret.txt"}));
    assert_ne!(status, 200, "Bob read Alice's file: {body}");
    assert!(!body.to_string().contains("sk-live-A"), "{body}");
    let (status, body) = invoke(&s, BOB, "s1", "files_list", json!({"path": "."}));
    assert_eq!(status, 200, "{body}");
    assert!(!body.to_string().contains("secret.txt"), "{body}");
    let (status, _) = invoke(&s, BOB, "s1", "files_delete", json!({"path": "secret.txt"}));
    assert_ne!(status, 200);
    let (status, body) = invoke(&s, BOB, "s1", "storage_scan", json!({"prefix": ""}));
    assert!(!body.to_string().contains("sk-live-A"), "{status} {body}");
    // Two directories.
    let workspaces = s.data.path().join("data/workspaces");
    assert!(workspaces.join("alice.s1/secret.txt").is_file());
    assert!(!workspaces.join("bob.s1/secret.txt").exists());

    // DELETE /sessions/{id}: Alice's `s1` is unknown to Bob, answered as a
    // session never made.
    let delete = |token: &str, id: &str| {
        shape(
            s.client()
                .delete(s.url(&format!("/sessions/{id}")))
                .bearer_auth(token)
                .send()
                .unwrap(),
            id,
        )
    };
    let (_, made) = invoke(
        &s,
        ALICE,
        "only-alice",
        "calc_evaluate",
        json!({"expression": "1+1"}),
    );
    assert!(
        made["result"].is_number() || made.to_string().contains('2'),
        "{made}"
    );
    assert_eq!(
        delete(BOB, "only-alice"),
        delete(BOB, "never-made-x"),
        "the same answer as for a session never made"
    );
    assert_eq!(delete(BOB, "only-alice").0, 404);
    let (status, body) = invoke(&s, ALICE, "s1", "files_read", json!({"path": "secret.txt"}));
    assert_eq!(status, 200, "Alice's file is still there: {body}");

    // XAgent: Alice's cookie is unknown to Bob, as a cookie never made.
    let r = s
        .client()
        .post(s.url("/get_cookie"))
        .bearer_auth(ALICE)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let alice_cookie: Value = r.json().unwrap();
    let alice_id = alice_cookie["node_id"].as_str().unwrap().to_owned();
    assert_eq!(alice_id.len(), 32, "server-made ids carry 128 random bits");
    let download = |token: &str, id: &str| {
        shape(
            s.client()
                .post(s.url("/download_file"))
                .bearer_auth(token)
                .header("cookie", format!("node_id={id}"))
                .json(&json!({"file_path": "secret.txt"}))
                .send()
                .unwrap(),
            id,
        )
    };
    let bob_tries = download(BOB, &alice_id);
    assert_eq!(bob_tries, download(BOB, "0123456789abcdef0123456789abcdef"));
    assert_eq!(bob_tries.0, 400, "{bob_tries:?}");
    assert_ne!(
        download(ALICE, &alice_id).0,
        400,
        "Alice's own cookie works"
    );

    // MCP: Alice's MCP session is unknown to Bob.
    let r = mcp(
        &s,
        ALICE,
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "alice", "version": "1"}}}),
    )
    .send()
    .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let mcp_id = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    drop(r);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = mcp(&s, ALICE, Some(&mcp_id), initialized).send().unwrap();
    assert!(r.status().is_success());
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let bob_tries = shape(
        mcp(&s, BOB, Some(&mcp_id), list.clone()).send().unwrap(),
        &mcp_id,
    );
    let never = "00000000000000000000000000000000";
    assert_eq!(
        bob_tries,
        shape(
            mcp(&s, BOB, Some(never), list.clone()).send().unwrap(),
            never
        ),
        "the same answer as for an MCP session never made"
    );
    assert!(bob_tries.0 >= 400, "{bob_tries:?}");
    let r = mcp(&s, ALICE, Some(&mcp_id), list).send().unwrap();
    assert_eq!(r.status().as_u16(), 200, "Alice's MCP session goes on");

    // GET /sessions: each caller sees its own; the admin every caller's.
    let listed = |token: &str| {
        let (status, body) = json_of(
            s.client()
                .get(s.url("/sessions"))
                .bearer_auth(token)
                .send()
                .unwrap(),
        );
        assert_eq!(status, 200, "{body}");
        body["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                format!(
                    "{}:{}",
                    x["caller"].as_str().unwrap(),
                    x["id"].as_str().unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    let bobs = listed(BOB);
    assert!(bobs.iter().all(|x| x.starts_with("bob:")), "{bobs:?}");
    assert!(bobs.contains(&"bob:s1".to_owned()), "{bobs:?}");
    let all = listed(ADMIN);
    for x in ["alice:s1", "bob:s1", "alice:only-alice"] {
        assert!(all.contains(&x.to_owned()), "{x} in {all:?}");
    }

    // The admin routes: a caller without the admin policy gets 403.
    let r = s
        .client()
        .get(s.url("/tools?include=all"))
        .bearer_auth(ALICE)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = s
        .client()
        .get(s.url("/tools?include=all"))
        .bearer_auth(ADMIN)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(
        s.log().contains("rule=\"auth.callers.admin\"") || s.log().contains("auth.callers.admin")
    );
}

#[test]
fn a_caller_s_policy_limits_its_tools_and_sessions() {
    let s = start();
    let tools = |token: &str| -> Vec<String> {
        let (status, body) = json_of(
            s.client()
                .get(s.url("/tools"))
                .bearer_auth(token)
                .send()
                .unwrap(),
        );
        assert_eq!(status, 200);
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["tool_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let limited = tools(CALC_ONLY);
    assert!(
        !limited.is_empty() && limited.iter().all(|t| t.starts_with("calc_")),
        "{limited:?}"
    );
    assert!(tools(ALICE).iter().any(|t| t.starts_with("files_")));
    for path in ["/tools/files_list", "/tools/files_list/schema"] {
        let status = |token: &str| {
            s.client()
                .get(s.url(path))
                .bearer_auth(token)
                .send()
                .unwrap()
                .status()
                .as_u16()
        };
        assert_eq!(
            status(CALC_ONLY),
            404,
            "{path}: unknown to it, as in its lists"
        );
        assert_eq!(status(ALICE), 200, "{path}");
    }

    // A tool outside its patterns: 403 `forbidden`, on every surface; the
    // rule is in the log only.
    let (status, body) = invoke(&s, CALC_ONLY, "c1", "files_list", json!({"path": "."}));
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["kind"], "forbidden");
    assert!(!body.to_string().contains("auth.callers"), "{body}");
    assert!(s.log().contains("auth.callers.tools"));
    let (status, body) = invoke(
        &s,
        CALC_ONLY,
        "c1",
        "calc_evaluate",
        json!({"expression": "6*7"}),
    );
    assert_eq!(status, 200, "{body}");

    // MCP (stateless revision): tools/list holds calc's tools only, and a
    // call of another tool is refused.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    let stateless = |id: i64, method: &str, mut params: Value| {
        params["_meta"] = meta.clone();
        let mut r = s
            .client()
            .post(s.url("/mcp"))
            .bearer_auth(CALC_ONLY)
            .header("mcp-method", method)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28");
        if let Some(name) = params["name"].as_str() {
            r = r.header("mcp-name", name);
        }
        r.json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .send()
            .unwrap()
            .text()
            .unwrap()
    };
    let listed = stateless(1, "tools/list", json!({}));
    assert!(
        listed.contains("calc_evaluate") && !listed.contains("files_"),
        "{listed}"
    );
    let called = stateless(
        2,
        "tools/call",
        json!({"name": "files_list", "arguments": {"path": "."}}),
    );
    assert!(called.contains("forbidden"), "{called}");

    // XAgent's tool list.
    let (_, body) = json_of(
        s.client()
            .post(s.url("/get_available_tools"))
            .bearer_auth(CALC_ONLY)
            .json(&json!({}))
            .send()
            .unwrap(),
    );
    let listed = body["available_tools"].to_string();
    assert!(
        listed.contains("calc_") && !listed.contains("files_"),
        "{body}"
    );

    // Its sessions: two at most (c1 is one); another caller is not locked out.
    // The stateless MCP requests' own sessions are closed just after their
    // answers: wait until c1 is its only one.
    let own = || {
        let (_, body) = json_of(
            s.client()
                .get(s.url("/sessions"))
                .bearer_auth(CALC_ONLY)
                .send()
                .unwrap(),
        );
        body["sessions"].as_array().map_or(0, Vec::len)
    };
    assert!(
        wait_for(std::time::Duration::from_secs(10), || (own() == 1)
            .then_some(()))
        .is_some(),
        "the requests' own sessions were not closed"
    );
    let (status, body) = invoke(
        &s,
        CALC_ONLY,
        "c2",
        "calc_evaluate",
        json!({"expression": "1"}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = invoke(
        &s,
        CALC_ONLY,
        "c3",
        "calc_evaluate",
        json!({"expression": "1"}),
    );
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["kind"], "quota_exceeded");
    let (status, body) = invoke(
        &s,
        CALC_ONLY,
        "c1",
        "calc_evaluate",
        json!({"expression": "1"}),
    );
    assert_eq!(status, 200, "its open sessions still work: {body}");
    let (status, body) = invoke(&s, ALICE, "a9", "calc_evaluate", json!({"expression": "1"}));
    assert_eq!(status, 200, "{body}");

    // Per-caller accounting: the admin's view, /metrics, the audit log.
    let (status, body) = json_of(
        s.client()
            .get(s.url("/callers"))
            .bearer_auth(ADMIN)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    let of = |name: &str| {
        body["callers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {body}"))
    };
    let limited = of("calc-only");
    // Calls that ran: 6*7 in c1, 1 in c2, 1 in c1 again; refused: files_list
    // natively and over MCP (the session limit refuses before any call).
    assert_eq!(limited["usage"]["ok"], 3, "{limited}");
    assert_eq!(limited["usage"]["refused"], 2, "{limited}");
    assert_eq!(
        limited["usage_by_tool"],
        json!({"calc_evaluate": {"ok": 3, "failed": 0}}),
        "{limited}"
    );
    assert_eq!(limited["sessions_open"], 2, "{limited}");
    assert_eq!(limited["tools"], json!(["calc_*"]));
    assert_eq!(of("alice")["usage"]["ok"], 1);
    assert_eq!(of("admin")["admin"], true);
    let r = s
        .client()
        .get(s.url("/callers"))
        .bearer_auth(ALICE)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403, "the view is the admin's");
    let metrics = s
        .client()
        .get(s.url("/metrics"))
        .bearer_auth(ADMIN)
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        metrics.contains(r#"toolhost_caller_calls_total{caller="calc-only",outcome="ok"} 3"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"toolhost_caller_calls_total{caller="calc-only",outcome="refused"} 2"#)
    );
    let log = s.log();
    assert!(
        log.lines().any(|l| l.contains("toolhost::audit")
            && l.contains("request refused")
            && l.contains("\"calc-only\"")),
        "the audit line names the caller: {}",
        log.lines()
            .filter(|l| l.contains("refused"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // MCP sessions count too, initialized or not: calc-only may hold two.
    let initialize = |token: &str| {
        let r = mcp(
            &s,
            token,
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}}),
        )
        .send()
        .unwrap();
        let id = r
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        (r.status().as_u16(), id, r.text().unwrap())
    };
    let (status, first, text) = initialize(CALC_ONLY);
    assert_eq!(status, 200, "{text}");
    let (status, _, text) = initialize(CALC_ONLY);
    assert_eq!(status, 200, "{text}");
    let (status, none, text) = initialize(CALC_ONLY);
    assert_eq!(status, 429, "{text}");
    assert!(
        none.is_none() && text.contains("MCP sessions open, its limit"),
        "{text}"
    );
    let (status, _, text) = initialize(ALICE);
    assert_eq!(status, 200, "another caller is not locked out: {text}");
    let r = s
        .client()
        .delete(s.url("/mcp"))
        .bearer_auth(CALC_ONLY)
        .header("mcp-session-id", first.unwrap())
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let (status, _, text) = initialize(CALC_ONLY);
    assert_eq!(status, 200, "a closed session frees its place: {text}");
}

#[test]
fn native_workspace_routes_under_the_caller_s_own_session() {
    let config = format!("{}\n[plugins]\nmax_upload_mb = 1\n", config());
    let s = Server::start_with(PluginsDir::new().add("files", "files"), Some(&config))
        .expect("server starts");
    let file = |method: reqwest::Method, token: &str, url: &str| {
        s.client().request(method, s.url(url)).bearer_auth(token)
    };
    // Streamed up into a new session, read by a tool, streamed back.
    let big: Vec<u8> = (0..900_000u32).map(|i| (i % 251) as u8).collect();
    let r = file(
        reqwest::Method::PUT,
        ALICE,
        "/sessions/w1/files/data/blob.bin",
    )
    .body(big.clone())
    .send()
    .unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", r.text().unwrap());
    let r = file(
        reqwest::Method::PUT,
        ALICE,
        "/sessions/w1/files/notes/a.txt",
    )
    .body("hello from the native route")
    .send()
    .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let (status, body) = invoke(
        &s,
        ALICE,
        "w1",
        "files_read",
        json!({"path": "notes/a.txt"}),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        body.to_string().contains("hello from the native route"),
        "{body}"
    );
    let r = file(
        reqwest::Method::GET,
        ALICE,
        "/sessions/w1/files/data/blob.bin",
    )
    .send()
    .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.bytes().unwrap().as_ref(), big.as_slice());
    let (status, listed) = json_of(
        file(reqwest::Method::GET, ALICE, "/sessions/w1/files")
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{listed}");
    let paths: Vec<&str> = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["data/blob.bin", "notes/a.txt"], "{listed}");
    assert_eq!(listed["files"][0]["size"], 900_000);

    // Another caller: the session is unknown, as one never made.
    for (method, url) in [
        (reqwest::Method::GET, "/sessions/{}/files"),
        (reqwest::Method::GET, "/sessions/{}/files/notes/a.txt"),
        (reqwest::Method::DELETE, "/sessions/{}/files/notes/a.txt"),
    ] {
        let theirs = shape(
            file(method.clone(), BOB, &url.replace("{}", "w1"))
                .send()
                .unwrap(),
            "w1",
        );
        let never = shape(
            file(method.clone(), BOB, &url.replace("{}", "nope-1"))
                .send()
                .unwrap(),
            "nope-1",
        );
        assert_eq!(theirs, never, "{method} {url}");
        assert_eq!(theirs.0, 404, "{theirs:?}");
    }
    // Bob's PUT makes his own `w1`; Alice's file is untouched.
    let r = file(reqwest::Method::PUT, BOB, "/sessions/w1/files/notes/a.txt")
        .body("Bob's")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let r = file(
        reqwest::Method::GET,
        ALICE,
        "/sessions/w1/files/notes/a.txt",
    )
    .send()
    .unwrap();
    assert_eq!(r.text().unwrap(), "hello from the native route");

    // Bad paths, too large, missing files; the server goes on.
    for bad in ["../escape.txt", "a/../../b", "%2e%2e/x"] {
        let r = file(
            reqwest::Method::PUT,
            ALICE,
            &format!("/sessions/w1/files/{bad}"),
        )
        .body("x")
        .send()
        .unwrap();
        assert!(
            matches!(r.status().as_u16(), 400 | 404 | 422),
            "{bad}: {}",
            r.status()
        );
    }
    assert!(!s.data.path().join("data/workspaces/escape.txt").exists());
    let r = file(reqwest::Method::PUT, ALICE, "/sessions/w1/files/huge.bin")
        .body(vec![0u8; 1_500_000])
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    // Sent without a length: refused as it streams, nothing left behind.
    let chunks = unsized_body(1_500_000);
    let r = file(reqwest::Method::PUT, ALICE, "/sessions/w1/files/huge2.bin")
        .body(reqwest::blocking::Body::new(chunks))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    let (_, listed) = json_of(
        file(reqwest::Method::GET, ALICE, "/sessions/w1/files")
            .send()
            .unwrap(),
    );
    assert_eq!(listed["files"].as_array().unwrap().len(), 2, "{listed}");
    let status = |method: reqwest::Method, url: &str| {
        file(method, ALICE, url).send().unwrap().status().as_u16()
    };
    use reqwest::Method as M;
    assert_eq!(status(M::GET, "/sessions/w1/files/none.txt"), 404);
    assert_eq!(status(M::DELETE, "/sessions/w1/files/notes/a.txt"), 200);
    assert_eq!(status(M::GET, "/sessions/w1/files/notes/a.txt"), 404);
}

/// A reader of `n` zero bytes whose length the client does not know (sent
/// chunked).
fn unsized_body(n: usize) -> impl std::io::Read + Send + 'static {
    std::io::Read::take(std::io::repeat(0), n as u64)
}

#[test]
fn another_caller_s_mcp_task_is_unknown() {
    use toolhost_e2e::mcp::McpClient;
    let s = Server::start_with(PluginsDir::new().add("hostile", "hostile"), Some(&config()))
        .expect("server starts");
    let client = |token: &str| {
        let mut c = McpClient::new(&s);
        c.header = Some(("authorization".into(), format!("Bearer {token}")));
        c.initialize_with(
            "2025-11-25",
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
        );
        c
    };
    let alice = client(ALICE);
    let created = alice.call(1, "hostile_sleep", json!({"ms": 3000}));
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let bob = client(BOB);
    let never = "00000000-0000-4000-8000-000000000000";
    for method in ["tasks/get", "tasks/cancel"] {
        let theirs = bob.request(2, method, json!({"taskId": id}));
        let none = bob.request(2, method, json!({"taskId": never}));
        assert!(theirs["error"].is_object(), "{method}: {theirs}");
        assert_eq!(
            theirs.to_string().replace(&id, "<id>"),
            none.to_string().replace(never, "<id>"),
            "{method}: the same answer as for a task never made"
        );
    }
    // Alice's task was neither read nor cancelled by Bob.
    let got = alice.request(3, "tasks/get", json!({"taskId": id}));
    assert_eq!(got["result"]["status"], "working", "{got}");
}
