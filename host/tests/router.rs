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

async fn send(
    app: &axum::Router,
    req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Value) {
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

#[tokio::test]
async fn routes_statuses_and_session_header() {
    let plugins = calc_plugins();
    let data = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.server.max_body_kb = 1;
    let server = Server::start(&config, plugins.path(), data.path())
        .await
        .unwrap();
    assert!(server.load_errors().is_empty());
    let app = server.router(&config);

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
        server.dispatcher.sessions().get(session).is_some(),
        "a new session was opened"
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
