//! A backend added through the backend trait alone, on every surface.

use super::*;

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
