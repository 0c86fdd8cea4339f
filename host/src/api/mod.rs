//! HTTP surfaces. Each is a thin adapter over [`crate::dispatch`]; the native
//! REST API is here now, the XAgent ToolServer protocol and MCP join it later.

pub mod body;
pub mod error;
pub mod native;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Uri;

use crate::dispatch::Dispatcher;
use error::ApiError;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub dispatcher: Arc<Dispatcher>,
}

/// The whole HTTP API, with a body limit of `max_body_bytes`.
pub fn router(state: AppState, max_body_bytes: usize) -> Router {
    Router::new()
        .merge(native::routes())
        .fallback(
            |uri: Uri| async move { ApiError::not_found(format!("no route for {}", uri.path())) },
        )
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}
