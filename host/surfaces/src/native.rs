//! The native REST API: health, tool discovery, schemas, invoke (JSON or SSE).

use super::render::{SuccessBody, success_body};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, LazyLock};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router, routing};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::body::JsonBody;
use super::error::ApiError;
use super::formats::{self, Listing, McpTool, OpenAi, Summary};
use super::made::{self, PerEntry};
use crate::auth::Who;
use crate::state::AppState;
use toolhost_core::callers::Caller;
use toolhost_core::catalog::ToolEntry;
use toolhost_core::dispatch::{CallOptions, CallOutput};
use toolhost_core::input::{Kind, Replay};
use toolhost_core::registry::ToolStatus;
use toolhost_core::sessions::{Held, Unnamed, is_valid_session_id};
use toolhost_core::tool::{CallError, LimitOverrides, ProgressSink};

/// Header carrying the session id, both ways.
pub const SESSION_HEADER: &str = "x-toolhost-session";
/// Response header: the version (content hash) of the plugin that ran the call.
pub const VERSION_HEADER: &str = "x-toolhost-plugin-version";
/// The fallback that served a call (its tool id), when one did.
pub const SERVED_BY_HEADER: &str = "x-toolhost-served-by";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/tools", routing::get(list_tools))
        .route("/tools/{id}", routing::get(describe_tool))
        .route("/tools/{id}/schema", routing::get(tool_schema))
        .route("/tools/{id}/invoke", routing::post(invoke))
        .route("/tools/{id}/status", routing::put(set_status))
        .route("/sessions/{id}", routing::delete(close_session))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// `openai`, `lagent` or `mcp`; the native summary when absent.
    #[serde(default)]
    format: Option<String>,
    /// Only tools of this category.
    #[serde(default)]
    category: Option<String>,
    /// Only tools of this status.
    #[serde(default)]
    status: Option<String>,
    /// `all`: tools of every status, not only active ones (admin token).
    #[serde(default)]
    include: Option<String>,
}

async fn list_tools(
    State(state): State<AppState>,
    Who(who): Who,
    headers: HeaderMap,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let catalog = state.dispatcher.catalog();
    let mut tools = match query.include.as_deref() {
        None => catalog.tools(),
        Some("all") => {
            super::auth::check(state.admin_token.as_ref(), &headers, &who)?;
            catalog.all_tools()
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown include `{other}`: use include=all (admin token) for tools of every status"
            )));
        }
    };
    if let Some(status) = &query.status {
        let Some(status) = ToolStatus::parse(status) else {
            return Err(ApiError::bad_request(format!(
                "unknown status `{status}`: use {}",
                statuses()
            )));
        };
        tools.retain(|t| t.record.status() == status);
    }
    if let Some(category) = &query.category {
        tools.retain(|t| t.category() == category);
    }
    tools.retain(|t| who.policy().allows_tool(&t.id));
    // Written from views of the catalog's entries: no schema is copied.
    let body = match query.format.as_deref() {
        None | Some("native") => serde_json::to_vec(&Listing {
            tools: tools.iter().map(|t| Summary::of(t)).collect(),
        }),
        // Each tool's definition is written once and kept while its entry
        // lives ([`made`]); the list is those bytes joined.
        Some("openai") => Ok(made::listing(
            &OPENAI.of(tools.iter(), |t| piece(t, &OpenAi::of(t))),
        )),
        Some("mcp") => Ok(made::listing(
            &MCP.of(tools.iter(), |t| piece(t, &McpTool::of(t))),
        )),
        Some("lagent") => serde_json::to_vec(&Listing {
            tools: formats::lagent(&catalog.toolkits(), &tools),
        }),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown format `{other}`: use openai, lagent or mcp"
            )));
        }
    }
    .map_err(|e| ApiError::from(CallError::Internal(e.to_string())))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// Each tool's OpenAI and MCP definitions, as JSON.
static OPENAI: LazyLock<PerEntry<Arc<[u8]>>> = LazyLock::new(PerEntry::default);
static MCP: LazyLock<PerEntry<Arc<[u8]>>> = LazyLock::new(PerEntry::default);

/// `listed` as JSON, or nothing (logged: the tool is left out of the list).
fn piece(t: &ToolEntry, listed: &impl serde::Serialize) -> Option<Arc<[u8]>> {
    match serde_json::to_vec(listed) {
        Ok(bytes) => Some(bytes.into()),
        Err(e) => {
            tracing::warn!(tool = %t.id, error = %e, "tool left out of GET /tools");
            None
        }
    }
}

