//! `GET /health` (liveness), `GET /health/ready` (readiness: no plugin
//! compiling) and `GET /metrics` (Prometheus text).

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json, Router, routing};
use serde_json::{Value, json};

use super::error::ApiError;
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/health", routing::get(health))
        .route("/health/ready", routing::get(ready))
        .route("/metrics", routing::get(metrics))
}

async fn health() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness: 200 once no plugin of the directory is compiling, 503 (with
/// `Retry-After`) while some are, naming them with their progress. Plugins
/// that failed are listed but do not hold readiness back (they will not get
/// ready by waiting). With caller tokens, a request without a token (a
/// probe: Kubernetes' probes cannot send a secret) gets the status code and
/// `{"ready": …}` alone; the plugins' names need a token.
async fn ready(
    State(state): State<AppState>,
    anonymous: Option<Extension<super::auth::Anonymous>>,
) -> Response {
    let statuses = state.plugins.list();
    let compiling: Vec<Value> = statuses
        .iter()
        .filter(|s| s.state == toolhost_core::plugins::State::Compiling)
        .map(|s| json!({"name": s.name, "progress": s.progress}))
        .collect();
    let failed: Vec<&str> = statuses
        .iter()
        .filter(|s| s.state == toolhost_core::plugins::State::Failed)
        .map(|s| s.name.as_str())
        .collect();
    let ready = compiling.is_empty();
    let body = Json(if anonymous.is_some() {
        json!({"ready": ready})
    } else {
        json!({
            "ready": ready,
            "compiling": compiling,
            "failed": failed,
            "tools": state.dispatcher.catalog().tools().len(),
        })
    });
    if ready {
        body.into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, HeaderValue::from_static("1"))],
            body,
        )
            .into_response()
    }
}

/// Prometheus text exposition (see [`toolhost_core::metrics`]).
async fn metrics(State(state): State<AppState>) -> Response {
    if !state.dispatcher.metrics().is_enabled() {
        return ApiError::not_found("metrics are off ([server] metrics = false)").into_response();
    }
    state.plugins.observe(state.dispatcher.metrics());
    state.dispatcher.metrics().observe_callers(&state.callers);
    let mut text = state.dispatcher.metrics().render();
    let d = state.events.delivery();
    text.push_str(
        "# HELP toolhost_event_callbacks_total Seed 004 messages sent to [events] callback_url, by outcome (dropped: more than 1000 waited).\n\
         # TYPE toolhost_event_callbacks_total counter\n",
    );
    for (outcome, n) in [
        ("delivered", d.delivered),
        ("failed", d.failed),
        ("dropped", d.dropped),
    ] {
        text.push_str(&format!(
            "toolhost_event_callbacks_total{{outcome=\"{outcome}\"}} {n}\n"
        ));
    }
    toolhost_core::telemetry::render_metrics(&mut text);
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        text,
    )
        .into_response()
}
