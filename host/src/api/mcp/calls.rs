//! `tools/call` and its rendering: a dispatch result as MCP content,
//! structured content and resource links; failures as `isError` results.

use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, MetaObject,
    ProgressNotificationParam, Resource, ResourceContents,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

use super::handler::{McpHandler, has_header, is_stateless, lasting};
use super::{features, input, tasks};
use crate::api::AppState;
use crate::api::error::ApiError;
use crate::declared::TaskSupport;
use crate::dispatch::{CallOptions, CallOutput};
use crate::sessions::Session;
use crate::tool::{CallError, Content, ProgressSink};

/// `tools/call`: the tool through dispatch, as a task, with questions
/// (input requests) and progress as far as the client takes them.
pub(super) async fn call_tool(
    handler: &McpHandler,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    // A tool of a plugin still compiling is not unknown: the call waits
    // for it (or ends with a 503-like tool error), as on every surface.
    let catalog = handler.state.dispatcher.catalog();
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
    let session = handler.session(&context)?;
    let input = Value::Object(request.arguments.unwrap_or_default());
    let caps = context.client_capabilities();
    if can_follow && support != TaskSupport::Forbidden {
        let on_end = handler.keep_own_session(&context);
        let session_mode = has_header(&context, "mcp-session-id");
        let asker = input::TaskAsker::new(input::kinds(caps.as_ref()));
        // Stateless, a tool that asks first: what it asks before its
        // task exists is asked in rounds (InputRequiredResult).
        let rounds = if decl.asks_first && is_stateless(&context) {
            Some(handler.mrtr.replay(
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
        return match handler
            .tasks
            .run(
                &handler.state,
                tasks::Call {
                    session,
                    tool: id.clone(),
                    input,
                    support,
                    note_written: lasting(&context),
                    notify: session_mode.then(|| context.peer.clone()),
                    rounds,
                },
                asker,
                on_end,
            )
            .await
        {
            tasks::Outcome::Task(task) => Ok(task.into()),
            tasks::Outcome::Asked => match asked {
                Some((replay, input)) => handler
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
    let (ask, replay): (Option<Arc<dyn crate::input::Asker>>, _) = if stateless {
        let replay = handler.mrtr.replay(
            name,
            &input,
            request.request_state.as_deref(),
            request.input_responses.clone(),
            &context,
        )?;
        (Some(replay.clone()), Some(replay))
    } else {
        let kinds = input::kinds(caps.as_ref());
        let ask: Option<Arc<dyn crate::input::Asker>> = (!kinds.is_empty()).then(|| {
            Arc::new(input::PeerAsker {
                peer: context.peer.clone(),
                can: crate::input::Can::new(kinds),
            }) as _
        });
        (ask, None)
    };
    let asked = replay.as_ref().map(|r| (r.clone(), input.clone()));

    let (progress_tx, mut progress_rx) = ProgressSink::channel();
    let token = context.meta.get_progress_token();
    let progress = token.is_some().then_some(progress_tx);
    let call = call(
        &handler.state,
        &session,
        name,
        input,
        progress,
        ask,
        lasting(&context),
    );
    // Progress goes out while the call runs, and all of it before the
    // result: the forwarder ends when the call drops its sender.
    let forward = async {
        let Some(token) = token else { return };
        let mut reports = 0.0;
        while let Some(p) = progress_rx.recv().await {
            reports += 1.0;
            let mut note = ProgressNotificationParam::new(token.clone(), p.done.unwrap_or(reports))
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
                    return handler.mrtr.input_required(name, &input, &replay).map(CallToolResponse::from);
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

/// Resource links a tool result carries, at most (to the files it wrote).
const MAX_LINKS: usize = 32;

pub(crate) fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(
        format!("unknown tool `{name}`"),
        Some(json!({"kind": "not_found"})),
    )
}

/// A call through dispatch as an MCP result (`isError` for tool failures,
/// links to the files it wrote when `note_written`); `Err` only for a tool
/// that is gone.
pub(super) async fn call(
    state: &AppState,
    session: &Arc<Session>,
    name: &str,
    input: Value,
    progress: Option<ProgressSink>,
    ask: Option<Arc<dyn crate::input::Asker>>,
    note_written: bool,
) -> Result<CallToolResult, McpError> {
    let options = CallOptions {
        progress,
        ask,
        note_written,
        ..CallOptions::default()
    };
    // Boxed here, once: the wasm call's future is large, and the futures
    // around this one are moved (into select!s, tasks, boxes) on their way.
    let dispatch = Box::pin(state.dispatcher.dispatch(session, name, input, options));
    match dispatch.await {
        Ok(out) => Ok(success(out)),
        Err(CallError::NotFound(_)) => Err(unknown_tool(name)),
        Err(e) => Ok(failure(&e)),
    }
}

/// A successful call as an MCP result. A result that is one JSON value is
/// also `structuredContent` (what `outputSchema` describes).
pub(crate) fn success(out: CallOutput) -> CallToolResult {
    let mut blocks: Vec<ContentBlock> = out.content.iter().map(block).collect();
    blocks.extend(out.written.iter().take(MAX_LINKS).map(|f| {
        ContentBlock::resource_link(
            Resource::new(
                format!("{}{}", features::WORKSPACE_PREFIX, f.path),
                f.path.clone(),
            )
            .with_mime_type(features::media_type(&f.path))
            .with_size(f.size),
        )
    }));
    let mut result = CallToolResult::success(blocks);
    if let [Content::Json(_)] = out.content.as_slice()
        && let Some(Content::Json(v)) = out.content.into_iter().next()
    {
        result.structured_content = Some(v);
    }
    let mut meta = MetaObject::new();
    meta.insert("toolhost/version".into(), Value::String(out.version));
    meta.insert(
        "toolhost/elapsed_ms".into(),
        json!(out.elapsed.as_secs_f64() * 1000.0),
    );
    result.meta = Some(meta);
    result
}

/// A failed call as an MCP result the model can read: `isError`, the kind
/// first in the text, the kind and details in `_meta`.
/// A failed call as a tool result with `isError`, rendered by the one
/// client-error renderer ([`ApiError`]): `[kind] message`.
pub(crate) fn failure(e: &CallError) -> CallToolResult {
    let rendered = ApiError::from(e.clone());
    let mut result = CallToolResult::error(vec![ContentBlock::text(rendered.text())]);
    result.meta = Some(meta(json!({ "toolhost/error_kind": rendered.kind })));
    result
}

fn meta(v: Value) -> MetaObject {
    match v {
        Value::Object(map) => MetaObject(map),
        _ => MetaObject::new(),
    }
}

/// One content item as an MCP content block.
fn block(c: &Content) -> ContentBlock {
    match c {
        Content::Text(t) => ContentBlock::text(t.clone()),
        Content::Json(v) => ContentBlock::text(v.to_string()),
        Content::Binary {
            media_type,
            data,
            name,
        } => {
            let b64 = base64::engine::general_purpose::STANDARD.encode(data);
            if media_type.starts_with("image/") {
                ContentBlock::image(b64, media_type.clone())
            } else if media_type.starts_with("audio/") {
                ContentBlock::audio(b64, media_type.clone())
            } else {
                let uri = format!(
                    "toolhost:/result/{}",
                    crate::tool::binary_file_name(media_type, data, name.as_deref())
                );
                ContentBlock::resource(
                    ResourceContents::blob(b64, uri).with_mime_type(media_type.clone()),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MCP once sent an internal error's detail (paths, engine messages)
    /// where native and XAgent said "see the server log".
    #[test]
    fn a_failed_call_never_carries_internal_details() {
        let result = failure(&CallError::Internal(
            "/srv/toolhost/data/compile-cache/x.cwasm: engine said no".into(),
        ));
        let text = serde_json::to_string(&result).unwrap();
        assert!(!text.contains("/srv/toolhost"), "{text}");
        assert!(!text.contains("engine said"), "{text}");
        assert!(
            text.contains("[internal] internal error; see the server log"),
            "{text}"
        );
        assert_eq!(result.is_error, Some(true));
        let bad = failure(&CallError::InvalidInput {
            message: "bad input".into(),
            details: vec!["/a: x".into(), "/b: y".into()],
        });
        let text = serde_json::to_string(&bad).unwrap();
        assert!(
            text.contains("[invalid_input] bad input\\n- /a: x\\n- /b: y"),
            "{text}"
        );
    }
}
