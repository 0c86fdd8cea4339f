//! The small core every layer shares: tool descriptors, content (its model
//! is [`crate::content`], re-exported here), limits and the error of a call.
//! Backends produce these; the API surfaces render them.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::content::{
    Annotated, Content, EmbeddedResource, ResourceLink, binary_file_name, extension_of,
};

/// A future returned by a backend, or by whoever answers a call's questions.
pub type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'static>>;

/// Longest tool id: OpenAI function names allow 64 characters.
pub const MAX_TOOL_ID_LEN: usize = 64;

/// True for a valid tool id: `^[a-zA-Z0-9_-]{1,64}$` (an OpenAI function name).
pub fn is_valid_tool_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_TOOL_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// True for a valid plugin (toolkit) name: `^[a-z][a-z0-9-]*$`, at most 48 bytes.
pub fn is_valid_plugin_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z'))
        && name.len() <= 48
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The id agents see for tool `tool` of plugin `plugin`.
pub fn tool_id(plugin: &str, tool: &str) -> String {
    format!("{plugin}_{tool}")
}

/// The toolkit (plugin) part of tool id `id`: plugin names hold no `_`, so
/// it is everything before the first one.
pub fn toolkit_of(id: &str) -> &str {
    id.split_once('_').map_or(id, |(kit, _)| kit)
}

/// A tool as a backend describes it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolDescriptor {
    /// Name within its toolkit.
    pub name: String,
    pub description: String,
    /// JSON Schema of the input (an object).
    pub input_schema: Value,
    /// JSON Schema of a JSON result, when known.
    pub output_schema: Option<Value>,
    /// For a tool whose JSON result can say `"finished": false`: the tool (of
    /// the same toolkit) that continues it. Protocols with a retry contract
    /// (XAgent's 450 `next_calling`) use it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continue_with: Option<String>,
    /// What its source says about it for clients beside the schema.
    #[serde(default)]
    pub hints: ToolHints,
}

/// What a tool's source says about it for clients, beside its schema (an
/// MCP server's `title`, `annotations` and `_meta` for each tool), passed on
/// as it came.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolHints {
    /// A display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// MCP tool annotations (`readOnlyHint`, `destructiveHint`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// The source's `_meta` of the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// The limits every toolkit has, whatever its backend, and that dispatch
/// enforces: the wall clock, calls at once, the queue behind them, the size
/// of a result. What a backend enforces itself (a wasm sandbox's fuel and
/// memory, a node's memory and CPUs) lives with that backend and shows in
/// admin views through [`crate::backend::Toolkit::own_limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock limit per call, milliseconds.
    pub timeout_ms: u64,
    /// Calls of this toolkit running at once; further calls wait in a queue.
    pub max_concurrency: u32,
    /// Calls waiting for a slot beyond which new calls are refused (`overloaded`).
    pub max_queue: u32,
    /// Largest result, KiB.
    pub max_output_kb: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_ms: 10_000,
            max_concurrency: 16,
            max_queue: 64,
            max_output_kb: 1024,
        }
    }
}

/// What a caller may ask to lower for one call (a call can never raise a
/// limit): the common ones, which dispatch applies, and the sandbox's
/// (`fuel`, `memory_mb`), which the backend that has them applies.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    pub fuel: Option<u64>,
    pub memory_mb: Option<u32>,
    pub timeout_ms: Option<u64>,
    pub max_output_kb: Option<u32>,
}

impl Limits {
    /// These limits lowered by `o` where it asks for less.
    pub fn lowered_by(mut self, o: &LimitOverrides) -> Limits {
        if let Some(t) = o.timeout_ms {
            self.timeout_ms = self.timeout_ms.min(t);
        }
        if let Some(k) = o.max_output_kb {
            self.max_output_kb = self.max_output_kb.min(k);
        }
        self
    }

    pub fn max_output_bytes(&self) -> usize {
        self.max_output_kb as usize * 1024
    }

    /// The limits as admin views show them: these and the backend's own
    /// (`own`, by name) in one object.
    pub fn view(&self, own: serde_json::Map<String, Value>) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Value::Object(m) = &mut v {
            m.extend(own);
        }
        v
    }
}

/// A progress report of a running call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    pub message: String,
    pub done: Option<f64>,
    pub total: Option<f64>,
}

/// Progress reports a call may have waiting for its reader; beyond them new
/// reports are dropped (counted), so a slow reader costs progress events,
/// never memory, and never blocks the call.
pub const PROGRESS_BUFFER: usize = 64;

