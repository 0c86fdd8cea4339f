//! Router-level tests: the axum router driven with `oneshot`, no socket, over a
//! real wasm backend loaded with the calc example (built by `make plugins`).

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use toolhost::config::Config;
use toolhost::server::Server;

fn calc_plugins() -> tempfile::TempDir {
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins");
    assert!(
        built.join("calc.wasm").is_file(),
        "run `make plugins` first"
    );
    let dir = tempfile::tempdir().unwrap();
    for f in ["calc.wasm", "calc.toml"] {
        std::fs::copy(built.join(f), dir.path().join(f)).unwrap();
    }
    dir
}

/// A server of `calc` with `config`, its router, and its directories (kept
/// alive with it).
async fn calc_server(config: &Config) -> (Server, axum::Router, [tempfile::TempDir; 2]) {
    let plugins = calc_plugins();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(config, plugins.path(), data.path())
        .await
        .unwrap();
    let app = server.router(config);
    (server, app, [plugins, data])
}

/// The `node_id=...` cookie an XAgent `/get_cookie` answer sets.
fn cookie(headers: &axum::http::HeaderMap) -> String {
    let set = headers["set-cookie"].to_str().unwrap();
    set.split(';').next().unwrap().to_owned()
}

async fn send(
    app: &axum::Router,
    mut req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Value) {
    // What every HTTP/1.1 client sends; the browser guard wants it.
    req.headers_mut()
        .entry(axum::http::header::HOST)
        .or_insert(axum::http::HeaderValue::from_static("127.0.0.1:8001"));
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        headers,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn post(path: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post(path).body(body.into()).unwrap()
}

/// Send what `request` makes until `done` holds for the answer, for up to
/// 5 s (a hot load or unload taking effect); whether it did.
async fn eventually(
    app: &axum::Router,
    request: impl Fn() -> Request<Body>,
    done: impl Fn(StatusCode, &Value) -> bool,
) -> bool {
    for _ in 0..200 {
        let (status, _, body) = send(app, request()).await;
        if done(status, &body) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    false
}

#[tokio::test]
async fn routes_statuses_and_session_header() {
    let mut config = Config::default();
    config.server.max_body_kb = 1;
    let (server, app, _dirs) = calc_server(&config).await;
    assert!(server.load_errors().is_empty());

    let (status, _, body) = send(&app, Request::get("/health").body(Body::empty()).unwrap()).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ok"})));

    let (status, headers, body) = send(
        &app,
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{"expression":"1+2"}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["value"], 3.0);
    let session = headers["x-toolhost-session"].to_str().unwrap();
    assert!(
        server.dispatcher.sessions().get(session).is_none(),
        "a session opened for one call that made no workspace is not kept"
    );

    let req = Request::post("/tools/calc_evaluate/invoke")
        .header("x-toolhost-session", "mine")
        .body(Body::from(r#"{"params":{"expression":"2"}}"#))
        .unwrap();
    let (_, headers, _) = send(&app, req).await;
    assert_eq!(headers["x-toolhost-session"], "mine");

    let (status, _, body) = send(&app, post("/tools/calc_evaluate/invoke", "x".repeat(2048))).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(body["error"]["kind"], "invalid_input");

    let (status, _, body) = send(&app, post("/tools/calc_evaluate/invoke", "nope")).await;
    assert_eq!(
        (status, body["error"]["kind"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_input"))
    );

    let (status, _, body) = send(
        &app,
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{"expression":"1+"}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    let (status, _, body) = send(
        &app,
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{}, "limits":{"fuel":1000}}"#,
        ),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "schema checked before the sandbox: {body}"
    );

    let (status, _, body) = send(
        &app,
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{"expression":"1"}, "limits":{"fuel":1000}}"#,
        ),
    )
    .await;
    assert_eq!(
        (status, body["error"]["kind"].as_str()),
        (StatusCode::INTERNAL_SERVER_ERROR, Some("out_of_fuel")),
        "{body}"
    );

    let (status, _, body) = send(
        &app,
        Request::get("/tools/x_y").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["error"]["kind"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
}

/// XAgent's client and seed 001's description of the protocol, both: every
/// error of an XAgent route is `{"detail": ...}` (the client reads `detail`),
/// whichever layer made it; seed 001's names are accepted beside XAgent's.
#[tokio::test]
async fn xagent_routes_answer_in_xagent_shapes() {
    let mut config = Config::default();
    config.server.max_body_kb = 1;
    let (server, app, _dirs) = calc_server(&config).await;

    // Every route: a wrong method (axum's 405, no body of its own) and a
    // body over the limit (the shared limit's 413) come back as `detail`.
    for path in toolhost::surfaces::xagent::PATHS {
        let (status, _, body) = send(&app, Request::get(*path).body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
        assert!(body["detail"].is_string(), "{path}: {body}");
        // Routes that read a body refuse one over the limit (the others
        // never read it).
        let (status, _, body) = send(&app, post(path, "x".repeat(4096))).await;
        if !status.is_success() {
            assert!(body["detail"].is_string(), "{path}: {status} {body}");
        }
    }
    let (status, _, body) = send(&app, post("/execute_tool", "x".repeat(4096))).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert!(body["detail"].is_string(), "{body}");
    // The shared JSON extractor's errors too (malformed, wrong shape).
    for (path, bad) in [
        ("/retrieving_tools", "{"),
        ("/get_json_schema_for_tools", r#"{"tool_names": 3}"#),
        ("/get_json_schema_for_envs", r#"{"nope": []}"#),
        ("/download_file", "[]"),
    ] {
        let (status, _, body) = send(&app, post(path, bad)).await;
        assert!(status.is_client_error(), "{path}: {status}");
        assert!(body["detail"].is_string(), "{path}: {body}");
        assert!(body.get("error").is_none(), "{path}: {body}");
    }

    // Seed 001's names.
    let (status, headers, body) = send(&app, post("/get_cookies", "")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let cookie = cookie(&headers);
    let with_cookie = |path: &str, body: &str| {
        Request::post(path)
            .header("cookie", &cookie)
            .body(Body::from(body.to_owned()))
            .unwrap()
    };
    let (status, _, body) = send(
        &app,
        with_cookie(
            "/execute_tool",
            r#"{"tool": "calc_evaluate", "parameters": {"expression": "6*7"}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["value"], 42.0, "{body}");
    let (_, _, body) = send(
        &app,
        with_cookie(
            "/get_json_schema_for_tools",
            r#"{"tools": ["calc_evaluate"]}"#,
        ),
    )
    .await;
    assert_eq!(body["tools_json"][0]["name"], "calc_evaluate", "{body}");
    let (_, _, body) = send(
        &app,
        with_cookie("/get_json_schema_for_envs", r#"{"envs": ["calc"]}"#),
    )
    .await;
    assert_eq!(body["envs_json"][0]["name"], "calc", "{body}");

    // XAgent's engine asks for the workspace tree on every subtask.
    let (status, _, body) = send(
        &app,
        with_cookie(
            "/execute_tool",
            r#"{"tool_name": "FileSystemEnv_print_filesys_struture", "arguments": {"return_root": true}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!("workspace/\n"));
    let (status, _, body) = send(
        &app,
        with_cookie(
            "/execute_tool",
            r#"{"tool_name": "FileSystemEnv_print_filesys_struture", "arguments": {"return_root": "yes"}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["detail"].is_string());

    // Caller tokens: a refusal in XAgent's shape on its routes, native on
    // the native ones.
    let mut config = Config::default();
    config.auth.tokens = vec!["a-caller-token-of-16+".into()];
    let app = server.router(&config);
    let (status, _, body) = send(&app, post("/get_cookie", "")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body["detail"].is_string(), "{body}");
    let (status, headers, body) =
        send(&app, Request::get("/tools").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body["error"]["message"].is_string(), "{body}");
    assert!(headers.get("connection").is_none());
    // A refused request's body is left unread: the connection is closed,
    // and the answer says so (a client must not reuse it).
    let body = r#"{"params":{"expression":"1"}}"#;
    let (status, headers, _) = send(
        &app,
        Request::post("/tools/calc_evaluate/invoke")
            .header("content-length", body.len())
            .body(Body::from(body))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers["connection"], "close");
}

/// Requests without a session header each open a session; `[sessions]
/// max_sessions` bounds them: past it, a clear 503 with `Retry-After` on every
/// surface, and sessions already open keep working.
#[tokio::test]
async fn sessions_are_bounded() {
    let mut config = Config::default();
    config.sessions.max_sessions = 2;
    let (server, app, _dirs) = calc_server(&config).await;
    let call = || {
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{"expression":"1"}}"#,
        )
    };
    // Calls without a session that hold nothing leave no session behind.
    for _ in 0..5 {
        assert_eq!(send(&app, call()).await.0, StatusCode::OK);
    }
    assert_eq!(server.dispatcher.sessions().len(), 0);
    let named = |id: &str| {
        Request::post("/tools/calc_evaluate/invoke")
            .header("x-toolhost-session", id)
            .body(Body::from(r#"{"params":{"expression":"1"}}"#))
            .unwrap()
    };
    assert_eq!(send(&app, named("one")).await.0, StatusCode::OK);
    let kept = "two".to_owned();
    assert_eq!(send(&app, named(&kept)).await.0, StatusCode::OK);
    let (status, headers, body) = send(&app, named("three")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(headers.contains_key("retry-after"));
    assert_eq!(body["error"]["kind"], "overloaded", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too many sessions")
    );
    let (status, _, body) = send(&app, post("/get_cookie", "")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("too many sessions")
    );
    assert_eq!(
        send(&app, call()).await.0,
        StatusCode::SERVICE_UNAVAILABLE,
        "no new session, even for one call"
    );
    // An open session still serves.
    assert_eq!(send(&app, named(&kept)).await.0, StatusCode::OK);
    // Closing one makes room.
    let req = Request::delete(format!("/sessions/{kept}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, req).await.0, StatusCode::OK);
    assert_eq!(send(&app, call()).await.0, StatusCode::OK);
}

/// A backend the host knows nothing of, handed over through the backend
/// trait alone: its entries (`<name>.echo` files: the text to echo) are
/// hot-loaded from the plugins directory, its tool served on every surface
/// (native, XAgent, MCP) with no change to them, and removed with its file.
mod echo_backend {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use serde_json::json;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, Ordering};

    use toolhost::backend::{
        Backend, BackendFuture, EntryFile, Loaded, Refresh, content_hash, file_entry,
    };
    use toolhost::backend::{Invocation, Toolkit};
    use toolhost::tool::BoxFuture;
    use toolhost::tool::{CallError, Content, Limits, ToolDescriptor};

    /// With `louder` set, its entries also have a `shout` tool (what an MCP
    /// server's changed tool list looks like); `refresh` reloads one.
    #[derive(Default)]
    pub struct Echoes {
        pub refresh: OnceLock<Refresh>,
        pub louder: AtomicBool,
    }

    struct Echo(String);

    impl Toolkit for Echo {
        fn invoke(self: Arc<Self>, call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
            Box::pin(async move {
                let who = call.input["who"].as_str().unwrap_or("nobody").to_owned();
                Ok(vec![Content::Text(format!("{} {who}", self.0))])
            })
        }
    }

    impl Backend for Echoes {
        fn name(&self) -> &'static str {
            "echo"
        }
        fn claim(&self, child: &Path) -> Option<String> {
            file_entry(child, &["echo"])
        }
        fn attach(&self, refresh: Refresh) {
            let _ = self.refresh.set(refresh);
        }
        fn files(&self, dir: &Path, name: &str) -> Vec<PathBuf> {
            let file = dir.join(format!("{name}.echo"));
            if file.is_file() {
                vec![file]
            } else {
                Vec::new()
            }
        }
        fn load<'a>(
            &'a self,
            _name: &'a str,
            files: Vec<EntryFile>,
            _report: &'a (dyn Fn(&'static str) + Sync),
        ) -> BackendFuture<'a, Result<Loaded, String>> {
            Box::pin(async move {
                let text = String::from_utf8(files[0].bytes.clone()).map_err(|e| e.to_string())?;
                let louder = self.louder.load(Ordering::Relaxed);
                let tool = |name: &str| ToolDescriptor {
                    name: name.into(),
                    description: "Say the text to someone.".into(),
                    input_schema: json!({"type": "object", "properties": {"who": {"type": "string"}}}),
                    output_schema: None,
                    continue_with: None,
                    hints: Default::default(),
                };
                let mut tools = vec![tool("say")];
                if louder {
                    tools.push(tool("shout"));
                }
                Ok(Loaded {
                    description: "Echoes.".into(),
                    version: content_hash(format!("{text}{louder}").as_bytes()),
                    limits: Limits::default(),
                    toolkit: Arc::new(Echo(text.trim().to_owned())),
                    tools,
                    compile: None,
                    better: None,
                    warnings: Vec::new(),
                    provenance: None,
                })
            })
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_added_through_the_trait_serves_every_surface() {
    let echoes = std::sync::Arc::new(echo_backend::Echoes::default());
    let plugins = calc_plugins();
    let data = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.plugins.debounce_ms = 50;
    let server = Server::build_with(&config, plugins.path(), data.path(), vec![echoes.clone()])
        .await
        .unwrap();
    server.load_plugins();
    server.loaded().await;
    let app = server.router(&config);

    // Hot-loaded: dropped into the running server's directory.
    std::fs::write(plugins.path().join("greet.echo"), "hello").unwrap();
    let listed = eventually(
        &app,
        || Request::get("/tools").body(Body::empty()).unwrap(),
        |_, body| body.to_string().contains("greet_say"),
    )
    .await;
    assert!(listed, "greet_say was not hot-loaded");
    let (_, _, body) = send(
        &app,
        Request::get("/plugins/greet").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(
        (body["backend"].as_str(), body["state"].as_str()),
        (Some("echo"), Some("ready")),
        "{body}"
    );

    // Native.
    let (status, _, body) = send(
        &app,
        post("/tools/greet_say/invoke", r#"{"params":{"who":"native"}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["content"][0]["text"], "hello native", "{body}");
    // XAgent.
    let (_, headers, _) = send(&app, post("/get_cookie", "")).await;
    let cookie = cookie(&headers);
    let req = Request::post("/execute_tool")
        .header("cookie", &cookie)
        .body(Body::from(
            r#"{"tool_name":"greet_say","arguments":{"who":"xagent"}}"#,
        ))
        .unwrap();
    let (status, _, body) = send(&app, req).await;
    assert_eq!((status, body), (StatusCode::OK, json!("hello xagent")));
    // MCP (2026-07-28, stateless).
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "greet_say", "arguments": {"who": "mcp"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "router-test", "version": "0"}
        }
    }});
    let req = Request::post("/mcp")
        .header("host", "localhost")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "greet_say")
        .body(Body::from(call.to_string()))
        .unwrap();
    let (status, _, body) = send(&app, req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["content"][0]["text"], "hello mcp", "{body}");

    // Edited: the new version serves; removed: its tool is gone.
    std::fs::write(plugins.path().join("greet.echo"), "goodbye").unwrap();
    let swapped = eventually(
        &app,
        || post("/tools/greet_say/invoke", r#"{"params":{"who":"again"}}"#),
        |_, body| body["content"][0]["text"] == "goodbye again",
    )
    .await;
    assert!(swapped, "the edited entry was not reloaded");
    // The backend's own refresh (an MCP server's tools/list_changed): the
    // same files, a new tool list, swapped in.
    echoes
        .louder
        .store(true, std::sync::atomic::Ordering::Relaxed);
    echoes.refresh.get().expect("attached").entry("greet");
    let refreshed = eventually(
        &app,
        || post("/tools/greet_shout/invoke", r#"{"params":{"who":"all"}}"#),
        |status, body| status == StatusCode::OK && body["content"][0]["text"] == "goodbye all",
    )
    .await;
    assert!(refreshed, "the refreshed entry's new tool is not served");
    std::fs::remove_file(plugins.path().join("greet.echo")).unwrap();
    let gone = eventually(
        &app,
        || post("/tools/greet_say/invoke", r#"{"params":{}}"#),
        |status, _| status == StatusCode::NOT_FOUND,
    )
    .await;
    assert!(gone, "the removed entry still serves");
    let (status, _, _) = send(
        &app,
        Request::get("/plugins/greet").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The plugins on disk are listed as compiling as soon as loading starts,
/// before any load task has run: a probe that asks first never hears
/// "ready" from a server whose tools are still to come.
#[tokio::test]
async fn readiness_never_runs_ahead_of_the_plugins_on_disk() {
    let plugins = calc_plugins();
    let data = tempfile::tempdir().unwrap();
    let config = Config::default();
    let server = Server::build(&config, plugins.path(), data.path())
        .await
        .unwrap();
    server.load_plugins();
    let app = server.router(&config);
    let ready = || Request::get("/health/ready").body(Body::empty()).unwrap();
    let (status, _, body) = send(&app, ready()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["compiling"][0]["name"], "calc", "{body}");
    server.loaded().await;
    let (status, _, body) = send(&app, ready()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["tools"].as_u64().unwrap() > 0, "{body}");
}

/// With caller tokens, a probe without a token (Kubernetes' httpGet probes
/// cannot send a secret) hears whether the server is ready and nothing else;
/// a token gets the plugins, a wrong one is refused.
#[tokio::test]
async fn readiness_answers_a_probe_without_a_token_but_names_nothing() {
    let plugins = calc_plugins();
    let data = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.auth.tokens = vec!["a-caller-token-of-16+".into()];
    let server = Server::build(&config, plugins.path(), data.path())
        .await
        .unwrap();
    server.load_plugins();
    let app = server.router(&config);
    let probe = || Request::get("/health/ready").body(Body::empty()).unwrap();
    let (status, _, body) = send(&app, probe()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body, json!({"ready": false}));
    server.loaded().await;
    let (status, _, body) = send(&app, probe()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"ready": true}));
    let with = |token: &str| {
        Request::get("/health/ready")
            .header("authorization", format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap()
    };
    let (status, _, body) = send(&app, with("a-caller-token-of-16+")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["tools"].as_u64().unwrap() > 0, "{body}");
    let (status, _, _) = send(&app, with("not-the-caller-token")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = send(&app, Request::get("/tools").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "only readiness is open");
}

fn admin(req: axum::http::request::Builder) -> axum::http::request::Builder {
    req.header("authorization", "Bearer admin-admin-admin-admin")
}

fn set_status(id: &str, body: &str, as_admin: bool) -> Request<Body> {
    let req =
        Request::put(format!("/tools/{id}/status")).header("content-type", "application/json");
    let req = if as_admin { admin(req) } else { req };
    req.body(Body::from(body.to_owned())).unwrap()
}

/// MCP `tools/list` (2026-07-28, stateless): the names listed.
async fn mcp_tool_names(app: &axum::Router) -> Vec<String> {
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "router-test", "version": "0"}
        }
    }});
    let req = Request::post("/mcp")
        .header("host", "localhost")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .body(Body::from(list.to_string()))
        .unwrap();
    let (status, _, body) = send(app, req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_inactive_tool_leaves_every_surface_and_stays_inactive_across_a_restart() {
    let mut config = Config::default();
    config.auth.admin_token = Some("admin-admin-admin-admin".into());
    let plugins = calc_plugins();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(&config, plugins.path(), data.path())
        .await
        .unwrap();
    let app = server.router(&config);
    let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();

    let (_, _, body) = send(&app, get("/tools")).await;
    let evaluate = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool_id"] == "calc_evaluate")
        .cloned()
        .unwrap();
    assert_eq!(evaluate["status"], "active");
    assert_eq!(evaluate["category"], "calc");
    let (status, _, _) = send(
        &app,
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{"expression":"1+2"}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // Only admins change statuses, and only along the lifecycle.
    let (status, _, _) = send(
        &app,
        set_status("calc_evaluate", r#"{"status":"inactive"}"#, false),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, body) = send(
        &app,
        set_status("calc_evaluate", r#"{"status":"retired"}"#, true),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, _, body) = send(
        &app,
        set_status("calc_evaluate", r#"{"status":"building"}"#, true),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, _, body) = send(
        &app,
        set_status("calc_nope", r#"{"status":"inactive"}"#, true),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _, body) = send(
        &app,
        set_status("calc_evaluate", r#"{"status":"inactive"}"#, true),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (&body["status"], &body["previous"]),
        (&json!("inactive"), &json!("active"))
    );

    // Hidden from discovery on every surface.
    let listed = |body: &Value, key: &str| -> bool {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t[key] == "calc_evaluate" || t["function"]["name"] == "calc_evaluate")
    };
    let (_, _, body) = send(&app, get("/tools")).await;
    assert!(!listed(&body, "tool_id"), "{body}");
    let (_, _, body) = send(&app, get("/tools?format=openai")).await;
    assert!(!listed(&body, "name"), "{body}");
    let (_, _, body) = send(&app, get("/tools?format=mcp")).await;
    assert!(!listed(&body, "name"), "{body}");
    assert!(
        !mcp_tool_names(&app)
            .await
            .iter()
            .any(|n| n == "calc_evaluate")
    );
    let (_, _, body) = send(&app, post("/get_available_tools", "{}")).await;
    assert!(
        !body["available_tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "calc_evaluate"),
        "{body}"
    );
    let (_, _, body) = send(
        &app,
        post(
            "/get_json_schema_for_tools",
            r#"{"tool_names":["calc_evaluate"]}"#,
        ),
    )
    .await;
    assert_eq!(body["missing_tools"], json!(["calc_evaluate"]), "{body}");
    let (_, _, body) = send(
        &app,
        post(
            "/retrieving_tools",
            r#"{"question":"evaluate an arithmetic expression"}"#,
        ),
    )
    .await;
    assert!(
        !body["retrieved_tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "calc_evaluate"),
        "{body}"
    );
    // Calls get 409 naming the status.
    let (status, _, body) = send(
        &app,
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{"expression":"1+2"}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["kind"], "not_active");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("inactive"),
        "{body}"
    );
    // Admins see it, with its status and statistics.
    let (status, _, _) = send(&app, get("/tools?include=all")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, body) = send(
        &app,
        admin(Request::get("/tools?include=all&status=inactive"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["tools"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["tools"][0]["tool_id"], "calc_evaluate");
    let (_, _, body) = send(&app, get("/tools/calc_evaluate")).await;
    assert_eq!(body["status"], "inactive");
    assert_eq!(body["stats"]["call_count"], 1, "{body}");
    assert!(
        body["stats"]["p50_latency_ms"].as_f64().unwrap() > 0.0,
        "{body}"
    );

    // A restart on the same data directory: still inactive, same statistics.
    server.shutdown().await;
    drop(app);
    drop(server);
    let server = Server::start(&config, plugins.path(), data.path())
        .await
        .unwrap();
    let app = server.router(&config);
    let (_, _, body) = send(&app, get("/tools/calc_evaluate")).await;
    assert_eq!(body["status"], "inactive", "{body}");
    assert_eq!(body["stats"]["call_count"], 1, "{body}");
    let (status, _, _) = send(
        &app,
        set_status("calc_evaluate", r#"{"status":"active"}"#, true),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = send(
        &app,
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{"expression":"1+2"}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, _, body) = send(&app, get("/tools")).await;
    assert!(listed(&body, "tool_id"), "{body}");
}

#[tokio::test]
async fn the_budget_holds_tasks_for_approval_or_refuses_them_and_system_reports_the_host() {
    let mut config = Config::default();
    config.auth.admin_token = Some("admin-admin-admin-admin".into());
    config.budget.monthly_limit_usd = Some(60.0);
    config.budget.single_tx_limit_usd = Some(50.0);
    config.budget.require_approval_above_usd = Some(10.0);
    let (_server, app, _dirs) = calc_server(&config).await;
    let ask = |name: &str, cost: f64| {
        admin(Request::post("/tools/request"))
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"name": name, "description": "Some tool.", "cost_usd": cost}).to_string(),
            ))
            .unwrap()
    };
    let (status, _, cheap) = send(&app, ask("wanted", 3.0)).await;
    assert_eq!(
        (status, &cheap["status"]),
        (StatusCode::ACCEPTED, &json!("pending")),
        "{cheap}"
    );
    // One task per name at a time: the cheap one is cancelled first.
    let id = cheap["task_id"].as_str().unwrap();
    let (status, _, _) = send(
        &app,
        admin(Request::delete(format!("/tasks/{id}")))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, dear) = send(&app, ask("wanted", 20.0)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{dear}");
    assert_eq!(dear["status"], "awaiting_approval", "{dear}");
    let dear_id = dear["task_id"].as_str().unwrap().to_owned();
    let (status, _, body) = send(&app, ask("pricey", 55.0)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["kind"], "over_budget");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("single-task"),
        "{body}"
    );

    let (_, _, budget) = send(
        &app,
        admin(Request::get("/budget")).body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(
        budget["spent_this_month_usd"], 20.0,
        "a cancelled task commits nothing: {budget}"
    );
    assert_eq!(budget["remaining_usd"], 40.0);

    let approve = |id: &str| {
        admin(Request::post(format!("/tasks/{id}/approve")))
            .body(Body::empty())
            .unwrap()
    };
    let (status, _, body) = send(&app, approve(&dear_id)).await;
    assert_eq!(
        (status, &body["status"]),
        (StatusCode::OK, &json!("pending")),
        "{body}"
    );
    let (status, _, _) = send(&app, approve(&dear_id)).await;
    assert_eq!(status, StatusCode::CONFLICT, "approved once");
    let (status, _, _) = send(&app, approve("task-nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // 20 committed: 45 more is past the monthly 60.
    let other = admin(Request::post("/tools/request"))
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"name": "another", "description": "x", "cost_usd": 45.0}).to_string(),
        ))
        .unwrap();
    let (status, _, body) = send(&app, other).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("monthly"),
        "{body}"
    );

    // GET /system: the host, and each tool's usage (admin only).
    let (status, _, _) = send(
        &app,
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{"expression":"2*3"}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = send(&app, Request::get("/system").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, system) = send(
        &app,
        admin(Request::get("/system")).body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{system}");
    for key in [
        "cpu_count",
        "cpu_percent",
        "memory_total_mb",
        "memory_available_mb",
        "memory_percent",
        "disk_total_gb",
        "disk_free_gb",
    ] {
        assert!(system[key].is_number(), "{key}: {system}");
    }
    let calc = system["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool_id"] == "calc_evaluate")
        .cloned()
        .unwrap();
    assert_eq!(calc["calls_since_start"], 1, "{calc}");
    assert!(calc["avg_fuel"].as_u64().unwrap() > 0, "{calc}");
    assert!(calc["peak_memory_mb"].as_f64().unwrap() > 0.0, "{calc}");
}

/// The native `input` field (input requests, #27): checked before the tool
/// runs; a tool that never asks is untouched by it.
#[tokio::test]
async fn native_input_is_checked_before_the_call() {
    let (server, app, _dirs) = calc_server(&Config::default()).await;
    let invoke = |input: Value| {
        post(
            "/tools/calc_evaluate/invoke",
            json!({"params": {"expression": "1+1"}, "input": input}).to_string(),
        )
    };
    let (status, _, body) = send(&app, invoke(json!("none"))).await;
    assert_eq!(
        (status, &body["result"]["value"]),
        (StatusCode::OK, &json!(2.0))
    );
    for (input, says) in [
        (json!("later"), "\"none\" or"),
        (json!(7), "\"none\" or"),
        (json!({"answers": {}}), "`state`"),
        (json!({"state": 3}), "`state`"),
        (json!({"state": "forged"}), "state refused"),
        (json!({"state": "x", "extra": 1}), "unknown field `extra`"),
    ] {
        let (status, _, body) = send(&app, invoke(input.clone())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{input}: {body}");
        assert_eq!(body["error"]["kind"], "invalid_input");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{input}: {message}");
    }
    let stats = server
        .dispatcher
        .catalog()
        .get("calc_evaluate")
        .unwrap()
        .record
        .stats
        .view();
    assert_eq!(stats.call_count, 1, "a refused input ran the tool");
}
