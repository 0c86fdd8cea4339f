//! toolhost as an MCP client (rmcp's client side): one connection to a
//! server, its progress notifications routed to the calls that asked for
//! them, its `tools/list_changed` passed on, its results mapped to content.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use rmcp::ClientHandler;
use rmcp::ErrorData;
// Sampling and roots are deprecated by the 2026-07-28 protocol (SEP-2577);
// servers of 2025-11-25 still ask them.
#[allow(deprecated)]
use rmcp::model::{
    CallToolResult, ClientConfig, ContentBlock, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, Implementation, ListRootsResult, ProgressNotificationParam,
    ProgressToken,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RunningService};

pub use super::asks::Asking;
use super::routes::{RouteGuard, Routes, key, route};
use crate::input::Kind;

use crate::tool::{
    Annotated, CallError, Content, EmbeddedResource, Progress, ProgressSink, ResourceLink,
};

use crate::nodes::stdio::ContainerGuard;

/// A node process's stderr tail.
type Stderr = Arc<Mutex<std::collections::VecDeque<u8>>>;

/// Calls waiting for progress, by token.
pub type Waiting = Routes<Relay>;

/// Progress reports a call's caller gets from a server, at most one per
/// this long (and the last one, at its total): a server reporting in a
/// tight loop costs its caller 20 events a second, not thousands.
pub const PROGRESS_GAP: std::time::Duration = std::time::Duration::from_millis(50);

/// Where one call's progress goes, and when the last report went.
#[derive(Clone)]
pub struct Relay {
    sink: ProgressSink,
    last: Arc<Mutex<Option<std::time::Instant>>>,
}

impl Relay {
    /// Pass `progress` on unless the previous report went less than
    /// [`PROGRESS_GAP`] ago (the final one always goes).
    fn report(&self, progress: Progress, last_one: bool) {
        let now = std::time::Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last_one || last.is_none_or(|at| now.duration_since(at) >= PROGRESS_GAP) {
            *last = Some(now);
            drop(last);
            self.sink.report(progress);
        }
    }
}

/// What the server's notifications and requests reach.
pub struct Handler {
    waiting: Waiting,
    /// The callers of the calls in flight, for the server's questions.
    asking: Asking,
    /// Called when the server's tool list changed.
    changed: Box<dyn Fn() + Send + Sync>,
    /// Whether the server is told roots: the session's workspace, for a
    /// server run per session in a node (where it is `/workspace`). Other
    /// servers have no workspace to be told of, and keep their own idea of
    /// their folders (a filesystem server would take roots for them).
    workspace_roots: bool,
}

impl Handler {
    /// A handler calling `changed` on `tools/list_changed`, telling the
    /// server the session's workspace as its roots when `workspace_roots`.
    pub fn new(
        changed: impl Fn() + Send + Sync + 'static,
        workspace_roots: bool,
    ) -> (Handler, Waiting, Asking) {
        let waiting = Waiting::default();
        let asking = Asking::default();
        (
            Handler {
                waiting: waiting.clone(),
                asking: asking.clone(),
                changed: Box::new(changed),
                workspace_roots,
            },
            waiting,
            asking,
        )
    }
}

impl ClientHandler for Handler {
    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        tracing::debug!(
            token = key(&params.progress_token.0),
            progress = params.progress,
            "MCP server progress"
        );
        let sink = self
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key(&params.progress_token.0))
            .cloned();
        if let Some(relay) = sink {
            let last_one = params.total.is_some_and(|t| params.progress >= t);
            relay.report(
                Progress {
                    message: params.message.unwrap_or_default(),
                    done: Some(params.progress),
                    total: params.total,
                },
                last_one,
            );
        }
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        (self.changed)();
        std::future::ready(())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        super::asks::forward(&self.asking, &context, Kind::Form, &request).await
    }

    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        super::asks::forward(&self.asking, &context, Kind::Sampling, &params).await
    }

    #[allow(deprecated)]
    fn list_roots(
        &self,
        _: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ListRootsResult, ErrorData>> + Send + '_ {
        let roots = match self.workspace_roots {
            true => {
                serde_json::json!({"roots": [{"uri": "file:///workspace", "name": "workspace"}]})
            }
            false => serde_json::json!({"roots": []}),
        };
        std::future::ready(
            serde_json::from_value(roots)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None)),
        )
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        // What toolhost's callers may answer: the server lists the tools
        // that ask (a caller that cannot answer gets the server's error).
        let mut capabilities = serde_json::json!({
            "elicitation": {"form": {}, "url": {}},
            "sampling": {},
        });
        if self.workspace_roots {
            capabilities["roots"] = serde_json::json!({"listChanged": false});
        }
        info.capabilities = serde_json::from_value(capabilities).unwrap_or_default();
        info.client_info = Implementation::new("toolhost", env!("CARGO_PKG_VERSION"));
        info
    }
}

