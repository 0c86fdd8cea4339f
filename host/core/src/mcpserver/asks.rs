//! What a mounted server asks of its client, passed to toolhost's caller.
//!
//! During a call, a server may ask for a form (`elicitation/create`), a
//! completion of the client's model (`sampling/createMessage`) or the
//! client's roots (`roots/list`). The first two go to the caller of the call
//! they belong to, through the call's [`Asker`] (MCP elicitation or sampling
//! on the caller's session, a task's `input_required`, an
//! `InputRequiredResult` or the native API's `input_required`), and the
//! caller's answer goes back to the server. Which call a question belongs to:
//! the call whose answer stream carried it (rmcp tells), else the only call in
//! flight on the connection; otherwise, and when the caller cannot answer,
//! the server gets an error that says why. (Roots are answered by the
//! connection's handler: the workspace, to a per-session server only.)

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use rmcp::service::{InboundStreamOrigin, RequestContext, RoleClient};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::routes::{Routes, key};
use crate::input::{AskError, Asker, Kind, Question};

/// The askers of the calls in flight on a connection, by the id of the
/// request toolhost sent the server for each ([`super::routes::route`]).
pub type Asking = Routes<Arc<dyn Asker>>;

/// The asker of the call a server request belongs to.
fn asker_for(
    asking: &Asking,
    context: &RequestContext<RoleClient>,
) -> Result<Arc<dyn Asker>, ErrorData> {
    let askers = asking.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(InboundStreamOrigin::OutboundRequest(id)) = context.extensions.get()
        && let Some(asker) = askers.get(&key(id))
    {
        return Ok(asker.clone());
    }
    match askers.len() {
        1 => Ok(askers.values().next().cloned().expect("one asker")),
        0 => Err(unanswerable(
            "no call in flight whose caller could answer it (toolhost passes questions on only during a call)",
        )),
        n => Err(unanswerable(&format!(
            "{n} calls are in flight and the request came on no call's stream: toolhost cannot tell whose caller to ask"
        ))),
    }
}

fn unanswerable(why: &str) -> ErrorData {
    ErrorData::new(ErrorCode::INVALID_REQUEST, format!("toolhost: {why}"), None)
}

/// Put `params` to the caller of the call it belongs to as a question of
/// `kind`, and its answer back as `A`.
pub async fn forward<P: Serialize, A: DeserializeOwned>(
    asking: &Asking,
    context: &RequestContext<RoleClient>,
    kind: Kind,
    params: &P,
) -> Result<A, ErrorData> {
    let asker = asker_for(asking, context)?;
    let params =
        serde_json::to_value(params).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    // The same question gets the same key on every run of the call (a
    // caller that answers in a second request runs it again).
    let digest = crate::backend::content_hash(params.to_string().as_bytes());
    let key = format!(
        "upstream-{}-{}",
        kind.method().replace('/', "-"),
        &digest[..12]
    );
    let answer = asker
        .ask(vec![Question { key, kind, params }])
        .await
        .map_err(|e| match e {
            AskError::Unavailable(why) => unanswerable(&format!("the caller cannot answer: {why}")),
            AskError::Invalid(why) => ErrorData::invalid_params(why, None),
            AskError::Pending => unanswerable(
                "the caller answers in a second request; this call ends here and runs again with the answer",
            ),
        })?
        .into_iter()
        .next()
        .unwrap_or(Value::Null);
    serde_json::from_value(answer.clone()).map_err(|e| {
        ErrorData::internal_error(
            format!("the caller's answer to {} is not one: {e}", kind.method()),
            Some(answer),
        )
    })
}
