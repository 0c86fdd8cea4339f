//! `tools/call` and its rendering: a dispatch result as MCP content,
//! structured content and resource links; failures as `isError` results.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ProgressNotificationParam,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;

use super::handler::{McpHandler, has_header, is_stateless, lasting};
use super::render::{failure, success, unknown_tool};
use super::{input, tasks, trace};
use crate::state::AppState;
use axum::http::request::Parts;
use toolhost_core::declared::TaskSupport;
use toolhost_core::dispatch::CallOptions;
use toolhost_core::sessions::Session;
use toolhost_core::tool::{CallError, ProgressSink};

impl McpHandler {
    /// `tools/call`: the tool through dispatch, as a task, with questions
    /// (input requests) and progress as far as the client takes them.
    pub(super) async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let parts = context.extensions.get::<Parts>();
        let meta = request.meta.as_ref().map_or(&context.meta.0.0, |m| &m.0.0);
        let parent = trace::parent(Some(meta), parts);
        let session = parts
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let (tool, id) = (request.name.to_string(), context.id.clone());
        let call = trace::Call {
            method: "tools/call",
            tool: Some(&tool),
            task: None,
            link: None,
            id: &id,
            session: session.as_deref(),
            parent,
        };
        trace::within(call, self.call_tool_now(request, context)).await
    }

    async fn call_tool_now(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // A tool of a plugin still compiling is not unknown: the call waits
        // for it (or ends with a 503-like tool error), as on every surface.
        let catalog = self.state.dispatcher.catalog();
        let Some(id) = tasks::resolve(catalog, &request.name) else {
            return Err(unknown_tool(&request.name));
        };
        let name = id.as_str();
        let decl = catalog
            .get(name)
            .map_or(Default::default(), |t| tasks::decl(&t));
        let support = decl.task;
        let can_follow = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        if support == TaskSupport::Required && !can_follow {
            return Err(tasks::tasks_required());
        }
        let session = self.session(&context)?;
        let input = Value::Object(request.arguments.unwrap_or_default());
        let caps = context.client_capabilities();
        if can_follow && support != TaskSupport::Forbidden {
            let on_end = self.keep_own_session(&context);
            let session_mode = has_header(&context, "mcp-session-id");
            let asker = input::TaskAsker::new(input::kinds(caps.as_ref()));
            // Stateless, a tool that asks first: what it asks before its
            // task exists is asked in rounds (InputRequiredResult).
            let rounds = if decl.asks_first && is_stateless(&context) {
                Some(self.mrtr.replay(
                    name,
                    &input,
                    request.request_state.as_deref(),
                    request.input_responses.clone(),
                    &context,
                )?)
            } else {
                None
            };
            let asked = rounds.clone().map(|r| (r, input.clone()));
            return match self
                .tasks
                .run(
                    &self.state,
                    tasks::Call {
                        session,
                        tool: id.clone(),
                        input,
                        support,
                        note_written: lasting(&context),
                        notify: session_mode.then(|| context.peer.clone()),
                        rounds,
                        caller: super::handler::caller(&context),
                    },
                    asker,
                    on_end,
                )
                .await
            {
                tasks::Outcome::Task(task) => Ok(task.into()),
                tasks::Outcome::Asked => match asked {
                    Some((replay, input)) => self
                        .mrtr
                        .input_required(name, &input, &replay)
                        .map(CallToolResponse::from),
                    None => Err(McpError::internal_error("questions without rounds", None)),
                },
                tasks::Outcome::Now(Err(CallError::NotFound(_))) => Err(unknown_tool(name)),
                tasks::Outcome::Now(Err(e)) => Ok(failure(&e).into()),
                tasks::Outcome::Now(Ok(out)) => Ok(success(out).into()),
            };
        }
        // Stateless (2026-07-28): questions are answered in another request.
        let stateless = is_stateless(&context);
        let (ask, replay): (Option<Arc<dyn toolhost_core::input::Asker>>, _) = if stateless {
            let replay = self.mrtr.replay(
                name,
                &input,
                request.request_state.as_deref(),
                request.input_responses.clone(),
                &context,
            )?;
            (Some(replay.clone()), Some(replay))
        } else {
            let kinds = input::kinds(caps.as_ref());
            let ask: Option<Arc<dyn toolhost_core::input::Asker>> =
                (!kinds.is_empty()).then(|| {
                    Arc::new(input::PeerAsker {
                        peer: context.peer.clone(),
                        can: toolhost_core::input::Can::new(kinds),
                    }) as _
                });
            (ask, None)
        };
        let asked = replay.as_ref().map(|r| (r.clone(), input.clone()));

        let (progress_tx, mut progress_rx) = ProgressSink::channel();
        let token = context.meta.get_progress_token();
        let progress = token.is_some().then_some(progress_tx);
        let options = CallOptions {
            progress,
            ask,
            note_written: lasting(&context),
            caller: Some(super::handler::caller(&context)),
            ..CallOptions::default()
        };
        let call = call(&self.state, &session, name, input, options);
        // Progress goes out while the call runs, and all of it before the
        // result: the forwarder ends when the call drops its sender.
        let forward = async {
            let Some(token) = token else { return };
            let mut reports = 0.0;
            while let Some(p) = progress_rx.recv().await {
                reports += 1.0;
                let mut note =
                    ProgressNotificationParam::new(token.clone(), p.done.unwrap_or(reports))
                        .with_message(p.message);
                if let Some(total) = p.total {
                    note = note.with_total(total);
                }
                if context.peer.notify_progress(note).await.is_err() {
                    return; // the client is gone; the call goes on until cancelled
                }
            }
        };
        tokio::select! {
            (result, ()) = async { tokio::join!(call, forward) } => {
                // A round that ended on questions.
                if let Some((replay, input)) = asked {
                    if !replay.pending().is_empty() {
                        return self.mrtr.input_required(name, &input, &replay).map(CallToolResponse::from);
                    }
                    if let Some(e) = input::missing_capability(&result, &*replay) {
                        return Err(e);
                    }
                }
                result.map(CallToolResponse::from)
            }
            () = context.ct.cancelled() => {
                tracing::info!(tool = name, session = session.id(), "MCP: call cancelled by the client");
                Err(McpError::internal_error("the call was cancelled", None))
            }
        }
    }
}

/// A call through dispatch as an MCP result (`isError` for tool failures,
/// links to the files it wrote when `note_written`); `Err` only for a tool
/// that is gone.
pub(super) async fn call(
    state: &AppState,
    session: &Arc<Session>,
    name: &str,
    input: Value,
    options: CallOptions,
) -> Result<CallToolResult, McpError> {
    // Boxed here, once: the wasm call's future is large, and the futures
    // around this one are moved (into select!s, tasks, boxes) on their way.
    let dispatch = Box::pin(state.dispatcher.dispatch(session, name, input, options));
    match dispatch.await {
        Ok(out) => Ok(success(out)),
        Err(CallError::NotFound(_)) => Err(unknown_tool(name)),
        Err(e) => Ok(failure(&e)),
    }
}