/// The statuses, for error messages.
pub fn statuses() -> String {
    ToolStatus::ALL.map(ToolStatus::as_str).join(", ")
}

/// What `GET /tools` lists of a tool, as a value (`GET /tools/{id}` adds
/// to it).
fn summary(t: &ToolEntry) -> Value {
    serde_json::to_value(Summary::of(t)).unwrap_or_default()
}

fn find(state: &AppState, id: &str) -> Result<Arc<ToolEntry>, ApiError> {
    state
        .dispatcher
        .catalog()
        .get(id)
        .ok_or_else(|| ApiError::not_found(format!("unknown tool `{id}`")))
}

/// [`find`], for a caller: a tool outside its policy's patterns is unknown
/// to it, as in its lists.
fn find_for(state: &AppState, who: &Caller, id: &str) -> Result<Arc<ToolEntry>, ApiError> {
    if !who.policy().allows_tool(id) {
        return Err(ApiError::not_found(format!("unknown tool `{id}`")));
    }
    find(state, id)
}

async fn describe_tool(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Who(who): Who,
) -> Result<Json<Value>, ApiError> {
    let t = find_for(&state, &who, &id)?;
    let mut body = summary(&t);
    body["backend"] = json!(t.toolkit.backend.name());
    // Seed 004's names: the runtime, and how its containers are scheduled.
    body["runtime"] = json!(t.toolkit.backend.name());
    if let Some(scheduling) = t.toolkit.backend.scheduling(&t.toolkit.name) {
        body["scheduling"] = scheduling;
    }
    body["version"] = json!(t.toolkit.version);
    body["input_schema"] = t.descriptor.input_schema.clone();
    body["output_schema"] = json!(t.descriptor.output_schema);
    body["limits"] = t.toolkit.limits.view(t.toolkit.toolkit.own_limits());
    body["stats"] = json!(t.record.stats.view());
    body["health"] = state.health.view(&t.id);
    body["fallback_strategy"] = json!(state.dispatcher.fallbacks_of(&t.id));
    Ok(Json(body))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusChange {
    status: String,
}

/// `PUT /tools/{id}/status` (admin token): move a tool along its lifecycle
/// (`staging → active ⇄ inactive`); saved before the answer. Inactive and
/// staging tools leave every surface's lists and their calls get 409.
async fn set_status(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Who(who): Who,
    headers: HeaderMap,
    JsonBody(change): JsonBody<StatusChange>,
) -> Result<Json<Value>, ApiError> {
    super::auth::check(state.admin_token.as_ref(), &headers, &who)?;
    let t = find(&state, &id)?;
    let Some(to) = ToolStatus::parse(&change.status) else {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!("unknown status `{}`: use {}", change.status, statuses()),
        ));
    };
    let from = t.record.status();
    if !from.may_become(to) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!(
                "tool `{id}` is {}: it cannot become {} (staging -> active <-> inactive; building is the builder's)",
                from.as_str(),
                to.as_str()
            ),
        ));
    }
    let catalog = state.dispatcher.catalog();
    catalog.set_status(&id, to);
    let args = json!({"tool_id": id, "from": from.as_str(), "to": to.as_str()});
    if let Some(registry) = catalog.registry() {
        // Not saved, not changed: the change is undone (after it, so that
        // the registry ends with the old status whenever it is written).
        if let Err(e) = registry.sync().await {
            tracing::error!(tool = %id, error = %e, "status not saved: not changed");
            catalog.set_status(&id, from);
            let message = format!("tool `{id}` stays {}: {e}; try again", from.as_str());
            return Err(state.unsaved(who.name(), "set_status", args, &e, message));
        }
    }
    state.audit(who.name(), "set_status", args, "ok");
    Ok(Json(json!({
        "tool_id": id,
        "status": to.as_str(),
        "previous": from.as_str(),
    })))
}

