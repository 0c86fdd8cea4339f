//! MCP servers as toolkits: toolhost as an MCP gateway. A folder
//! `<plugins>/<name>/` whose `<name>.toml` has an `[mcp]` table (see
//! [`manifest`]) mounts a remote server (streamable HTTP) through rmcp's
//! client: its tools join the catalog under the toolkit's prefix (schemas
//! normalised like every tool's; an invalid one skipped with a warning), a
//! `notifications/tools/list_changed` reloads the toolkit (swapped like any
//! new version, on the same connection), calls are forwarded with their
//! arguments, progress notifications become toolhost progress, and a call
//! that ends early (the caller went away, its time limit) is cancelled on the
//! server.

pub mod client;
pub mod manifest;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId,
    ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::backend::{
    Backend, BackendFuture, EntryFile, Loaded, Refresh, content_hash, folder_entry, folder_files,
    folder_manifest,
};
use crate::catalog::{BoxFuture, Invocation, Toolkit};
use crate::httpapi::manifest::Secrets;
use crate::outbound::HttpPolicy;
use crate::tool::{self, CallError, Content, Limits, ToolDescriptor};
use client::{Connection, Handler};

/// The backend of MCP-server toolkits.
pub struct McpBackend {
    secrets: Secrets,
    refresh: OnceLock<Refresh>,
    /// Each toolkit's live connection, with the manifest it was made for.
    connections: Mutex<HashMap<String, (String, Arc<Connection>)>>,
}

