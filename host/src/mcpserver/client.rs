//! toolhost as an MCP client (rmcp's client side): one connection to a
//! server, its progress notifications routed to the calls that asked for
//! them, its `tools/list_changed` passed on, its results mapped to content.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use rmcp::ClientHandler;
use rmcp::model::{
    CallToolResult, ClientCapabilities, ClientConfig, ContentBlock, Implementation, NumberOrString,
    ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};

use crate::tool::{CallError, Content, Progress, ProgressSink};

use crate::nodes::stdio::ContainerGuard;

/// A node process's stderr tail.
type Stderr = Arc<Mutex<std::collections::VecDeque<u8>>>;

/// Calls waiting for progress, by token.
pub type Waiting = Arc<Mutex<HashMap<String, ProgressSink>>>;

/// What the server's notifications reach.
pub struct Handler {
    waiting: Waiting,
    /// Called when the server's tool list changed.
    changed: Box<dyn Fn() + Send + Sync>,
}

impl Handler {
    pub fn new(changed: impl Fn() + Send + Sync + 'static) -> (Handler, Waiting) {
        let waiting = Waiting::default();
        (
            Handler {
                waiting: waiting.clone(),
                changed: Box::new(changed),
            },
            waiting,
        )
    }
}

fn key(token: &ProgressToken) -> String {
    match &token.0 {
        NumberOrString::Number(n) => n.to_string(),
        NumberOrString::String(s) => s.to_string(),
    }
}

impl ClientHandler for Handler {
    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        tracing::debug!(
            token = key(&params.progress_token),
            progress = params.progress,
            "MCP server progress"
        );
        let sink = self
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key(&params.progress_token))
            .cloned();
        if let Some(sink) = sink {
            sink.report(Progress {
                message: params.message.unwrap_or_default(),
                done: Some(params.progress),
                total: params.total,
            });
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

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities = ClientCapabilities::default();
        info.client_info = Implementation::new("toolhost", env!("CARGO_PKG_VERSION"));
        info
    }
}

/// One live connection to a server.
pub struct Connection {
    pub service: RunningService<RoleClient, Handler>,
    pub waiting: Waiting,
    /// A server run in a node: its container (removed with the connection)
    /// and its stderr.
    process: Option<(tokio::sync::Mutex<ContainerGuard>, Stderr)>,
    started: std::time::Instant,
    /// A call found the transport gone (the server exited, the connection
    /// broke): the next load makes a new connection.
    pub broken: std::sync::atomic::AtomicBool,
}

impl Connection {
    pub fn new(
        service: RunningService<RoleClient, Handler>,
        waiting: Waiting,
        process: Option<(ContainerGuard, Stderr)>,
    ) -> Self {
        Connection {
            service,
            waiting,
            process: process.map(|(guard, stderr)| (tokio::sync::Mutex::new(guard), stderr)),
            started: std::time::Instant::now(),
            broken: Default::default(),
        }
    }

    /// Whether calls can still go through it.
    pub fn is_usable(&self) -> bool {
        !self.broken.load(std::sync::atomic::Ordering::Acquire) && !self.service.is_closed()
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
    pub fn route(&self, token: ProgressToken, sink: ProgressSink) -> TokenGuard {
        let token = key(&token);
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.clone(), sink);
        TokenGuard(self.waiting.clone(), token)
    }
}

/// Stops routing a call's progress when dropped.
pub struct TokenGuard(Waiting, String);

impl Drop for TokenGuard {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.1);
    }
}

/// A server's call result as content; `isError` as a tool error with its
/// text.
pub fn into_content(result: CallToolResult) -> Result<Vec<Content>, CallError> {
    let mut content = Vec::new();
    let mut texts = Vec::new();
    for item in result.content {
        match item {
            ContentBlock::Text(t) => {
                texts.push(t.text.clone());
                content.push(Content::Text(t.text));
            }
            ContentBlock::Image(image) => content.push(binary(&image.mime_type, &image.data)?),
            ContentBlock::Audio(audio) => content.push(binary(&audio.mime_type, &audio.data)?),
            other => content.push(Content::Json(
                serde_json::to_value(&other).map_err(|e| CallError::Internal(e.to_string()))?,
            )),
        }
    }
    if result.is_error == Some(true) {
        let message = if texts.is_empty() {
            "the MCP server reported an error without a message".to_owned()
        } else {
            texts.join("\n")
        };
        return Err(CallError::ToolError(message));
    }
    if let Some(structured) = result.structured_content {
        // The structured result is the answer; text items that repeat it
        // (as the spec advises servers to) are dropped.
        let repeated = structured.to_string();
        content.retain(|c| !matches!(c, Content::Text(t) if serde_json::from_str::<serde_json::Value>(t).ok().map(|v| v.to_string()) == Some(repeated.clone())));
        content.insert(0, Content::Json(structured));
    }
    Ok(content)
}

fn binary(media_type: &str, data: &str) -> Result<Content, CallError> {
    let data = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| CallError::ToolError(format!("the MCP server sent invalid base64: {e}")))?;
    Ok(Content::Binary {
        media_type: media_type.to_owned(),
        data,
        name: None,
    })
}
