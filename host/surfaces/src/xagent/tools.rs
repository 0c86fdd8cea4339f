//! XAgent's tool discovery (listing, retrieval, schemas) and calls, with
//! XAgent's wrapping of results.

use super::*;
use crate::auth::Who;
use toolhost_core::dispatch::Running;

/// A tool as XAgent's `tools_json` lists it (an OpenAI function).
pub fn tool_json(t: &ToolEntry) -> Value {
    json!({
        "name": t.id,
        "description": t.descriptor.description,
        "parameters": t.descriptor.input_schema,
    })
}

pub(super) async fn get_available_tools(
    State(state): State<AppState>,
    Who(who): Who,
) -> Json<Value> {
    let catalog = state.dispatcher.catalog();
    let mut tools = catalog.tools();
    tools.retain(|t| who.policy().allows_tool(&t.id));
    let envs: Vec<Value> = catalog
        .toolkits()
        .iter()
        .map(|kit| {
            let names: Vec<&str> = tools
                .iter()
                .filter(|t| t.toolkit.name == kit.name)
                .map(|t| t.id.as_str())
                .collect();
            json!({
                "name": kit.name,
                "description": kit.description,
                "total_tools": names.len(),
                "tools": names.into_iter().take(TOOLS_PER_ENV).collect::<Vec<_>>(),
            })
        })
        .collect();
    Json(json!({
        "available_envs": envs,
        "available_tools": tools.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        "tools_json": tools.iter().map(|t| tool_json(t)).collect::<Vec<_>>(),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetrieveRequest {
    question: String,
    #[serde(default = "default_top_k")]
    top_k: usize,
}

pub(super) fn default_top_k() -> usize {
    5
}

pub(super) async fn retrieving_tools(
    State(state): State<AppState>,
    Who(who): Who,
    JsonBody(req): JsonBody<RetrieveRequest>,
) -> Json<Value> {
    let catalog = state.dispatcher.catalog();
    let mut ids = state
        .retriever
        .search(catalog, &req.question, req.top_k.min(100));
    ids.retain(|id| who.policy().allows_tool(id));
    let tools_json: Vec<Value> = ids
        .iter()
        .filter_map(|id| catalog.listed(id))
        .map(|t| tool_json(&t))
        .collect();
    Json(json!({"retrieved_tools": ids, "tools_json": tools_json}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ToolNames {
    /// `tools` in seed 001's description of the protocol.
    #[serde(alias = "tools")]
    tool_names: Vec<String>,
}

pub(super) async fn schema_for_tools(
    State(state): State<AppState>,
    Who(who): Who,
    JsonBody(req): JsonBody<ToolNames>,
) -> Json<Value> {
    let catalog = state.dispatcher.catalog();
    let (mut found, mut missing) = (Vec::new(), Vec::new());
    for name in req.tool_names {
        match catalog
            .listed(&name)
            .filter(|_| who.policy().allows_tool(&name))
        {
            Some(t) => found.push(tool_json(&t)),
            None if name == AWAIT_CALL => found.push(await_call_json()),
            None => missing.push(name),
        }
    }
    Json(json!({"tools_json": found, "missing_tools": missing}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EnvNames {
    /// `envs` in seed 001's description of the protocol.
    #[serde(alias = "envs")]
    env_names: Vec<String>,
}

pub(super) async fn schema_for_envs(
    State(state): State<AppState>,
    Who(who): Who,
    JsonBody(req): JsonBody<EnvNames>,
) -> Json<Value> {
    let catalog = state.dispatcher.catalog();
    let mut tools = catalog.tools();
    tools.retain(|t| who.policy().allows_tool(&t.id));
    let kits = catalog.toolkits();
    let (mut found, mut missing) = (Vec::new(), Vec::new());
    for name in req.env_names {
        match kits.iter().find(|k| k.name == name) {
            Some(kit) => found.push(json!({
                "name": kit.name,
                "description": kit.description,
                "tools": tools.iter().filter(|t| t.toolkit.name == kit.name).take(TOOLS_PER_ENV).map(|t| tool_json(t)).collect::<Vec<_>>(),
            })),
            None => missing.push(name),
        }
    }
    Json(json!({"envs_json": found, "missing_envs": missing}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExecuteRequest {
    /// `tool` in seed 001's description of the protocol.
    #[serde(alias = "tool")]
    tool_name: String,
    /// `parameters` in seed 001's description of the protocol.
    #[serde(default, alias = "parameters")]
    arguments: Option<Value>,
    #[serde(default)]
    env_name: Option<String>,
}

pub(super) async fn execute_tool(
    State(state): State<AppState>,
    Who(who): Who,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, Detail> {
    crate::body::json_typed(&headers).map_err(|e| Detail::new(e.status, e.message))?;
    let req: ExecuteRequest = crate::body::parse(&body).map_err(|e| {
        // FastAPI answers a malformed body with 422.
        Detail::new(StatusCode::UNPROCESSABLE_ENTITY, e.message)
    })?;
    let session = session(&state, &who, &headers)?;
    let arguments = match req.arguments {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(s)) => serde_json::from_str(&s).map_err(|e| {
            Detail::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("`arguments` is a string that is not a JSON object: {e}"),
            )
        })?,
        Some(v) => v,
    };
    if !arguments.is_object() {
        return Err(Detail::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "`arguments` must be a JSON object",
        ));
    }
    let id = match &req.env_name {
        Some(env) if !req.tool_name.starts_with(&format!("{env}_")) => {
            format!("{env}_{}", req.tool_name)
        }
        _ => req.tool_name.clone(),
    };
    if id == PRINT_TREE {
        return print_tree(&session, &arguments).await;
    }
    if id == AWAIT_CALL {
        return await_call(&state, &session, &arguments).await;
    }
    let mut running = Running::start(
        state.dispatcher.clone(),
        session.clone(),
        id.clone(),
        arguments,
        // XAgent's client cannot answer a tool's questions.
        CallOptions {
            caller: Some(who),
            ..CallOptions::default()
        },
    );
    let result = match running.wait(state.parked.patience).await {
        Some(done) => done,
        None => match state.parked.park(session.id(), &id, running) {
            Ok(detail) => return Ok(still_running(detail)),
            // The session has its fill of parked calls: this one is waited for.
            Err(running) => running.finish().await,
        },
    };
    answer(&state, &id, result)
}

/// [`AWAIT_CALL`]: the result of a parked call, or 450 again.
async fn await_call(
    state: &AppState,
    session: &Arc<Session>,
    arguments: &Value,
) -> Result<Response, Detail> {
    let Some(call) = arguments.get("call_id").and_then(Value::as_str) else {
        return Err(Detail::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "`call_id` (a string, from the 450 answer) is required",
        ));
    };
    match state.parked.wait(session.id(), call).await {
        Awaited::Done(tool, result) => answer(state, &tool, result),
        Awaited::Retry(detail) => Ok(still_running(detail)),
        Awaited::Unknown => Err(Detail::new(
            StatusCode::NOT_FOUND,
            format!(
                "no running call `{call}` in this session (its result was already given, or it was cancelled with its session or after {} s unclaimed)",
                UNCLAIMED.as_secs()
            ),
        )),
        Awaited::Busy => Err(Detail::new(
            StatusCode::CONFLICT,
            format!("call `{call}` is being awaited by another request"),
        )),
    }
}

/// XAgent's 450: the call is not finished.
fn still_running(detail: Value) -> Response {
    (
        StatusCode::from_u16(450).expect("450 is a valid status"),
        Json(json!({ "detail": detail })),
    )
        .into_response()
}

/// The answer to a call of `id` that ended with `result`.
fn answer(
    state: &AppState,
    id: &str,
    result: Result<CallOutput, CallError>,
) -> Result<Response, Detail> {
    match result {
        Ok(out) => {
            // A tool that says it is not finished (`"finished": false`) and
            // names its continuation: XAgent's 450 retry.
            let tool = state.dispatcher.catalog().get(id);
            if let (Some(tool), [.., Content::Json(v)]) = (&tool, out.content.as_slice())
                && v.get("finished") == Some(&Value::Bool(false))
                && let Some(next) = &tool.descriptor.continue_with
            {
                return Ok(still_running(json!({
                    "type": "retry",
                    "next_calling": toolhost_core::tool::tool_id(&tool.toolkit.name, next),
                    "arguments": {},
                    "partial": v,
                })));
            }
            let mut response = Json(wrap(&out.content)).into_response();
            // XAgent's body has no place for it: a fallback that served
            // is named in a header.
            if let Some(v) = out
                .served_by
                .as_deref()
                .and_then(|by| axum::http::HeaderValue::from_str(by).ok())
            {
                response
                    .headers_mut()
                    .insert(crate::native::SERVED_BY_HEADER, v);
            }
            Ok(response)
        }
        Err(e) => {
            let status = match e.kind() {
                ErrorKind::NotFound => StatusCode::NOT_FOUND,
                ErrorKind::InvalidInput => StatusCode::UNPROCESSABLE_ENTITY,
                ErrorKind::NotActive => StatusCode::CONFLICT,
                ErrorKind::Overloaded | ErrorKind::BackendUnavailable | ErrorKind::NodeLost => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            let rendered = crate::error::ApiError::from(e);
            Err(Detail::new(
                status,
                format!("{}: {}", rendered.kind, rendered.message),
            ))
        }
    }
}

/// The tool XAgent's engine calls on every subtask for its prompts (the
/// spelling is XAgent's): the session workspace as a text tree. Not in the
/// catalogue (its name is no toolhost tool id), answered here.
pub const PRINT_TREE: &str = "FileSystemEnv_print_filesys_struture";

pub(super) async fn print_tree(
    session: &Arc<Session>,
    arguments: &Value,
) -> Result<Response, Detail> {
    let with_root = match arguments.get("return_root") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(Detail::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("invalid_input: `return_root` must be a boolean, not {other}"),
            ));
        }
    };
    let tree = in_workspace(session, workspace::tree).await?;
    Ok(Json(Value::String(workspace::tree_text(&tree, with_root))).into_response())
}

/// XAgent's wrapping of a result: its structured result when it has one
/// (the answer; its other items say the same in text), else its items.
pub fn wrap(content: &[Content]) -> Value {
    let (content, _) = Content::split_meta(content);
    if let Some(v) = Content::structured(&content) {
        return wrap_item(&Content::Json(v.clone()));
    }
    match &*content {
        [] => Value::Null,
        [one] => wrap_item(one),
        many => {
            json!({"type": "composite", "data": many.iter().map(wrap_item).collect::<Vec<_>>()})
        }
    }
}

pub(super) fn wrap_item(c: &Content) -> Value {
    match c.plain() {
        Content::Text(t) => Value::String(t.clone()),
        Content::Json(v @ Value::Object(_)) | Content::Structured(v @ Value::Object(_)) => {
            json!({"type": "simple", "data": v})
        }
        Content::Json(v) | Content::Structured(v) => v.clone(),
        Content::Binary {
            media_type,
            data,
            name,
        } => crate::render::binary_json(media_type, data, name.as_deref()),
        Content::Link(link) => {
            json!({"type": "simple", "data": crate::render::link_json(link)})
        }
        Content::Resource(r) => match (&r.text, &r.blob) {
            (Some(text), _) => Value::String(text.clone()),
            (None, Some(blob)) => crate::render::binary_json(
                r.mime_type.as_deref().unwrap_or("application/octet-stream"),
                blob,
                r.uri.rsplit('/').next(),
            ),
            (None, None) => json!({"type": "simple", "data": crate::render::resource_json(r)}),
        },
        Content::Annotated(_) => unreachable!("plain() removes annotations"),
        // Left out by `wrap`: XAgent's shapes have no place for it.
        Content::Meta(_) => Value::Null,
    }
}
