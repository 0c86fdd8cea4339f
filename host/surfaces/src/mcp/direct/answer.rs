//! How a directly answered call leaves: JSON when it ends quickly, else an
//! SSE stream that starts at once; shaped as rmcp's handler shapes it.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use rmcp::model::{RequestId, ServerJsonRpcMessage, ServerResult};
use tokio_util::sync::CancellationToken;

use super::{JSON_WINDOW, KEEP_ALIVE, Link};
use toolhost_core::sessions::Session;

/// A session's call: answered with JSON if it ends within [`JSON_WINDOW`],
/// else with an SSE stream that starts at once. The call can be cancelled
/// (`notifications/cancelled`); it is dropped, and so stopped, when the
/// client goes away.
pub(super) async fn session_answer<F>(
    link: Arc<Link>,
    id: RequestId,
    session: Arc<Session>,
    call: F,
) -> Response
where
    F: Future<Output = Result<rmcp::model::CallToolResult, rmcp::ErrorData>> + Send + 'static,
{
    let token = CancellationToken::new();
    link.running
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id.clone(), token.clone());
    let guard = Running {
        link,
        id: id.clone(),
    };
    let mut call = Box::pin(async move {
        let result = tokio::select! {
            result = call => result,
            () = token.cancelled() => {
                tracing::info!(session = session.id(), "MCP: call cancelled by the client");
                Err(rmcp::ErrorData::internal_error("the call was cancelled", None))
            }
        };
        drop(guard);
        answer_of(id, result, true)
    });
    let window = tokio::time::sleep(JSON_WINDOW);
    tokio::select! {
        biased;
        message = &mut call => return json_answer(&message),
        () = window => {}
    }
    let event = futures::stream::once(async move {
        let message = call.await;
        Event::default().json_data(&message)
    });
    let first = futures::stream::once(async { Ok(Event::default().comment("call running")) });
    Sse::new(futures::StreamExt::chain(first, event))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// Takes a call off its session's running calls when it ends or is dropped.
struct Running {
    link: Arc<Link>,
    id: RequestId,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.link
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

/// The JSON-RPC answer to a call, shaped as rmcp's handler shapes it.
pub(super) fn answer_of(
    id: RequestId,
    result: Result<rmcp::model::CallToolResult, rmcp::ErrorData>,
    legacy: bool,
) -> ServerJsonRpcMessage {
    match result {
        Ok(result) => {
            let mut result = ServerResult::CallToolResult(result);
            if legacy {
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
            }
            ServerJsonRpcMessage::response(result, id)
        }
        Err(e) => ServerJsonRpcMessage::error(e, Some(id)),
    }
}

pub(super) fn json_answer(message: &ServerJsonRpcMessage) -> Response {
    // As rmcp's handler maps a stateless error: a capability the client did
    // not declare is a 400.
    let status = match message {
        ServerJsonRpcMessage::Error(e)
            if e.error.code == rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY =>
        {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::OK,
    };
    match serde_json::to_vec(message) {
        Ok(body) => (status, json_bytes(body)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "MCP: cannot serialize an answer");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// A JSON body.
pub(super) fn json_bytes(body: Vec<u8>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}
