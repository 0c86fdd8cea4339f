//! `GET /system`: seed 004's SystemInfo (the host's CPUs, memory, disk),
//! what the backends have allocated of it, and each tool's ResourceUsage.
//! Admin only: what the host has is not every caller's business.

use axum::extract::State;
use axum::{Json, Router, routing};
use serde_json::{Value, json};

use super::error::ApiError;
use crate::state::AppState;

pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/system", routing::get(system))
        .route_layer(axum::middleware::from_fn_with_state(
            state.admin_token.clone(),
            super::auth::required,
        ))
}

/// The CPU share is sampled over this long.
const CPU_WINDOW: std::time::Duration = std::time::Duration::from_millis(100);

async fn system(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let data = state.dispatcher.sessions().root().to_owned();
    let info =
        tokio::task::spawn_blocking(move || toolhost_core::system::sample(&data, CPU_WINDOW))
            .await
            .map_err(|e| ApiError::from(toolhost_core::tool::CallError::Internal(e.to_string())))?;
    let mut body = serde_json::to_value(info).unwrap_or_default();
    body["allocations"] = Value::Object(state.plugins.resources());
    let tools: Vec<Value> = state
        .dispatcher
        .catalog()
        .all_tools()
        .iter()
        .map(|t| {
            let mut usage = t.record.stats.usage();
            usage["tool_id"] = json!(t.id);
            usage["runtime"] = json!(t.toolkit.backend.name());
            usage["memory_limit_mb"] = t
                .toolkit
                .toolkit
                .own_limits()
                .remove("memory_mb")
                .unwrap_or(Value::Null);
            usage
        })
        .collect();
    body["tools"] = json!(tools);
    Ok(Json(body))
}
