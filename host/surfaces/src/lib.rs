//! HTTP surfaces. Each is a thin adapter over [`toolhost_core::dispatch`]: the native
//! REST API, the plugin admin routes, the XAgent ToolServer protocol and MCP.

pub mod auth;
pub mod body;
pub mod builder;
pub mod config;
pub mod conns;
pub mod console;
pub mod engines;
pub mod error;
pub mod formats;
pub mod guard;
pub mod mcp;
pub mod native;
pub mod observe;
pub mod plugins;
pub mod render;
pub mod retrieval;
pub mod system;
pub mod tasks;
pub mod workspace;
pub mod xagent;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Uri;

pub use auth::AdminToken;
use error::ApiError;
use toolhost_core::dispatch::Dispatcher;
use toolhost_core::plugins::PluginManager;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub dispatcher: Arc<Dispatcher>,
    pub plugins: Arc<PluginManager>,
    /// Unset: the admin routes are refused.
    pub admin_token: Option<AdminToken>,
    pub limits: ApiLimits,
    /// Tool retrieval index (XAgent's `/retrieving_tools`).
    pub retriever: Arc<retrieval::Retriever>,
    /// Coding agents' build environments (the builder tools).
    pub builders: Arc<toolhost_core::builder::Builders>,
    /// Tool requests and their build worker's tasks.
    pub tasks: Arc<toolhost_core::tasks::Tasks>,
    /// Where tasks' `callback_url`s may point.
    pub callbacks: Arc<toolhost_core::tasks::build::Callbacks>,
    /// XAgent calls still running after the surface's patience.
    pub parked: Arc<xagent::Parked>,
    /// Cancelled when the server shuts down: long-lived streams (MCP) end.
    pub shutdown: tokio_util::sync::CancellationToken,
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

/// The whole HTTP API. `guard`: the `Host` names and `Origin`s every route
/// answers (browser safety, [`guard`]). `callers`: the caller tokens every
/// route but `/health` requires, if any.
pub fn router(
    state: AppState,
    limits: ApiLimits,
    guard: guard::Guard,
    callers: Option<Arc<auth::CallerAuth>>,
) -> Router {
    let max_body_bytes = limits.max_body_bytes;
    let mcp_allowed_hosts = guard.hosts();
    let builder = builder::routes(state.clone(), mcp_allowed_hosts.clone());
    let mcp = mcp::router(
        state.clone(),
        max_body_bytes,
        mcp_allowed_hosts,
        state.shutdown.clone(),
    );
    let router = Router::new()
        .merge(mcp)
        .merge(builder)
        .merge(native::routes())
        .merge(tasks::routes(state.clone()))
        .merge(system::routes(state.clone()))
        .merge(console::routes())
        .merge(plugins::routes(limits.max_upload_bytes))
        .merge(engines::routes())
        .merge(xagent::routes(limits.max_upload_bytes))
        .fallback(
            |uri: Uri| async move { ApiError::not_found(format!("no route for {}", uri.path())) },
        )
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            max_body_bytes,
            body::declared_size,
        ))
        .layer(axum::middleware::from_fn_with_state(
            limits.body_timeout,
            body::body_deadline,
        ))
        .with_state(state);
    let router = match callers {
        Some(callers) => router.layer(axum::middleware::from_fn_with_state(
            (callers, console::is_public as auth::IsPublic),
            auth::require_token,
        )),
        None => router,
    };
    // Outside authentication: a refused page learns nothing more, and a
    // listed origin's preflight (which carries no token) is answered.
    let router = router.layer(axum::middleware::from_fn_with_state(
        Arc::new(guard),
        guard::check,
    ));
    // Outside the shared layers, so their errors get XAgent's shape too.
    let router = router.layer(axum::middleware::from_fn(xagent::detail_errors));
    // Every refusal, whichever layer made it, in the audit log.
    let router = router.layer(axum::middleware::from_fn(observe::refusals));
    observe::layer(router)
}