/// `reload` run for a burst of changes once, `every` after its first one
/// (with how many more it absorbed); changes while a reload waits join it,
/// so reloads happen at most once per `every` however often changes come.
pub fn coalescing(
    every: std::time::Duration,
    reload: impl Fn(u64) + Send + Sync + 'static,
) -> impl Fn() + Send + Sync + 'static {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let reload = Arc::new(reload);
    let pending = Arc::new(AtomicBool::new(false));
    let absorbed = Arc::new(AtomicU64::new(0));
    move || {
        if pending.swap(true, Ordering::AcqRel) {
            absorbed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let (reload, pending, absorbed) = (reload.clone(), pending.clone(), absorbed.clone());
        tokio::spawn(async move {
            tokio::time::sleep(every).await;
            pending.store(false, Ordering::Release);
            reload(absorbed.swap(0, Ordering::Relaxed));
        });
    }
}

/// One live connection to a server.
pub struct Connection {
    pub service: RunningService<RoleClient, Handler>,
    pub waiting: Waiting,
    /// The callers of the calls in flight, for the server's questions.
    pub asking: Asking,
    /// A server run in a node: its container (removed with the connection)
    /// and its stderr.
    process: Option<(tokio::sync::Mutex<ContainerGuard>, Stderr)>,
    started: std::time::Instant,
    /// A call found the transport gone (the server exited, the connection
    /// broke): the next load makes a new connection.
    pub broken: std::sync::atomic::AtomicBool,
    /// Changes when the calls in flight will get no answer (a remote
    /// server's cut streams could not be resumed: `http::SessionAware`).
    lost: Option<tokio::sync::watch::Receiver<u64>>,
}

impl Connection {
    pub fn new(
        service: RunningService<RoleClient, Handler>,
        (waiting, asking): (Waiting, Asking),
        process: Option<(ContainerGuard, Stderr)>,
    ) -> Self {
        Connection {
            service,
            waiting,
            asking,
            process: process.map(|(guard, stderr)| (tokio::sync::Mutex::new(guard), stderr)),
            started: std::time::Instant::now(),
            broken: Default::default(),
            lost: None,
        }
    }

    /// End the calls in flight when `lost` changes.
    pub fn losing_calls_on(mut self, lost: tokio::sync::watch::Receiver<u64>) -> Self {
        self.lost = Some(lost);
        self
    }

    /// Resolves when the calls in flight now will get no answer (never, for
    /// a connection that cannot tell); losses before this call do not count.
    pub fn call_lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut lost = self.lost.clone();
        if let Some(lost) = &mut lost {
            lost.borrow_and_update();
        }
        async move {
            match lost {
                Some(mut lost) => {
                    if lost.changed().await.is_err() {
                        std::future::pending::<()>().await
                    }
                }
                None => std::future::pending().await,
            }
        }
    }

    /// Whether calls can still go through it.
    pub fn is_usable(&self) -> bool {
        !self.broken.load(std::sync::atomic::Ordering::Acquire) && !self.service.is_closed()
    }

    /// A server run in a node: its container (unless a call holds it).
    pub fn container_id(&self) -> Option<String> {
        let (guard, _) = self.process.as_ref()?;
        guard.try_lock().ok().map(|g| g.id.clone())
    }

    /// How long the connection has been up.
    pub fn age(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    /// Stop the server: the connection, and a node's container (awaited).
    pub async fn close(&self) {
        self.service.cancellation_token().cancel();
        if let Some((guard, _)) = &self.process {
            let mut guard = guard.lock().await;
            guard.remove().await;
        }
    }

    /// A server run in a node: the last lines of its stderr.
    pub fn stderr_tail(&self) -> String {
        self.process
            .as_ref()
            .map(|(_, stderr)| crate::nodes::stdio::tail(stderr))
            .unwrap_or_default()
    }

    /// Route the server's progress on `token` to `sink` until the guard
    /// drops.
    pub fn route(&self, token: ProgressToken, sink: ProgressSink) -> RouteGuard<Relay> {
        let relay = Relay {
            sink,
            last: Arc::default(),
        };
        route(&self.waiting, &token.0, relay)
    }
}

