//! What every handler can reach, and the request size limits.

use std::sync::Arc;

use toolhost_core::dispatch::Dispatcher;
use toolhost_core::plugins::PluginManager;

use crate::auth::AdminToken;
use crate::parked::Parked;
use crate::retrieval;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub dispatcher: Arc<Dispatcher>,
    pub plugins: Arc<PluginManager>,
    /// Unset: the admin routes are refused.
    pub admin_token: Option<AdminToken>,
    /// Every caller a token names (the anonymous one on a server without
    /// tokens): their usage, for `/metrics` and `GET /callers`.
    pub callers: Arc<Vec<toolhost_core::callers::Caller>>,
    /// The caller check, when tokens are configured: the OAuth callers seen.
    pub auth: Option<Arc<crate::auth::CallerAuth>>,
    pub limits: ApiLimits,
    /// Tool retrieval index (XAgent's `/retrieving_tools`).
    pub retriever: Arc<retrieval::Retriever>,
    /// Coding agents' build environments (the builder tools).
    pub builders: Arc<toolhost_core::builder::Builders>,
    /// Tool requests and their build worker's tasks.
    pub tasks: Arc<toolhost_core::tasks::Tasks>,
    /// Seed 004's messages (`GET /events`).
    pub events: Arc<toolhost_core::events::Events>,
    /// Each tool's health (`GET /tools/{id}`).
    pub health: Arc<toolhost_core::health::Health>,
    /// Where tasks' `callback_url`s may point.
    pub callbacks: Arc<toolhost_core::tasks::build::Callbacks>,
    /// XAgent calls still running after the surface's patience.
    pub parked: Arc<Parked>,
    /// Cancelled when the server shuts down: long-lived streams (MCP) end.
    /// Behind an `Arc`: the state is cloned for every request, and cloning
    /// or dropping a token itself takes a lock its clones share.
    pub shutdown: Arc<tokio_util::sync::CancellationToken>,
}

impl AppState {
    /// Add `action` by `who` to the audit log, in the registry (so every
    /// replica's on a shared database): written with the next commit, never
    /// waited for. Also a `toolhost::audit` log line.
    pub fn audit(&self, who: &str, action: &str, args: serde_json::Value, outcome: &str) {
        tracing::info!(target: "toolhost::audit", caller = who, action, %args, outcome, "admin action");
        if let Some(registry) = self.dispatcher.catalog().registry() {
            registry.audit(who, action, args, outcome);
        }
    }

    /// An admin change the registry could not save (`error`): audited as
    /// refused, and answered 503 `registry_unavailable` with `message`.
    pub fn unsaved(
        &self,
        who: &str,
        action: &str,
        args: serde_json::Value,
        error: &dyn std::fmt::Display,
        message: String,
    ) -> crate::error::ApiError {
        self.audit(who, action, args, &format!("503: {error}"));
        crate::error::ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "registry_unavailable",
            message,
        )
    }
}

/// Request size limits.
#[derive(Debug, Clone, Copy)]
pub struct ApiLimits {
    /// Any JSON request body.
    pub max_body_bytes: usize,
    /// A component uploaded to `PUT /plugins/{name}`.
    pub max_upload_bytes: usize,
    /// Time for a whole request body to arrive.
    pub body_timeout: std::time::Duration,
    /// MCP sessions open at once (`[sessions] max_mcp_sessions`).
    pub max_mcp_sessions: usize,
    /// How long an MCP session that never finished its handshake lives
    /// (`[sessions] mcp_unfinished_timeout_s`).
    pub mcp_unfinished_timeout: std::time::Duration,
}
