//! What a Store holds during one call: the WASI context, the memory limiter,
//! and the host side of the plugin's imports (log, progress, config, questions,
//! the workspace's changes).

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::toolhost::input::ask;
use super::bindings::toolhost::plugin::{host, types};
use super::bindings::toolhost::workspace::changes;
use crate::text::truncate;
use crate::tool::{Progress, ProgressSink};

/// Log records a call may write before further ones are dropped.
const LOG_BUDGET: u32 = 256;
/// Longest log record kept, bytes.
const MAX_LOG_LEN: usize = 4096;

/// Per-plugin data shared by all its calls.
pub struct PluginContext {
    pub name: String,
    pub config: BTreeMap<String, String>,
    /// Outbound HTTP the manifest grants.
    pub http: Arc<super::http::HttpPolicy>,
    /// Secrets the host adds to requests for given hosts (`[[http.auth]]`).
    pub credentials: Arc<super::http::Credentials>,
    /// Environment variables the manifest passes (name, value at load time).
    pub env: Vec<(String, String)>,
    /// The `[assets]` folder, mounted read-only, when it exists.
    pub assets: Option<std::path::PathBuf>,
    /// Prompts and resources its manifest declares.
    pub declared: crate::declared::Declared,
}

pub struct CallState {
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub limiter: MemoryLimiter,
    pub plugin: Arc<PluginContext>,
    pub tool: String,
    pub session: String,
    pub progress: Option<ProgressSink>,
    /// The session whose log listeners (its MCP clients) hear the call.
    pub logs: Option<Arc<crate::sessions::Session>>,
    /// Who answers the tool's questions (`toolhost:input/ask`).
    pub ask: Option<Arc<dyn crate::input::Asker>>,
    /// The session whose workspace the call sees (`toolhost:workspace`).
    pub workspace: Option<Arc<crate::sessions::Session>>,
    http: WasiHttpCtx,
    http_hooks: super::http::PolicyHooks,
    log_budget: u32,
}

impl CallState {
    pub fn new(
        wasi: WasiCtx,
        memory_bytes: usize,
        plugin: Arc<PluginContext>,
        tool: String,
        session: String,
        progress: Option<ProgressSink>,
    ) -> Self {
        let http_hooks = super::http::PolicyHooks {
            policy: plugin.http.clone(),
            credentials: plugin.credentials.clone(),
            plugin: plugin.name.clone(),
            tool: tool.clone(),
        };
        CallState {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(memory_bytes),
            plugin,
            tool,
            session,
            progress,
            logs: None,
            ask: None,
            workspace: None,
            http: WasiHttpCtx::new(),
            http_hooks,
            log_budget: LOG_BUDGET,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps the total linear memory of one instance and remembers a refusal, so a
/// trap that follows is reported as `out_of_memory`.
pub struct MemoryLimiter {
    max_bytes: usize,
    used: usize,
    pub denied: bool,
    pub peak: usize,
}

impl MemoryLimiter {
    pub fn new(max_bytes: usize) -> Self {
        MemoryLimiter {
            max_bytes,
            used: 0,
            denied: false,
            peak: 0,
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let next = self.used.saturating_add(desired.saturating_sub(current));
        if next > self.max_bytes {
            self.denied = true;
            return Ok(false);
        }
        self.used = next;
        self.peak = self.peak.max(next);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

impl types::Host for CallState {}

impl host::Host for CallState {
    fn log(&mut self, level: types::LogLevel, message: String) {
        if self.log_budget == 0 {
            return;
        }
        self.log_budget -= 1;
        let message = truncate(&message, MAX_LOG_LEN);
        let (plugin, tool, session) = (&self.plugin.name, &self.tool, &self.session);
        use types::LogLevel as L;
        match level {
            L::Trace => tracing::trace!(target: "plugin", plugin, tool, session, "{message}"),
            L::Debug => tracing::debug!(target: "plugin", plugin, tool, session, "{message}"),
            L::Info => tracing::info!(target: "plugin", plugin, tool, session, "{message}"),
            L::Warn => tracing::warn!(target: "plugin", plugin, tool, session, "{message}"),
            L::Error => tracing::error!(target: "plugin", plugin, tool, session, "{message}"),
        }
        if let Some(session) = self.logs.as_ref().filter(|s| s.logs_heard()) {
            let level = match level {
                L::Trace => tracing::Level::TRACE,
                L::Debug => tracing::Level::DEBUG,
                L::Info => tracing::Level::INFO,
                L::Warn => tracing::Level::WARN,
                L::Error => tracing::Level::ERROR,
            };
            session.log(crate::sessions::LogRecord {
                level,
                logger: format!("{plugin}/{tool}"),
                message: message.to_owned(),
            });
        }
    }

    fn report_progress(&mut self, update: types::Progress) {
        if let Some(sink) = &self.progress {
            sink.report(Progress {
                message: truncate(&update.message, MAX_LOG_LEN).to_owned(),
                done: update.done,
                total: update.total,
            });
        }
    }

    fn config(&mut self, key: String) -> Option<String> {
        self.plugin.config.get(&key).cloned()
    }
}

impl super::bindings::toolhost::input::ask::Host for CallState {
    async fn ask(
        &mut self,
        questions: Vec<ask::Question>,
    ) -> wasmtime::Result<Result<Vec<String>, ask::AskError>> {
        use crate::input::{AskError, Kind, Question};
        let mut asked = Vec::with_capacity(questions.len());
        for q in questions {
            let params = match serde_json::from_str(&q.params) {
                Ok(p) => p,
                Err(e) => {
                    return Ok(Err(ask::AskError::Invalid(format!(
                        "`{}`: params: {e}",
                        q.key
                    ))));
                }
            };
            let kind = match q.kind {
                ask::Kind::Form => Kind::Form,
                ask::Kind::Sampling => Kind::Sampling,
                ask::Kind::Roots => Kind::Roots,
            };
            asked.push(Question {
                key: q.key,
                kind,
                params,
            });
        }
        let Some(asker) = self.ask.clone() else {
            return Ok(Err(ask::AskError::Unavailable(
                "no input available: this caller cannot answer questions".into(),
            )));
        };
        Ok(match asker.ask(asked).await {
            Ok(answers) => Ok(answers.iter().map(|a| a.to_string()).collect()),
            Err(AskError::Invalid(m)) => Err(ask::AskError::Invalid(m)),
            Err(e @ AskError::Unavailable(_)) => Err(ask::AskError::Unavailable(e.to_string())),
            // The caller answers in a second request: the call ends here, a
            // trap the tool never sees past (the surface reads the questions
            // from its asker).
            Err(AskError::Pending) => return Err(wasmtime::Error::msg(PENDING)),
        })
    }
}

impl changes::Host for CallState {
    async fn token(&mut self) -> Option<String> {
        self.workspace.as_ref()?.workspace_token().await
    }
}

/// Why a call was ended for a second request (a trap): the surface answers
/// `input_required` instead.
pub const PENDING: &str = "input required: the caller answers in a second request";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_counts_all_memories_and_remembers_refusal() {
        let mut l = MemoryLimiter::new(100);
        assert!(l.memory_growing(0, 60, None).unwrap());
        assert!(l.memory_growing(0, 30, None).unwrap());
        assert!(!l.denied);
        assert!(!l.memory_growing(30, 50, None).unwrap());
        assert!(l.denied);
        assert_eq!(l.peak, 90);
    }
}