/// Where a call's progress reports go, when its caller streams: a bounded
/// buffer (see [`PROGRESS_BUFFER`]).
#[derive(Debug, Clone)]
pub struct ProgressSink {
    tx: tokio::sync::mpsc::Sender<Progress>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicU64>,
    reported: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl ProgressSink {
    /// A sink and the receiver of its reports.
    pub fn channel() -> (ProgressSink, tokio::sync::mpsc::Receiver<Progress>) {
        let (tx, rx) = tokio::sync::mpsc::channel(PROGRESS_BUFFER);
        (
            ProgressSink {
                tx,
                dropped: Default::default(),
                reported: Default::default(),
            },
            rx,
        )
    }

    /// Pass `progress` on if there is room; never waits.
    pub fn report(&self, progress: Progress) {
        self.reported
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.tx.try_send(progress).is_err() {
            self.dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Reports made so far (passed on or dropped).
    pub fn reported(&self) -> u64 {
        self.reported.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Reports dropped because the reader was behind (or gone).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Why a call produced no result. Each variant is one `kind` on the wire.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error("unknown tool `{0}`")]
    NotFound(String),
    /// Bad input: schema mismatch or the tool's own invalid-input error.
    #[error("{message}")]
    InvalidInput {
        message: String,
        details: Vec<String>,
    },
    /// The tool ran and failed.
    #[error("{0}")]
    ToolError(String),
    /// The tool ran and answered with an error result of its own (an MCP
    /// server's `isError`): its items, which an MCP caller gets unchanged;
    /// other callers read their text. Its kind is `tool_error`.
    #[error("{}", reported_message(.0))]
    Reported(Vec<Content>),
    #[error("the call ran out of fuel (limit {limit} units)")]
    OutOfFuel { limit: u64 },
    #[error("the call exceeded its memory limit of {limit_mb} MiB")]
    OutOfMemory { limit_mb: u32 },
    #[error("the call exceeded its time limit of {limit_ms} ms")]
    Timeout { limit_ms: u64 },
    /// The sandbox trapped (panic, stack overflow, out-of-bounds access ...).
    #[error("the plugin trapped: {0}")]
    Trap(String),
    #[error("the result is {size} bytes, over the limit of {limit} bytes")]
    OutputTooLarge { size: usize, limit: usize },
    /// No capacity now; retry later.
    #[error("{0}")]
    Overloaded(String),
    /// The backend that runs the tool is not available (the Docker engine is
    /// down, the node image is missing ...); retry when it is back.
    #[error("{0}")]
    BackendUnavailable(String),
    /// The call's Docker node was lost with its engine (dead, unreachable):
    /// the session's next call gets a fresh node on a live engine.
    #[error("{0}")]
    NodeLost(String),
    /// The caller's policy does not let it call this tool (the rule is in
    /// the server's log, not here).
    #[error("{0}")]
    Forbidden(String),
    /// The tool is not in service (`staging`, `inactive`, `building`).
    #[error("{}", not_active_message(tool, status))]
    NotActive { tool: String, status: &'static str },
    /// The host itself failed (not the tool, not the caller).
    #[error("internal error: {0}")]
    Internal(String),
}

/// The text of a [`CallError::Reported`] result: its text items, a line each.
fn reported_message(items: &[Content]) -> String {
    let texts: Vec<&str> = items
        .iter()
        .filter_map(|c| match c.plain() {
            Content::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    if texts.is_empty() {
        "the tool reported an error without a message".to_owned()
    } else {
        texts.join("\n")
    }
}

fn not_active_message(tool: &str, status: &str) -> String {
    match status {
        "inactive" => format!(
            "tool `{tool}` is inactive: an admin can activate it (PUT /tools/{tool}/status)"
        ),
        "staging" => {
            format!("tool `{tool}` is staging (being tested): it is served once active")
        }
        _ => format!("tool `{tool}` is {status}: it is not served yet"),
    }
}

impl CallError {
    pub fn invalid_input(message: impl Into<String>) -> Self {
        CallError::InvalidInput {
            message: message.into(),
            details: Vec::new(),
        }
    }

    /// The stable name of this error on every API surface.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CallError::NotFound(_) => ErrorKind::NotFound,
            CallError::InvalidInput { .. } => ErrorKind::InvalidInput,
            CallError::ToolError(_) | CallError::Reported(_) => ErrorKind::ToolError,
            CallError::OutOfFuel { .. } => ErrorKind::OutOfFuel,
            CallError::OutOfMemory { .. } => ErrorKind::OutOfMemory,
            CallError::Timeout { .. } => ErrorKind::Timeout,
            CallError::Trap(_) => ErrorKind::Trap,
            CallError::OutputTooLarge { .. } => ErrorKind::OutputTooLarge,
            CallError::Overloaded(_) => ErrorKind::Overloaded,
            CallError::BackendUnavailable(_) => ErrorKind::BackendUnavailable,
            CallError::NodeLost(_) => ErrorKind::NodeLost,
            CallError::NotActive { .. } => ErrorKind::NotActive,
            CallError::Forbidden(_) => ErrorKind::Forbidden,
            CallError::Internal(_) => ErrorKind::Internal,
        }
    }
}

/// The `kind` of an error as clients see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    NotFound,
    InvalidInput,
    ToolError,
    OutOfFuel,
    OutOfMemory,
    Timeout,
    Trap,
    OutputTooLarge,
    Overloaded,
    BackendUnavailable,
    NodeLost,
    NotActive,
    Forbidden,
    Internal,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::ToolError => "tool_error",
            ErrorKind::OutOfFuel => "out_of_fuel",
            ErrorKind::OutOfMemory => "out_of_memory",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Trap => "trap",
            ErrorKind::OutputTooLarge => "output_too_large",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::BackendUnavailable => "backend_unavailable",
            ErrorKind::NodeLost => "node_lost",
            ErrorKind::NotActive => "not_active",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::Internal => "internal",
        }
    }

    /// The HTTP status a call ending with this kind is answered with: the
    /// error model's table, rendered by the native API (`ApiError`) and the
    /// builder tools. XAgent's `/execute_tool` keeps a table of its own
    /// (`xagent::tools`: an overload there is 503, a timeout 500).
    pub fn status(self) -> u16 {
        match self {
            ErrorKind::NotFound => 404,
            ErrorKind::InvalidInput => 422,
            ErrorKind::Timeout => 504,
            ErrorKind::Overloaded => 429,
            ErrorKind::BackendUnavailable | ErrorKind::NodeLost => 503,
            ErrorKind::NotActive => 409,
            ErrorKind::Forbidden => 403,
            ErrorKind::ToolError
            | ErrorKind::OutOfFuel
            | ErrorKind::OutOfMemory
            | ErrorKind::Trap
            | ErrorKind::OutputTooLarge
            | ErrorKind::Internal => 500,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_ids_are_openai_function_names() {
        assert!(is_valid_tool_id("calc_evaluate"));
        assert!(is_valid_tool_id("a-b_C9"));
        assert!(!is_valid_tool_id(""));
        assert!(!is_valid_tool_id("files.read"));
        assert!(!is_valid_tool_id("../x"));
        assert!(!is_valid_tool_id(&"a".repeat(65)));
        assert!(is_valid_tool_id(&"a".repeat(64)));
    }

    #[test]
    fn plugin_names() {
        assert!(is_valid_plugin_name("files"));
        assert!(is_valid_plugin_name("my-plugin2"));
        assert!(!is_valid_plugin_name("2fast"));
        assert!(!is_valid_plugin_name("Files"));
        assert!(!is_valid_plugin_name("a_b"));
        assert!(!is_valid_plugin_name("a/b"));
        assert!(!is_valid_plugin_name(""));
    }

    #[test]
    fn every_binary_item_has_a_file_name() {
        assert_eq!(
            binary_file_name("image/png", b"x", Some("plot.png")),
            "plot.png"
        );
        let made = binary_file_name("image/png", b"x", None);
        assert!(made.ends_with(".png") && made.len() == 16, "{made}");
        assert_eq!(made, binary_file_name("image/png", b"x", Some("")));
        assert_ne!(made, binary_file_name("image/png", b"y", None));
        assert!(binary_file_name("application/x-unknown", b"", None).ends_with(".bin"));
        assert_eq!(extension_of("Text/Plain; charset=utf-8"), "txt");
    }

    #[tokio::test]
    async fn a_slow_progress_reader_loses_reports_not_memory() {
        let (sink, mut rx) = ProgressSink::channel();
        let p = Progress {
            message: "m".into(),
            done: None,
            total: None,
        };
        for _ in 0..PROGRESS_BUFFER * 3 {
            sink.report(p.clone());
        }
        assert_eq!(sink.dropped(), 2 * PROGRESS_BUFFER as u64);
        assert_eq!(rx.recv().await, Some(p.clone()));
        sink.report(p);
        drop(sink);
        let mut n = 1;
        while rx.recv().await.is_some() {
            n += 1;
        }
        assert_eq!(n, PROGRESS_BUFFER + 1, "room again after a read");
    }

    #[test]
    fn overrides_only_lower_limits() {
        let base = Limits::default();
        let o = LimitOverrides {
            max_output_kb: Some(10),
            timeout_ms: Some(u64::MAX),
            ..Default::default()
        };
        let l = base.lowered_by(&o);
        assert_eq!(l.max_output_kb, 10);
        assert_eq!(l.timeout_ms, base.timeout_ms);
        assert_eq!(l.max_queue, base.max_queue);
    }
}
