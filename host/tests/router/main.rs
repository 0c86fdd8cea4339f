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

mod backend;
mod registry;

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
