//! The Docker engines of the node pool (`[[docker.engines]]`).
//!
//! - `GET /engines`: each engine's health, drain, capacity, nodes and
//!   sessions (also under `engines` in `GET /plugins`).
//! - `POST /engines/{name}/drain` (admin): no new session goes to the
//!   engine; sessions already there carry on until they close.
//!   `DELETE /engines/{name}/drain` (admin) undoes it.
//!
//! The backend reaches the handlers as a request extension (the server adds
//! it), so a router without the Docker backend answers with no engines.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::{Extension, Json, Router, routing};
use serde_json::{Value, json};

use super::auth;
use super::error::ApiError;
use crate::state::AppState;
use toolhost_core::nodes::NodeBackend;

/// The Docker backend, if the server has one.
#[derive(Clone, Default)]
pub struct Engines(pub Option<Arc<NodeBackend>>);

impl Engines {
    /// Every engine as JSON (empty without the Docker backend).
    pub fn list(&self) -> Value {
        json!(self.0.as_ref().map(|d| d.engines()).unwrap_or_default())
    }
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/engines", routing::get(list)).route(
        "/engines/{name}/drain",
        routing::post(drain).delete(undrain),
    )
}

async fn list(engines: Option<Extension<Engines>>) -> Json<Value> {
    let engines = engines.map(|e| e.0).unwrap_or_default();
    Json(json!({ "engines": engines.list() }))
}

async fn drain(
    state: State<AppState>,
    engines: Option<Extension<Engines>>,
    who: auth::Who,
    headers: HeaderMap,
    name: Path<String>,
) -> Result<Json<Value>, ApiError> {
    set(state, engines, (who, headers), name, true)
}

async fn undrain(
    state: State<AppState>,
    engines: Option<Extension<Engines>>,
    who: auth::Who,
    headers: HeaderMap,
    name: Path<String>,
) -> Result<Json<Value>, ApiError> {
    set(state, engines, (who, headers), name, false)
}

fn set(
    State(state): State<AppState>,
    engines: Option<Extension<Engines>>,
    (auth::Who(who), headers): (auth::Who, HeaderMap),
    Path(name): Path<String>,
    drained: bool,
) -> Result<Json<Value>, ApiError> {
    auth::check(state.admin_token.as_ref(), &headers, &who)?;
    let docker = engines.and_then(|e| e.0.0);
    let action = if drained {
        "drain_engine"
    } else {
        "undrain_engine"
    };
    let view = docker.and_then(|d| d.drain(&name, drained));
    let outcome = if view.is_some() {
        "ok"
    } else {
        "404: no such engine"
    };
    state.audit(who.name(), action, json!({"engine": name}), outcome);
    view.map(|view| Json(json!(view)))
        .ok_or_else(|| ApiError::not_found(format!("no Docker engine `{name}`")))
}
