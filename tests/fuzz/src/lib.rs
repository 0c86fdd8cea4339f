//! Shared by the router-level fuzz targets: one in-process server (the real
//! wasm backend, the `calc` and `files` plugins from `target/plugins`, no
//! Docker) whose axum router each input is sent to with `oneshot`.

use std::sync::OnceLock;

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;

pub struct Harness {
    pub runtime: tokio::runtime::Runtime,
    pub router: axum::Router,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

/// The server, started on first use.
pub fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let built = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/plugins");
        let plugins = tempfile::tempdir().unwrap();
        for file in ["calc.wasm", "calc.toml", "files.wasm", "files.toml"] {
            std::fs::copy(format!("{built}/{file}"), plugins.path().join(file))
                .unwrap_or_else(|e| panic!("{built}/{file}: {e} (run `make plugins` first)"));
        }
        let data = tempfile::tempdir().unwrap();
        let mut config = toolhost::config::Config::default();
        config.docker.enabled = false;
        config.plugins.watch = false;
        let router = runtime.block_on(async {
            let server = toolhost::server::Server::start(&config, plugins.path(), data.path())
                .await
                .unwrap();
            server.router(&config)
        });
        Harness {
            runtime,
            router,
            _dirs: (plugins, data),
        }
    })
}

/// POST `body` to `path` with `headers`; the status and body of the answer.
pub fn post(path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> (u16, Vec<u8>) {
    let h = harness();
    let mut req = Request::post(path).header("host", "127.0.0.1");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Body::from(body)).unwrap();
    h.runtime.block_on(async {
        let resp = h.router.clone().oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 24)
            .await
            .unwrap_or_default();
        (status, body.to_vec())
    })
}

/// Every answer must be JSON-shaped or empty and never a server fault the
/// input alone could cause (500 is reserved for tool failures and limits).
pub fn check(path: &str, status: u16, body: &[u8]) {
    assert!(
        status != 500 || path.contains("invoke") || path.contains("execute_tool"),
        "{path}: 500 {}",
        String::from_utf8_lossy(body)
    );
    assert!(
        status != 502 && status != 503 && status != 504
            || path.contains("invoke")
            || path.contains("execute_tool"),
        "{path}: {status} {}",
        String::from_utf8_lossy(body)
    );
}
