//! The admin's view of pinned tool definitions ([`toolhost_core::pins`]):
//!
//! - `GET /plugins/{name}/changes`: the definitions of toolkit `name` held
//!   in `staging` because they differ from the pinned ones (or are new),
//!   each with the pinned definition beside the new one;
//! - `POST /plugins/{name}/changes/approve` (`{"tools": [ids]}`, or `{}`
//!   for all): pin and serve them.
//!
//! Both need the admin token (or an admin caller).

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::{Json, Router, routing};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth;
use super::body::JsonBody;
use super::error::ApiError;
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/plugins/{name}/changes", routing::get(changes))
        .route("/plugins/{name}/changes/approve", routing::post(approve))
}

fn known(state: &AppState, name: &str) -> Result<(), ApiError> {
    match state.plugins.get(name) {
        Some(_) => Ok(()),
        None => Err(ApiError::not_found(format!("no plugin `{name}`"))),
    }
}

async fn changes(
    State(state): State<AppState>,
    auth::Who(who): auth::Who,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    auth::check(state.admin_token.as_ref(), &headers, &who)?;
    known(&state, &name)?;
    let catalog = state.dispatcher.catalog();
    let (mode, changes) = match catalog.pins() {
        Some(pins) => (json!(pins.mode()), pins.changes(Some(&name))),
        None => (json!("off"), Vec::new()),
    };
    Ok(Json(
        json!({"plugin": name, "mode": mode, "changes": changes}),
    ))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Approve {
    #[serde(default)]
    tools: Option<Vec<String>>,
}

async fn approve(
    State(state): State<AppState>,
    auth::Who(who): auth::Who,
    headers: HeaderMap,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<Approve>,
) -> Result<Json<Value>, ApiError> {
    auth::check(state.admin_token.as_ref(), &headers, &who)?;
    known(&state, &name)?;
    let catalog = state.dispatcher.catalog();
    let approved = catalog.approve(&name, body.tools.as_deref());
    let args = json!({"plugin": name, "tools": approved});
    // On disk before it is answered, as a status change is: a restart right
    // after must not hold the approved definitions again.
    if let Some(registry) = catalog.registry()
        && let Err(e) = registry.sync().await
    {
        let message = format!("the approval is not saved: {e}; try again");
        return Err(state.unsaved(who.name(), "approve_definitions", args, &e, message));
    }
    state.audit(who.name(), "approve_definitions", args, "ok");
    Ok(Json(json!({"plugin": name, "approved": approved})))
}