/// A server's call result as content, item for item: text, images and
/// audio, resource links, embedded resources, each with its annotations and
/// `_meta`, `structuredContent` beside them ([`Content::Structured`]) and the
/// result's own `_meta` ([`Content::Meta`]), so an MCP caller gets the
/// server's result unchanged. `isError` is a tool
/// error carrying those items ([`CallError::Reported`]).
pub fn into_content(result: CallToolResult) -> Result<Vec<Content>, CallError> {
    let mut content = Vec::new();
    for item in result.content {
        let wire = serde_json::to_value(&item).map_err(|e| CallError::Internal(e.to_string()))?;
        let field = |v: &serde_json::Value, k: &str| v.get(k).filter(|x| !x.is_null()).cloned();
        let text_of =
            |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
        let plain = match item {
            ContentBlock::Text(t) => Content::Text(t.text),
            ContentBlock::Image(image) => binary(&image.mime_type, &image.data)?,
            ContentBlock::Audio(audio) => binary(&audio.mime_type, &audio.data)?,
            ContentBlock::ResourceLink(_) => Content::Link(ResourceLink {
                uri: text_of(&wire, "uri").unwrap_or_default(),
                name: text_of(&wire, "name").unwrap_or_default(),
                title: text_of(&wire, "title"),
                description: text_of(&wire, "description"),
                mime_type: text_of(&wire, "mimeType"),
                size: wire.get("size").and_then(|x| x.as_u64()),
            }),
            ContentBlock::Resource(_) => {
                let r = wire.get("resource").cloned().unwrap_or_default();
                let blob = match text_of(&r, "blob") {
                    Some(b64) => Some(decode(&b64)?),
                    None => None,
                };
                Content::Resource(EmbeddedResource {
                    uri: text_of(&r, "uri").unwrap_or_default(),
                    mime_type: text_of(&r, "mimeType"),
                    text: text_of(&r, "text"),
                    blob,
                    meta: field(&r, "_meta"),
                })
            }
            // A kind this rmcp knows and toolhost does not: its JSON.
            _ => Content::Json(wire.clone()),
        };
        let (annotations, meta) = (field(&wire, "annotations"), field(&wire, "_meta"));
        content.push(if annotations.is_some() || meta.is_some() {
            Content::Annotated(Box::new(Annotated {
                item: plain,
                annotations,
                meta,
            }))
        } else {
            plain
        });
    }
    if let Some(structured) = result.structured_content {
        content.push(Content::Structured(structured));
    }
    // Its own keys, not the protocol's word on who answered: through
    // toolhost, toolhost is the server its caller talks to.
    // The same for the task the server ran the call as.
    let meta = result.meta.map(|mut m| {
        m.remove("io.modelcontextprotocol/serverInfo");
        m.remove("io.modelcontextprotocol/related-task");
        m
    });
    if let Some(meta) = meta.filter(|m| !m.is_empty()) {
        content.push(Content::Meta(serde_json::Value::Object(meta.0)));
    }
    if result.is_error == Some(true) {
        return Err(CallError::Reported(content));
    }
    Ok(content)
}

fn decode(data: &str) -> Result<Vec<u8>, CallError> {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| CallError::ToolError(format!("the MCP server sent invalid base64: {e}")))
}

fn binary(media_type: &str, data: &str) -> Result<Content, CallError> {
    Ok(Content::Binary {
        media_type: media_type.to_owned(),
        data: decode(data)?,
        name: None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_results_own_meta_is_kept_but_not_who_answered() {
        let result: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [{"type": "text", "text": "3 rows"}],
            "structuredContent": {"rows": 3},
            "_meta": {"example.org/cursor": "c1", "io.modelcontextprotocol/serverInfo": {"name": "up", "version": "1"}}
        }))
        .unwrap();
        let content = into_content(result).unwrap();
        assert_eq!(
            content.last(),
            Some(&Content::Meta(
                serde_json::json!({"example.org/cursor": "c1"})
            ))
        );
        let (items, meta) = Content::split_meta(&content);
        assert_eq!(items.len(), 2);
        assert!(meta.is_some());
        // Only who answered: nothing to keep.
        let result: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [],
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "up", "version": "1"}}
        }))
        .unwrap();
        assert_eq!(into_content(result).unwrap(), vec![]);
    }

    #[tokio::test]
    async fn a_burst_of_changes_reloads_once() {
        let reloads = Arc::new(Mutex::new(Vec::new()));
        let seen = reloads.clone();
        let changed = coalescing(Duration::from_millis(200), move |absorbed| {
            seen.lock().unwrap().push(absorbed);
        });
        // 100 notifications at once: one reload, after the window.
        for _ in 0..100 {
            changed();
        }
        assert!(reloads.lock().unwrap().is_empty());
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(*reloads.lock().unwrap(), vec![99]);
        // A later change is followed again.
        changed();
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(*reloads.lock().unwrap(), vec![99, 0]);
    }
}