impl McpBackend {
    pub fn new(secrets: Secrets) -> Self {
        McpBackend {
            secrets,
            refresh: OnceLock::new(),
            connections: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Arc<Connection>)>> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The live connection made for this manifest, else a new one.
    async fn connection(
        &self,
        name: &str,
        identity: &str,
        m: &manifest::McpSection,
    ) -> Result<Arc<Connection>, String> {
        if let Some((made_for, conn)) = self.lock().get(name).cloned()
            && made_for == identity
            && !conn.service.is_closed()
        {
            return Ok(conn);
        }
        let url = reqwest::Url::parse(&m.url).map_err(|e| format!("[mcp] url: {e}"))?;
        let methods = ["GET".to_string(), "POST".into(), "DELETE".into()];
        let policy = HttpPolicy::parse(&m.allow, &methods)
            .map_err(|e| e.replace("http.allow", "[mcp] allow"))?
            .named("[mcp] allow");
        if let Some(why) = policy.refusal(
            "POST",
            url.scheme(),
            url.host_str().unwrap_or(""),
            url.port(),
        ) {
            return Err(format!("[mcp] url: {why}"));
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(m.url.clone());
        if let Some(auth) = &m.auth {
            let secret = self.secrets.get(&auth.secret)?;
            match auth.kind {
                manifest::AuthKind::Bearer => config.auth_header = Some(secret),
                manifest::AuthKind::Header => {
                    let header = auth.name.as_deref().unwrap_or_default();
                    let name = reqwest::header::HeaderName::from_bytes(header.as_bytes())
                        .map_err(|_| format!("[mcp.auth] name `{header}` is not a header name"))?;
                    let mut value = reqwest::header::HeaderValue::from_str(&secret)
                        .map_err(|_| "the secret is not valid in an HTTP header".to_owned())?;
                    value.set_sensitive(true);
                    config.custom_headers.insert(name, value);
                }
            }
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let refresh = self.refresh.get().cloned();
        let toolkit = name.to_owned();
        let (handler, waiting) = Handler::new(move || {
            tracing::info!(toolkit, "MCP server: its tool list changed; reloading");
            if let Some(r) = &refresh {
                r.entry(&toolkit);
            }
        });
        let within = Duration::from_millis(m.init_timeout_ms);
        let service = tokio::time::timeout(within, handler.serve(transport))
            .await
            .map_err(|_| {
                format!(
                    "the MCP server did not finish initialize within {} ms",
                    m.init_timeout_ms
                )
            })?
            .map_err(|e| format!("the MCP server's initialize failed: {e}"))?;
        let conn = Arc::new(Connection::new(service, waiting));
        self.lock()
            .insert(name.to_owned(), (identity.to_owned(), conn.clone()));
        Ok(conn)
    }

    async fn load_manifest(&self, name: &str, files: &[EntryFile]) -> Result<Loaded, String> {
        let (_, text) = folder_manifest(name, files)?;
        let manifest = manifest::parse(text)?;
        let m = &manifest.mcp;
        let identity: String = files.iter().map(|f| content_hash(&f.bytes)).collect();
        let conn = self.connection(name, &identity, m).await?;
        let within = Duration::from_millis(m.init_timeout_ms);
        let listed = tokio::time::timeout(within, conn.service.peer().list_all_tools())
            .await
            .map_err(|_| {
                format!(
                    "the MCP server did not list its tools within {} ms",
                    m.init_timeout_ms
                )
            })?
            .map_err(|e| format!("the MCP server's tools/list failed: {e}"))?;
        let room = tool::MAX_TOOL_ID_LEN.saturating_sub(name.len() + 1);
        let mut tools = Vec::new();
        let mut names = HashMap::new();
        for t in listed {
            let ours: String = t
                .name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let ours: String = ours.chars().take(room).collect();
            if ours.is_empty() {
                continue;
            }
            let input = serde_json::Value::Object((*t.input_schema).clone());
            if let Err(e) = jsonschema::validator_for(&input) {
                tracing::warn!(toolkit = name, tool = %t.name, error = %e, "MCP server tool skipped: its input schema is not valid");
                continue;
            }
            if names.contains_key(&ours) {
                tracing::warn!(toolkit = name, tool = %t.name, "MCP server tool skipped: its name clashes with another once made an id");
                continue;
            }
            names.insert(ours.clone(), t.name.to_string());
            tools.push(ToolDescriptor {
                name: ours,
                description: t.description.as_deref().unwrap_or_default().to_owned(),
                input_schema: input,
                output_schema: t
                    .output_schema
                    .as_ref()
                    .map(|s| serde_json::Value::Object((**s).clone())),
                continue_with: None,
            });
        }
        if tools.is_empty() {
            return Err("the MCP server lists no usable tool".into());
        }
        // The tool list is part of the version: a changed list is a new one.
        let listing = serde_json::to_vec(
            &tools
                .iter()
                .map(|t| (&t.name, &t.input_schema))
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default();
        let version = content_hash(format!("{identity}{}", content_hash(&listing)).as_bytes());
        let description = manifest.description.clone().unwrap_or_else(|| {
            conn.service
                .peer()
                .peer_info()
                .and_then(|i| i.server_info.clone())
                .map(|s| format!("The MCP server {}", s.name))
                .unwrap_or_else(|| format!("The MCP server {name}"))
        });
        Ok(Loaded {
            description,
            version,
            limits: Limits {
                fuel: 0,
                memory_mb: 0,
                timeout_ms: m.timeout_ms,
                max_concurrency: m.max_concurrency,
                max_queue: 256,
                max_output_kb: 16 * 1024,
            },
            toolkit: Arc::new(McpToolkit {
                conn,
                names,
                toolkit: name.to_owned(),
                refresh: self.refresh.get().cloned(),
            }),
            tools,
            compile: None,
        })
    }
}

impl Backend for McpBackend {
    fn name(&self) -> &'static str {
        "mcp"
    }

    fn claim(&self, child: &Path) -> Option<String> {
        folder_entry(child)
    }

    /// Folders whose manifest has an `[mcp]` table.
    fn files(&self, dir: &Path, name: &str) -> Vec<PathBuf> {
        folder_files(dir, name, "mcp")
    }

    fn load<'a>(
        &'a self,
        name: &'a str,
        files: Vec<EntryFile>,
        _report: &'a (dyn Fn(&'static str) + Sync),
    ) -> BackendFuture<'a, Result<Loaded, String>> {
        Box::pin(async move { self.load_manifest(name, &files).await })
    }

    fn unloaded(&self, name: &str, replaced: bool) {
        if !replaced && let Some((_, conn)) = self.lock().remove(name) {
            conn.service.cancellation_token().cancel();
        }
    }

    fn attach(&self, refresh: Refresh) {
        let _ = self.refresh.set(refresh);
    }

    fn shutdown(&self) -> BackendFuture<'_, ()> {
        Box::pin(async move {
            let all: Vec<_> = self.lock().drain().map(|(_, (_, c))| c).collect();
            for conn in all {
                conn.service.cancellation_token().cancel();
            }
        })
    }
}