async fn tool_schema(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Who(who): Who,
) -> Result<Json<Value>, ApiError> {
    let t = find_for(&state, &who, &id)?;
    Ok(Json(json!({
        "tool_id": t.id,
        "input_schema": t.descriptor.input_schema,
        "output_schema": t.descriptor.output_schema,
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InvokeRequest {
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    stream: bool,
    /// Lower this call's limits (never raise them).
    #[serde(default)]
    limits: LimitOverrides,
    /// Input requests: absent, the caller answers a tool's questions in a
    /// second request (`input_required`); `"none"`, it cannot (the tool is
    /// told that no input is available); `{"state", "answers"}`, the answers
    /// to the round whose state it got.
    #[serde(default)]
    input: Option<Value>,
}

/// The key of this run's native input states (see [`toolhost_core::input::Sealer`]).
fn sealer() -> &'static toolhost_core::input::Sealer {
    static SEALER: std::sync::OnceLock<toolhost_core::input::Sealer> = std::sync::OnceLock::new();
    SEALER.get_or_init(|| toolhost_core::input::Sealer::new("native"))
}

/// How a call's questions are answered: by a [`Replay`] holding the answers
/// so far, or by nobody (`"input": "none"`).
fn replay_of(
    id: &str,
    params: &Value,
    input: Option<Value>,
) -> Result<Option<Arc<Replay>>, ApiError> {
    let all = vec![Kind::Form, Kind::Sampling, Kind::Roots];
    let invalid = |m: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", m);
    let (state, answers) = match input {
        None => return Ok(Some(Replay::new(BTreeMap::new(), all))),
        Some(Value::String(s)) if s == "none" => return Ok(None),
        Some(Value::Object(mut o)) => {
            let state = o.remove("state");
            let answers = o.remove("answers");
            if let Some(k) = o.keys().next() {
                return Err(invalid(format!(
                    "input: unknown field `{k}` (use state and answers)"
                )));
            }
            (state, answers)
        }
        Some(other) => {
            return Err(invalid(format!(
                "input: \"none\" or {{\"state\", \"answers\"}}, not {other}"
            )));
        }
    };
    let Some(Value::String(state)) = state else {
        return Err(invalid(
            "input: `state` (the string of the input_required answer) is missing".into(),
        ));
    };
    let mut round = sealer()
        .open(&state, id, params)
        .map_err(|e| invalid(format!("input: {e}")))?;
    let answers = match answers {
        None => serde_json::Map::new(),
        Some(Value::Object(a)) => a,
        Some(_) => {
            return Err(invalid(
                "input: `answers` is an object by question key".into(),
            ));
        }
    };
    for (key, answer) in answers {
        let Some(q) = round.asked.iter().find(|q| q.key == key) else {
            return Err(invalid(format!(
                "input: no question `{key}` was asked in this round"
            )));
        };
        toolhost_core::input::check_answer(q, &answer)
            .map_err(|e| invalid(format!("input: {e}")))?;
        round.answers.insert(key, answer);
    }
    Ok(Some(Replay::new(round.answers, all)))
}

/// The body of a call that ended on questions, when it did:
/// `{"status":"input_required","input_required":{"questions":[...],"state":...}}`.
fn input_required(
    id: &str,
    params: &Value,
    replay: Option<&Replay>,
) -> Option<Result<Value, ApiError>> {
    let replay = replay?;
    let questions = replay.pending();
    if questions.is_empty() {
        return None;
    }
    Some(
        sealer()
            .seal(id, params, replay)
            .map(|state| {
                json!({
                    "status": "input_required",
                    "input_required": {"questions": questions, "state": state},
                    "result": null,
                    "error": null,
                })
            })
            .map_err(|e| {
                ApiError::from(CallError::Internal(format!("cannot seal the state: {e}")))
            }),
    )
}

#[derive(Deserialize, Default)]
pub struct SessionQuery {
    pub session: Option<String>,
}

/// The caller's session: header, else `?session=`, else one of the
/// request's own, forgotten after the call unless the call left something in
/// it (its id is sent back, so the caller may come back to it).
pub fn open_session(
    state: &AppState,
    who: &Caller,
    headers: &HeaderMap,
    query: &SessionQuery,
) -> Result<Held, ApiError> {
    let from_header = headers
        .get(SESSION_HEADER)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    let id = from_header.or(query.session.as_deref());
    Ok(state
        .dispatcher
        .sessions()
        .hold(who, id, Unnamed::KeepIfUsed)?)
}

fn wants_sse(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"))
}

async fn invoke(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<SessionQuery>,
    Who(who): Who,
    headers: HeaderMap,
    JsonBody(req): JsonBody<InvokeRequest>,
) -> Response {
    let session = match open_session(&state, &who, &headers, &query) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let session_header =
        HeaderValue::from_str(session.client_id()).expect("session ids are header-safe");
    let params = req.params.unwrap_or_else(|| json!({}));
    let replay = match replay_of(&id, &params, req.input) {
        Ok(r) => r,
        Err(e) => {
            let mut r = e.into_response();
            r.headers_mut().insert(SESSION_HEADER, session_header);
            return r;
        }
    };
    let mut response = if req.stream || wants_sse(&headers) {
        invoke_sse(state, session, who, id, params, req.limits, replay).into_response()
    } else {
        let options = CallOptions {
            limits: req.limits,
            progress: None,
            staging: false,
            ask: replay
                .clone()
                .map(|r| r as Arc<dyn toolhost_core::input::Asker>),
            caller: Some(who),
            ..CallOptions::default()
        };
        let result = state
            .dispatcher
            .dispatch(&session, &id, params.clone(), options)
            .await;
        if let Some(asked) = input_required(&id, &params, replay.as_deref()) {
            match asked {
                Ok(body) => Json(body).into_response(),
                Err(e) => e.into_response(),
            }
        } else {
            match result {
                Ok(out) => {
                    let mut r = Json(SuccessBody(&out)).into_response();
                    if let Ok(v) = HeaderValue::from_str(&out.version) {
                        r.headers_mut().insert(VERSION_HEADER, v);
                    }
                    if let Some(v) = out
                        .served_by
                        .as_deref()
                        .and_then(|b| HeaderValue::from_str(b).ok())
                    {
                        r.headers_mut().insert(SERVED_BY_HEADER, v);
                    }
                    r
                }
                Err(e) => ApiError::from(e).into_response(),
            }
        }
    };
    response
        .headers_mut()
        .insert(SESSION_HEADER, session_header);
    response
}

/// Close a session: its Docker nodes are removed and its workspace deleted
/// (the one close of every surface, [`toolhost_core::sessions::Sessions::close`]).
async fn close_session(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Who(who): Who,
) -> Result<Json<Value>, ApiError> {
    // Another caller's session is unknown here, as one never made.
    let key = if is_valid_session_id(&id) {
        who.session_key(&id)
    } else {
        String::new()
    };
    match state.dispatcher.sessions().close(&key).await {
        Ok(true) => Ok(Json(json!({ "closed": id }))),
        Ok(false) => Err(ApiError::not_found(format!("no session `{id}`"))),
        Err(e) => {
            Err(CallError::Internal(format!("cannot delete the workspace of `{id}`: {e}")).into())
        }
    }
}

/// Stream the call as server-sent events: one `progress` event per progress
/// chunk, `data: {"chunk":{message,done,total},"done":false}`, then one
/// `result` (or `error`) event whose data is the JSON invoke's body plus
/// `"done":true`. The call runs in its own task, so a slow reader holds up no
/// other call; when the client goes away the stream is dropped and the call
/// with it (the sandbox is torn down).
fn invoke_sse(
    state: AppState,
    session: Held,
    who: Caller,
    id: String,
    params: Value,
    limits: LimitOverrides,
    replay: Option<Arc<Replay>>,
) -> Sse<impl futures::Stream<Item = Result<Event, Infallible>>> {
    let (sink, rx) = ProgressSink::channel();
    let call = AbortOnDrop(tokio::spawn(async move {
        let options = CallOptions {
            limits,
            progress: Some(sink),
            staging: false,
            ask: replay
                .clone()
                .map(|r| r as Arc<dyn toolhost_core::input::Asker>),
            caller: Some(who),
            ..CallOptions::default()
        };
        let result = state
            .dispatcher
            .dispatch(&session, &id, params.clone(), options)
            .await;
        match input_required(&id, &params, replay.as_deref()) {
            Some(asked) => Asked::Questions(asked),
            None => Asked::Done(result),
        }
    }));
    let progress = tokio_stream(rx).map(|p| {
        Ok(Event::default()
            .event("progress")
            .json_data(json!({"chunk": p, "done": false}))
            .unwrap_or_default())
    });
    let last = futures::stream::once(async move {
        let mut call = call;
        let (name, mut body) = match (&mut call.0).await {
            Ok(Asked::Questions(Ok(body))) => ("input_required", body),
            Ok(Asked::Questions(Err(e))) => ("error", e.body()),
            Ok(Asked::Done(Ok(out))) => ("result", success_body(&out)),
            Ok(Asked::Done(Err(e))) => ("error", ApiError::from(e).body()),
            Err(e) => (
                "error",
                ApiError::from(CallError::Internal(e.to_string())).body(),
            ),
        };
        body["done"] = json!(true);
        Ok(Event::default()
            .event(name)
            .json_data(body)
            .unwrap_or_default())
    });
    Sse::new(progress.chain(last)).keep_alive(KeepAlive::default())
}

/// How a streamed call ended: on questions, or done.
enum Asked {
    Questions(Result<Value, ApiError>),
    Done(Result<CallOutput, CallError>),
}

/// Aborts the task when dropped: a call streamed to a client that went away
/// stops with it.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn tokio_stream<T>(mut rx: mpsc::Receiver<T>) -> impl futures::Stream<Item = T> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
