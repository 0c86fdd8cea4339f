//! An MCP server's tools as the catalog sees them: a call forwarded as
//! `tools/call` on the toolkit's (or the session's) connection, its progress
//! routed, cancelled on the server when it ends early. A tool the server
//! runs only as a task is called task-augmented and its result awaited with
//! `tasks/result` (the server's questions meanwhile go to the caller).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::Instrument;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, CustomRequest, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use serde_json::json;
use tokio::time::Instant;

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
    /// The server's tools it runs only as tasks (`taskSupport: "required"`),
    /// learnt from its answer to a plain call (rmcp's tool list does not
    /// carry `execution`).
    pub(super) tasked: Mutex<HashSet<String>>,
    pub(super) toolkit: String,
    pub(super) refresh: Option<Refresh>,
}

impl Toolkit for McpToolkit {
    fn relays(&self) -> bool {
        true
    }

    fn pins_definitions(&self) -> bool {
        true
    }

    fn invoke(self: Arc<Self>, mut call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
        Box::pin(async move {
            let server_name = self
                .names
                .get(&call.tool)
                .ok_or_else(|| CallError::NotFound(call.tool.clone()))?;
            let mut params = CallToolRequestParams::new(server_name.clone());
            params.arguments = match std::mem::take(&mut call.input) {
                serde_json::Value::Object(map) => Some(map),
                _ => None,
            };
            let deadline = Instant::now() + Duration::from_millis(call.limits.timeout_ms);
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
            let span = crate::trace_span!(
                "mcp.client",
                otel.name = %format_args!("tools/call {server_name}"),
                otel.kind = "client",
                otel.status_code = tracing::field::Empty,
                "mcp.method.name" = "tools/call",
                "gen_ai.operation.name" = "execute_tool",
                "gen_ai.tool.name" = server_name.as_str(),
                "toolhost.toolkit" = self.toolkit.as_str(),
                "error.type" = tracing::field::Empty,
            );
            crate::telemetry::inject_meta_of(&span, &mut params.meta.get_or_insert_default().0.0);
            let result = self
                .call_traced(&conn, &params, deadline, &call, server_name)
                .instrument(span.clone())
                .await;
            if let Err(e) = &result {
                span.record("error.type", e.kind().as_str());
                span.record("otel.status_code", "ERROR");
            } else if matches!(&result, Ok(Err(_))) {
                span.record("error.type", "upstream");
                span.record("otel.status_code", "ERROR");
            }
            let result = result?;
            match result {
                Ok(ServerResult::CallToolResult(result)) => client::into_content(result),
                Ok(other) => match as_call_result(other) {
                    Some(result) => client::into_content(result),
                    None => Err(CallError::ToolError(
                        "the MCP server answered tools/call with something else than a result"
                            .into(),
                    )),
                },
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

impl McpToolkit {
    /// The call, plainly or as a task (as the server wants it).
    async fn call_traced(
        &self,
        conn: &Connection,
        params: &CallToolRequestParams,
        deadline: Instant,
        call: &Invocation,
        server_name: &str,
    ) -> Result<Result<ServerResult, ServiceError>, CallError> {
        let mut tasked = self.is_tasked(server_name);
        loop {
            let result = if tasked {
                self.call_as_task(conn, params, deadline, call).await?
            } else {
                let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
                self.exchange(conn, request, deadline, call).await?
            };
            // MCP 2025-11-25: a tool the server runs only as a task is
            // refused with -32601 (Method not found) when called plainly
            // (the TypeScript SDK says it in a tool error instead). Called
            // again as one, and as one from now on.
            if !tasked && wants_a_task(&result) {
                tracing::info!(toolkit = %self.toolkit, tool = %server_name, "the MCP server runs this tool only as a task: called as one from now on");
                self.tasked
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(server_name.to_owned());
                tasked = true;
                continue;
            }
            return Ok(result);
        }
    }

    fn is_tasked(&self, server_name: &str) -> bool {
        self.tasked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(server_name)
    }

    /// Call the tool task-augmented, then wait for the task's result with
    /// `tasks/result`, which also carries what the server asks of its client
    /// meanwhile; the task is cancelled if the call ends first.
    async fn call_as_task(
        &self,
        conn: &Connection,
        params: &CallToolRequestParams,
        deadline: Instant,
        call: &Invocation,
    ) -> Result<Result<ServerResult, ServiceError>, CallError> {
        let mut wire =
            serde_json::to_value(params).map_err(|e| CallError::Internal(e.to_string()))?;
        wire["task"] = json!({"ttl": call.limits.timeout_ms.max(TASK_TTL_MS)});
        let request = ClientRequest::CustomRequest(CustomRequest::new("tools/call", Some(wire)));
        let answer = self.exchange(conn, request, deadline, call).await?;
        let Some(task) = answer.as_ref().ok().and_then(task_id) else {
            return Ok(answer);
        };
        let mut cancel = CancelTaskOnDrop(Some((conn.service.peer().clone(), task.clone())));
        let request = ClientRequest::CustomRequest(CustomRequest::new(
            "tasks/result",
            Some(json!({"taskId": task})),
        ));
        let result = self.exchange(conn, request, deadline, call).await?;
        cancel.0 = None;
        Ok(result)
    }

    /// Send `request` for `call` and wait for its answer until `deadline`:
    /// the server's progress and questions on it go to the call's caller,
    /// and however the wait ends early the server is told to cancel it.
    async fn exchange(
        &self,
        conn: &Connection,
        request: ClientRequest,
        deadline: Instant,
        call: &Invocation,
    ) -> Result<Result<ServerResult, ServiceError>, CallError> {
        let timeout = || CallError::Timeout {
            limit_ms: call.limits.timeout_ms,
        };
        let peer = conn.service.peer();
        // Armed before the request goes: a loss after it is this call's.
        let lost = conn.call_lost();
        let sent = tokio::time::timeout_at(
            deadline,
            peer.send_request_with_option(request, PeerRequestOptions::no_options()),
        )
        .await
        .map_err(|_| timeout())?;
        let handle = match sent {
            Ok(handle) => handle,
            Err(e) => return Ok(Err(e)),
        };
        // rmcp gives every request its own progress token: the server's
        // progress on it goes to this call's stream.
        let sink = call.progress.clone();
        let _route = call
            .progress
            .clone()
            .map(|sink| conn.route(handle.progress_token.clone(), sink));
        // What the server asks of its client on this request goes to this
        // call's caller.
        let _asker = call
            .ask
            .clone()
            .map(|asker| super::routes::route(&conn.asking, &handle.id, asker));
        let mut cancel = CancelOnDrop(Some((peer.clone(), handle.id.clone())));
        let answer = tokio::select! {
            answer = tokio::time::timeout_at(deadline, handle.await_response()) => {
                answer.map_err(|_| timeout())?
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
        // rmcp hands notifications to the handler on tasks of their own: the
        // last progress of a server that reports it, sent just before the
        // answer, may still be on its way. A moment for it.
        if sink.is_some_and(|s| s.reported() > 0) {
            tokio::time::sleep(PROGRESS_GRACE).await;
        }
        Ok(answer)
    }
}

/// Whether a plain call's answer says the tool runs only as a task: a
/// -32601 error, or a tool error saying it (the TypeScript SDK's servers).
fn wants_a_task(result: &Result<ServerResult, ServiceError>) -> bool {
    match result {
        Err(ServiceError::McpError(e)) => e.code.0 == -32601,
        Ok(ServerResult::CallToolResult(r)) if r.is_error == Some(true) => {
            r.content.len() == 1
                && r.content[0]
                    .as_text()
                    .is_some_and(|t| t.text.starts_with("MCP error -32601:"))
        }
        _ => false,
    }
}

/// How long, at least, a server keeps a task made for a call after it ends.
const TASK_TTL_MS: u64 = 60_000;

/// The id of the task a server made for a call (`{"task": {"taskId"}}`).
fn task_id(answer: &ServerResult) -> Option<String> {
    let wire = serde_json::to_value(answer).ok()?;
    wire.get("task")?.get("taskId")?.as_str().map(str::to_owned)
}

/// A result rmcp did not read as a tool result (the answer to a request it
/// does not know, `tasks/result`), read as one.
fn as_call_result(answer: ServerResult) -> Option<CallToolResult> {
    let wire = serde_json::to_value(answer).ok()?;
    if wire.get("task").is_some() {
        return None;
    }
    serde_json::from_value(wire).ok()
}

/// Tells the server to cancel a task whose caller stopped waiting.
struct CancelTaskOnDrop(Option<(Peer<RoleClient>, String)>);

impl Drop for CancelTaskOnDrop {
    fn drop(&mut self) {
        if let Some((peer, task)) = self.0.take() {
            tokio::spawn(async move {
                let request = ClientRequest::CustomRequest(CustomRequest::new(
                    "tasks/cancel",
                    Some(json!({"taskId": task})),
                ));
                let _ = peer.send_request(request).await;
            });
        }
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