/// An MCP server's tools as the catalog sees them.
struct McpToolkit {
    conn: Arc<Connection>,
    /// Our tool name -> the server's.
    names: HashMap<String, String>,
    toolkit: String,
    refresh: Option<Refresh>,
}

impl Toolkit for McpToolkit {
    fn invoke(self: Arc<Self>, call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
        Box::pin(async move {
            let server_name = self
                .names
                .get(&call.tool)
                .ok_or_else(|| CallError::NotFound(call.tool.clone()))?;
            let mut params = CallToolRequestParams::new(server_name.clone());
            params.arguments = match call.input {
                serde_json::Value::Object(map) => Some(map),
                _ => None,
            };
            let limit = Duration::from_millis(call.limits.timeout_ms);
            let peer = self.conn.service.peer();
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let sent = tokio::time::timeout(
                limit,
                peer.send_request_with_option(request, PeerRequestOptions::no_options()),
            )
            .await
            .map_err(|_| CallError::Timeout {
                limit_ms: call.limits.timeout_ms,
            })?;
            let result = match sent {
                Ok(handle) => {
                    // rmcp gives every request its own progress token: the
                    // server's progress on it goes to this call's stream.
                    let _progress = call
                        .progress
                        .map(|sink| self.conn.route(handle.progress_token.clone(), sink));
                    // However this call ends early (its caller went away, its
                    // time limit), the server is told to cancel it.
                    let mut cancel = CancelOnDrop(Some((peer.clone(), handle.id.clone())));
                    let answer = tokio::time::timeout(limit, handle.await_response())
                        .await
                        .map_err(|_| CallError::Timeout {
                            limit_ms: call.limits.timeout_ms,
                        })?;
                    cancel.0 = None;
                    answer
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(ServerResult::CallToolResult(result)) => client::into_content(result),
                Ok(_) => Err(CallError::ToolError(
                    "the MCP server answered tools/call with something else than a result".into(),
                )),
                Err(ServiceError::McpError(e)) if e.code.0 == -32602 => {
                    Err(CallError::invalid_input(e.message.to_string()))
                }
                Err(ServiceError::McpError(e)) => Err(CallError::ToolError(e.message.to_string())),
                Err(e) => {
                    // The connection is gone: the next load reconnects.
                    if self.conn.service.is_closed()
                        && let Some(r) = &self.refresh
                    {
                        r.entry(&self.toolkit);
                    }
                    Err(CallError::BackendUnavailable(format!(
                        "the MCP server {} is not reachable: {e}",
                        self.toolkit
                    )))
                }
            }
        })
    }
}

/// Tells the server to cancel a request whose caller stopped waiting.
struct CancelOnDrop(Option<(Peer<RoleClient>, RequestId)>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some((peer, id)) = self.0.take() {
            tokio::spawn(async move {
                let params = CancelledNotificationParam::new(
                    Some(id),
                    Some("the caller stopped waiting (went away or timed out)".into()),
                );
                let _ = peer.notify_cancelled(params).await;
            });
        }
    }
}
