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
pub mod fallback;
pub mod files;
pub mod formats;
pub mod front;
pub mod guard;
pub mod health;
pub mod made;
pub mod mcp;
pub mod native;
pub mod observe;
pub mod parked;
pub mod pins;
pub mod plugins;
pub mod render;
pub mod retrieval;
pub mod state;
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
pub use state::{ApiLimits, AppState};

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
        (*state.shutdown).clone(),
    );
    let routes = Router::new()
        .merge(mcp)
        .merge(builder)
        .merge(health::routes())
        .merge(native::routes())
        .merge(fallback::routes())
        .merge(files::routes(limits.max_upload_bytes))
        .merge(tasks::routes(state.clone()))
        .merge(system::routes(state.clone()))
        .merge(console::routes())
        .merge(plugins::routes(limits.max_upload_bytes))
        .merge(pins::routes())
        .merge(engines::routes())
        .merge(xagent::routes(limits.max_upload_bytes))
        .fallback(
            |uri: Uri| async move { ApiError::not_found(format!("no route for {}", uri.path())) },
        )
        .with_state(state);
    // The checks every request passes wrap the routing table once, as its
    // fallback: `Router::layer` on the table itself would wrap each route
    // apart, and a request would clone and box that route's whole stack
    // (`toolhost-bench invoke`, GET /health under load: 60.3k and 60.6k
    // req/s that way, 68.3k and 67.9k this way, alternating in one run).
    let router = Router::new()
        .fallback_service(routes)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(front::FrontLayer::new(front::Checks {
            guard,
            callers: callers.map(|c| (c, console::is_public as auth::IsPublic)),
            max_body_bytes,
            body_timeout: limits.body_timeout,
        }));
    observe::layer(router)
}
