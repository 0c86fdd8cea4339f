//! `PUT /tools/{id}/fallback` (admin token): a tool's fallbacks (seed
//! 004's `fallback_strategy`) set through the registry, over its
//! manifest's: `{"fallback_strategy": ["other_tool", ...]}`, `[]` for none,
//! `null` for its manifest's again. Each must be a tool now, not the tool
//! itself, and take its input (else 422, named); saved before the answer,
//! followed by every replica, audited. `GET /tools/{id}` shows the list in
//! force as `fallback_strategy`.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::{Json, Router, routing};
use serde::Deserialize;
use serde_json::{Value, json};

use super::body::JsonBody;
use super::error::ApiError;
use crate::auth::Who;
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().route("/tools/{id}/fallback", routing::put(set_fallback))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FallbackChange {
    fallback_strategy: Option<Vec<String>>,
}

async fn set_fallback(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Who(who): Who,
    headers: HeaderMap,
    JsonBody(change): JsonBody<FallbackChange>,
) -> Result<Json<Value>, ApiError> {
    super::auth::check(state.admin_token.as_ref(), &headers, &who)?;
    let dispatcher = &state.dispatcher;
    if dispatcher.catalog().get(&id).is_none() {
        return Err(ApiError::not_found(format!("unknown tool `{id}`")));
    }
    let args = json!({"tool_id": id, "fallback_strategy": change.fallback_strategy});
    if let Some(list) = &change.fallback_strategy
        && let Err(why) = dispatcher.check_fallbacks(&id, list)
    {
        state.audit(who.name(), "set_fallback", args, &format!("422: {why}"));
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            why,
        ));
    }
    let catalog = dispatcher.catalog();
    catalog.set_fallback(&id, change.fallback_strategy);
    if let Some(registry) = catalog.registry()
        && let Err(e) = registry.sync().await
    {
        let message = format!("the fallbacks of `{id}` are not saved: {e}; try again");
        return Err(state.unsaved(who.name(), "set_fallback", args, &e, message));
    }
    state.audit(who.name(), "set_fallback", args, "ok");
    Ok(Json(json!({
        "tool_id": id,
        "fallback_strategy": dispatcher.fallbacks_of(&id),
    })))
}
