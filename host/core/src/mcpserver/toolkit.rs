//! An MCP server's tools as the catalog sees them: a call forwarded as
//! `tools/call` on the toolkit's (or the session's) connection, its progress
//! routed, cancelled on the server when it ends early.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId,
    ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};

use super::client::{self, Connection};
use super::{McpBackend, PROGRESS_GRACE};
use crate::backend::Refresh;
use crate::backend::{Invocation, Toolkit};
use crate::tool::BoxFuture;
use crate::tool::{CallError, Content};

/// An MCP server's tools as the catalog sees them.
pub(super) struct McpToolkit {
    /// The toolkit's own connection (its tools listed there; its calls,
    /// unless each session has a server of its own).
    pub(super) conn: Arc<Connection>,
    /// Each session's own server: how to start it.
    pub(super) per_session: Option<(
        std::sync::Weak<McpBackend>,
        crate::nodes::stdio::StdioSpec,
        u64,
    )>,
    /// Our tool name -> the server's.
    pub(super) names: HashMap<String, String>,
    pub(super) toolkit: String,
    pub(super) refresh: Option<Refresh>,
}

impl Toolkit for McpToolkit {
    fn relays(&self) -> bool {
        true
    }

    fn invoke(self: Arc<Self>, call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
        Box::pin(async move {
            let server_name = self
                .names
                .get(&call.tool)
                .ok_or_else(|| CallError::NotFound(call.tool.clone()))?;
            let mut params = CallToolRequestParams::new(server_name.clone());
            params.arguments = match call.input {
                serde_json::Value::Object(map) => Some(map),
                _ => None,
            };
            let limit = Duration::from_millis(call.limits.timeout_ms);
            let conn = match &self.per_session {
                None => self.conn.clone(),
                Some((backend, spec, init)) => {
                    let backend = backend.upgrade().ok_or_else(|| {
                        CallError::BackendUnavailable("the server is shutting down".into())
                    })?;
                    backend
                        .session_connection(&self.toolkit, spec, *init, &call.session)
                        .await?
                }
            };
            let peer = conn.service.peer();
            // Armed before the request goes: a loss after it is this call's.
            let lost = conn.call_lost();
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let sent = tokio::time::timeout(
                limit,
                peer.send_request_with_option(request, PeerRequestOptions::no_options()),
            )
            .await
            .map_err(|_| CallError::Timeout {
                limit_ms: call.limits.timeout_ms,
            })?;
            let result = match sent {
                Ok(handle) => {
                    // rmcp gives every request its own progress token: the
                    // server's progress on it goes to this call's stream.
                    let sink = call.progress.clone();
                    let _route = call
                        .progress
                        .map(|sink| conn.route(handle.progress_token.clone(), sink));
                    // What the server asks of its client during the call
                    // goes to this call's caller.
                    let _asker = call
                        .ask
                        .clone()
                        .map(|asker| super::routes::route(&conn.asking, &handle.id, asker));
                    // However this call ends early (its caller went away, its
                    // time limit), the server is told to cancel it.
                    let mut cancel = CancelOnDrop(Some((peer.clone(), handle.id.clone())));
                    let answer = tokio::select! {
                        answer = tokio::time::timeout(limit, handle.await_response()) => {
                            answer.map_err(|_| CallError::Timeout {
                                limit_ms: call.limits.timeout_ms,
                            })?
                        }
                        () = lost => {
                            return Err(CallError::BackendUnavailable(format!(
                                "the MCP server {} went away while the call ran (its answer \
                                 stream was cut and cannot be resumed); retry: the next call \
                                 opens a new session",
                                self.toolkit
                            )));
                        }
                    };
                    cancel.0 = None;
                    // rmcp hands notifications to the handler on tasks of
                    // their own: the last progress of a server that reports
                    // it, sent just before the answer, may still be on its
                    // way. A moment for it.
                    if sink.is_some_and(|s| s.reported() > 0) {
                        tokio::time::sleep(PROGRESS_GRACE).await;
                    }
                    answer
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(ServerResult::CallToolResult(result)) => client::into_content(result),
                Ok(_) => Err(CallError::ToolError(
                    "the MCP server answered tools/call with something else than a result".into(),
                )),
                Err(ServiceError::McpError(e)) if e.code.0 == -32602 => {
                    Err(CallError::invalid_input(e.message.to_string()))
                }
                Err(ServiceError::McpError(e)) => Err(CallError::ToolError(e.message.to_string())),
                Err(e) => {
                    // The connection is gone (the server exited): the
                    // toolkit is loaded again, which restarts the server.
                    if !conn.broken.swap(true, std::sync::atomic::Ordering::AcqRel)
                        && self.per_session.is_none()
                        && let Some(r) = &self.refresh
                    {
                        r.entry(&self.toolkit);
                    }
                    Err(CallError::BackendUnavailable(format!(
                        "the MCP server {} is not reachable: {e}",
                        self.toolkit
                    )))
                }
            }
        })
    }
}

/// Tells the server to cancel a request whose caller stopped waiting.
struct CancelOnDrop(Option<(Peer<RoleClient>, RequestId)>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some((peer, id)) = self.0.take() {
            tokio::spawn(async move {
                let params = CancelledNotificationParam::new(
                    Some(id),
                    Some("the caller stopped waiting (went away or timed out)".into()),
                );
                let _ = peer.notify_cancelled(params).await;
            });
        }
    }
}
