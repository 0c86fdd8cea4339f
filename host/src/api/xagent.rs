//! The XAgent ToolServer protocol, so XAgent's own client
//! (`XAgent/toolserver_interface.py`) works against toolhost unmodified.
//!
//! The session is the `node_id` cookie set by `POST /get_cookie` (no
//! container is made there: nodes are lazy). Status codes of
//! `/execute_tool` are the contract: 200 success, 404 unknown tool, 422 bad
//! arguments, 450 not finished yet (`{"detail":{"type":"retry",
//! "next_calling":...,"arguments":{}}}`), 500 tool failure (limit breaches
//! included, the kind in the text), 503 server trouble. Errors are FastAPI's
//! `{"detail": ...}`. Results use XAgent's wrapping: plain strings, numbers,
//! booleans and lists as they are, objects as `{"type":"simple","data":...}`,
//! bytes as `{"type":"binary","media_type","name","data":<base64>}`, several
//! items as `{"type":"composite","data":[...]}`.

use std::sync::Arc;

use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router, routing};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::body::JsonBody;
use super::workspace::{self, WorkspaceError};
use crate::catalog::ToolEntry;
use crate::dispatch::CallOptions;
use crate::sessions::Session;
use crate::tool::{Content, ErrorKind};

/// The session cookie XAgent's client keeps.
pub const COOKIE: &str = "node_id";
/// At most this many tools are listed per env (XAgent's limit).
const TOOLS_PER_ENV: usize = 50;

pub fn routes(max_upload_bytes: usize) -> Router<AppState> {
    Router::new()
        .route("/get_cookie", routing::post(get_cookie))
        // Seed 001's name for it.
        .route("/get_cookies", routing::post(get_cookie))
        .route("/reconnect_session", routing::post(reconnect_session))
        .route("/close_session", routing::post(close_session))
        .route("/release_session", routing::post(release_session))
        .route("/get_available_tools", routing::post(get_available_tools))
        .route("/retrieving_tools", routing::post(retrieving_tools))
        .route(
            "/get_json_schema_for_tools",
            routing::post(schema_for_tools),
        )
        .route("/get_json_schema_for_envs", routing::post(schema_for_envs))
        .route("/execute_tool", routing::post(execute_tool))
        .route(
            "/upload_file",
            routing::post(upload_file)
                .layer(axum::extract::DefaultBodyLimit::max(max_upload_bytes)),
        )
        .route("/download_file", routing::post(download_file))
        .route(
            "/get_workspace_structure",
            routing::post(workspace_structure),
        )
        .route("/download_workspace", routing::post(download_workspace))
        .route("/register_new_tool", routing::post(register_new_tool))
}

/// The routes of this surface (see [`routes`]), for [`detail_errors`].
pub const PATHS: &[&str] = &[
    "/get_cookie",
    "/get_cookies",
    "/reconnect_session",
    "/close_session",
    "/release_session",
    "/get_available_tools",
    "/retrieving_tools",
    "/get_json_schema_for_tools",
    "/get_json_schema_for_envs",
    "/execute_tool",
    "/upload_file",
    "/download_file",
    "/get_workspace_structure",
    "/download_workspace",
    "/register_new_tool",
];

/// Every error on an XAgent route in XAgent's (FastAPI's) shape,
/// `{"detail": message}`: answers of the layers all surfaces share (caller
/// tokens, body size and deadline, a wrong method) and of the shared body
/// extractor carry the native error body; they are reshaped here, so
/// XAgent's client always finds `detail`. Success answers pass untouched.
pub async fn detail_errors(request: Request, next: axum::middleware::Next) -> Response {
    if !PATHS.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let response = next.run(request).await;
    let status = response.status();
    if status.is_success() || status.as_u16() == 450 {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let detail = match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) if v.get("detail").is_some() => {
            return Response::from_parts(parts, axum::body::Body::from(bytes));
        }
        Ok(v) => match v.pointer("/error/message").and_then(Value::as_str) {
            Some(message) => message.to_owned(),
            None => v.to_string(),
        },
        Err(_) if !bytes.is_empty() => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => status.canonical_reason().unwrap_or("error").to_owned(),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(
        parts,
        axum::body::Body::from(json!({ "detail": detail }).to_string()),
    )
}

/// An XAgent-style error: `{"detail": ...}` with a status.
pub struct Detail(pub StatusCode, pub Value);

impl Detail {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Detail(status, Value::String(message.into()))
    }
}

impl IntoResponse for Detail {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "detail": self.1 }))).into_response()
    }
}

impl From<super::error::ApiError> for Detail {
    fn from(e: super::error::ApiError) -> Self {
        Detail::new(e.status, e.message)
    }
}

impl From<WorkspaceError> for Detail {
    fn from(e: WorkspaceError) -> Self {
        let status = match e {
            WorkspaceError::BadPath(_) => StatusCode::UNPROCESSABLE_ENTITY,
            WorkspaceError::NotFound(_) => StatusCode::NOT_FOUND,
            WorkspaceError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            WorkspaceError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Detail::new(status, e.to_string())
    }
}

fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.trim().trim_matches('"').to_owned())
}

fn set_cookie(response: &mut Response, id: &str) {
    let cookie = format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Lax");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// The cookie's session; it must exist (opened by `/get_cookie`).
fn session(state: &AppState, headers: &HeaderMap) -> Result<Arc<Session>, Detail> {
    let Some(id) = cookie_value(headers) else {
        return Err(Detail::new(
            StatusCode::BAD_REQUEST,
            "no session: call /get_cookie first and send its `node_id` cookie",
        ));
    };
    let sessions = state.dispatcher.sessions();
    match sessions.get(&id) {
        Some(_) => sessions
            .open(Some(&id))
            .map(|(s, _)| s)
            .map_err(|e| Detail::from(super::error::ApiError::from(e))),
        None => Err(Detail::new(
            StatusCode::BAD_REQUEST,
            format!(
                "unknown session `{id}` (closed, released or expired): call /get_cookie or /reconnect_session"
            ),
        )),
    }
}

async fn get_cookie(State(state): State<AppState>) -> Result<Response, Detail> {
    let (session, _) = state
        .dispatcher
        .sessions()
        .open(None)
        .map_err(|e| Detail::from(super::error::ApiError::from(e)))?;
    let mut response =
        Json(json!({"message": "session created", COOKIE: session.id()})).into_response();
    set_cookie(&mut response, session.id());
    Ok(response)
}

async fn reconnect_session(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, Detail> {
    let id = cookie_value(&headers);
    let (session, created) = state
        .dispatcher
        .sessions()
        .open(id.as_deref())
        .map_err(|e| Detail::from(super::error::ApiError::from(e)))?;
    let message = if created {
        "session recreated (its earlier state is gone)"
    } else {
        "session reconnected"
    };
    let mut response = Json(json!({"message": message, COOKIE: session.id()})).into_response();
    set_cookie(&mut response, session.id());
    Ok(response)
}

/// Stop the session's nodes; its workspace stays (the sessions' release).
async fn close_session(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, Detail> {
    let session = session(&state, &headers)?;
    state.dispatcher.sessions().release(session.id()).await;
    Ok(Json(
        json!({"message": "session closed", COOKIE: session.id()}),
    ))
}

/// Delete the session: its nodes and its workspace (the sessions' close).
async fn release_session(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, Detail> {
    let session = session(&state, &headers)?;
    let id = session.id().to_owned();
    drop(session);
    state.dispatcher.sessions().close(&id).await.map_err(|e| {
        Detail::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot delete the workspace: {e}"),
        )
    })?;
    Ok(Json(json!({"message": "session released", COOKIE: id})))
}

/// A tool as XAgent's `tools_json` lists it (an OpenAI function).
pub fn tool_json(t: &ToolEntry) -> Value {
    json!({
        "name": t.id,
        "description": t.descriptor.description,
        "parameters": t.descriptor.input_schema,
    })
}

async fn get_available_tools(State(state): State<AppState>) -> Json<Value> {
    let catalog = state.dispatcher.catalog();
    let tools = catalog.tools();
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
struct RetrieveRequest {
    question: String,
    #[serde(default = "default_top_k")]
    top_k: usize,
}

fn default_top_k() -> usize {
    5
}

async fn retrieving_tools(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<RetrieveRequest>,
) -> Json<Value> {
    let catalog = state.dispatcher.catalog();
    let ids = state
        .retriever
        .search(catalog, &req.question, req.top_k.min(100));
    let tools_json: Vec<Value> = ids
        .iter()
        .filter_map(|id| catalog.get(id))
        .map(|t| tool_json(&t))
        .collect();
    Json(json!({"retrieved_tools": ids, "tools_json": tools_json}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolNames {
    /// `tools` in seed 001's description of the protocol.
    #[serde(alias = "tools")]
    tool_names: Vec<String>,
}

async fn schema_for_tools(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<ToolNames>,
) -> Json<Value> {
    let catalog = state.dispatcher.catalog();
    let (mut found, mut missing) = (Vec::new(), Vec::new());
    for name in req.tool_names {
        match catalog.get(&name) {
            Some(t) => found.push(tool_json(&t)),
            None => missing.push(name),
        }
    }
    Json(json!({"tools_json": found, "missing_tools": missing}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvNames {
    /// `envs` in seed 001's description of the protocol.
    #[serde(alias = "envs")]
    env_names: Vec<String>,
}

async fn schema_for_envs(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<EnvNames>,
) -> Json<Value> {
    let catalog = state.dispatcher.catalog();
    let tools = catalog.tools();
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
struct ExecuteRequest {
    /// `tool` in seed 001's description of the protocol.
    #[serde(alias = "tool")]
    tool_name: String,
    /// `parameters` in seed 001's description of the protocol.
    #[serde(default, alias = "parameters")]
    arguments: Option<Value>,
    #[serde(default)]
    env_name: Option<String>,
}

async fn execute_tool(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, Detail> {
    let req: ExecuteRequest = super::body::parse(&body).map_err(|e| {
        // FastAPI answers a malformed body with 422.
        Detail::new(StatusCode::UNPROCESSABLE_ENTITY, e.message)
    })?;
    let session = session(&state, &headers)?;
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
    let tool = state.dispatcher.catalog().get(&id);
    let result = state
        .dispatcher
        .dispatch(&session, &id, arguments, CallOptions::default())
        .await;
    match result {
        Ok(out) => {
            // A tool that says it is not finished (`"finished": false`) and
            // names its continuation: XAgent's 450 retry.
            if let (Some(tool), [.., Content::Json(v)]) = (&tool, out.content.as_slice())
                && v.get("finished") == Some(&Value::Bool(false))
                && let Some(next) = &tool.descriptor.continue_with
            {
                return Ok((
                    StatusCode::from_u16(450).expect("450 is a valid status"),
                    Json(json!({"detail": {
                        "type": "retry",
                        "next_calling": crate::tool::tool_id(&tool.toolkit.name, next),
                        "arguments": {},
                        "partial": v,
                    }})),
                )
                    .into_response());
            }
            Ok(Json(wrap(&out.content)).into_response())
        }
        Err(e) => {
            let status = match e.kind() {
                ErrorKind::NotFound => StatusCode::NOT_FOUND,
                ErrorKind::InvalidInput => StatusCode::UNPROCESSABLE_ENTITY,
                ErrorKind::Overloaded | ErrorKind::BackendUnavailable => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            let rendered = super::error::ApiError::from(e);
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

async fn print_tree(session: &Arc<Session>, arguments: &Value) -> Result<Response, Detail> {
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

/// Run `work` on the session's workspace (created if need be) on the
/// blocking pool: file-system work never runs on a request thread.
async fn in_workspace<T: Send + 'static>(
    session: &Arc<Session>,
    work: impl FnOnce(&std::path::Path) -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, Detail> {
    let session = session.clone();
    let done = tokio::task::spawn_blocking(move || match session.workspace() {
        Ok(dir) => work(dir).map_err(Detail::from),
        Err(e) => Err(Detail::from(super::error::ApiError::from(e))),
    })
    .await;
    done.map_err(|e| Detail::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
}

/// XAgent's wrapping of a result.
pub fn wrap(content: &[Content]) -> Value {
    match content {
        [] => Value::Null,
        [one] => wrap_item(one),
        many => {
            json!({"type": "composite", "data": many.iter().map(wrap_item).collect::<Vec<_>>()})
        }
    }
}

fn wrap_item(c: &Content) -> Value {
    match c {
        Content::Text(t) => Value::String(t.clone()),
        Content::Json(v @ Value::Object(_)) => json!({"type": "simple", "data": v}),
        Content::Json(v) => v.clone(),
        Content::Binary {
            media_type,
            data,
            name,
        } => super::native::binary_json(media_type, data, name.as_deref()),
    }
}

async fn upload_file(
    State(state): State<AppState>,
    headers: HeaderMap,
    request: Request,
) -> Result<Json<Value>, Detail> {
    let session = session(&state, &headers)?;
    let mut form = Multipart::from_request(request, &())
        .await
        .map_err(|e| Detail::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let (mut file, mut file_name, mut dir) = (None, None, None);
    while let Some(field) = form
        .next_field()
        .await
        .map_err(|e| Detail::new(e.status(), e.body_text()))?
    {
        match field.name().unwrap_or_default() {
            "file" => {
                let name = field.file_name().map(str::to_owned);
                let bytes = field
                    .bytes()
                    .await
                    .map_err(|e| Detail::new(e.status(), e.body_text()))?;
                file = Some((name, bytes));
            }
            "filename" => {
                file_name = Some(
                    field
                        .text()
                        .await
                        .map_err(|e| Detail::new(e.status(), e.body_text()))?,
                )
            }
            "path" => {
                dir = Some(
                    field
                        .text()
                        .await
                        .map_err(|e| Detail::new(e.status(), e.body_text()))?,
                )
            }
            _ => {}
        }
    }
    let Some((sent_name, bytes)) = file else {
        return Err(Detail::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "no `file` field in the form",
        ));
    };
    let name = file_name.or(sent_name).ok_or_else(|| {
        Detail::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the upload has no file name",
        )
    })?;
    let path = match dir {
        Some(d) if !d.is_empty() => format!("{}/{name}", d.trim_end_matches('/')),
        _ => name,
    };
    let size = bytes.len();
    let written = in_workspace(&session, move |ws| workspace::write(ws, &path, &bytes)).await?;
    Ok(Json(
        json!({"message": "Upload Success!", "file_path": written, "size": size}),
    ))
}

#[derive(Deserialize)]
struct DownloadRequest {
    file_path: String,
    #[serde(default)]
    #[allow(dead_code)]
    file_type: Option<String>,
}

async fn download_file(
    State(state): State<AppState>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<DownloadRequest>,
) -> Result<Response, Detail> {
    let session = session(&state, &headers)?;
    let max = state.limits.max_upload_bytes;
    let (name, bytes) =
        in_workspace(&session, move |ws| workspace::read(ws, &req.file_path, max)).await?;
    let disposition = format!("attachment; filename=\"{}\"", name.replace('"', ""));
    let mut response = bytes.into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(response)
}

async fn workspace_structure(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, Detail> {
    let session = session(&state, &headers)?;
    Ok(Json(in_workspace(&session, workspace::tree).await?))
}

async fn download_workspace(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, Detail> {
    let session = session(&state, &headers)?;
    let limit = state.limits.max_upload_bytes.saturating_mul(4);
    let zip = in_workspace(&session, move |ws| workspace::zip(ws, limit)).await?;
    let mut response = zip.into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/zip"),
    );
    h.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"workspace.zip\""),
    );
    Ok(response)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterRequest {
    /// The plugin name.
    tool_name: String,
    /// The component, base64.
    code: String,
    #[serde(default)]
    manifest: Option<String>,
}

/// In toolhost, "registering a tool" is uploading a component (admin token).
async fn register_new_tool(
    State(state): State<AppState>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<RegisterRequest>,
) -> Result<Json<Value>, Detail> {
    super::admin::check(state.admin_token.as_ref(), &headers)?;
    let component = base64::engine::general_purpose::STANDARD
        .decode(req.code.trim())
        .map_err(|e| {
            Detail::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("`code` must be the component in base64: {e}"),
            )
        })?;
    let status = state
        .plugins
        .upload(
            &req.tool_name,
            component,
            req.manifest.map(String::into_bytes),
        )
        .await
        .map_err(|e| Detail::from(super::error::ApiError::from(e)))?;
    let catalog = state.dispatcher.catalog();
    let tools: Vec<Value> = status
        .tools
        .iter()
        .filter_map(|id| catalog.get(id))
        .map(|t| tool_json(&t))
        .collect();
    Ok(Json(json!({"plugin": status, "tools_json": tools})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_follows_xagent() {
        assert_eq!(wrap(&[Content::Text("hi".into())]), json!("hi"));
        assert_eq!(wrap(&[Content::Json(json!(3))]), json!(3));
        assert_eq!(wrap(&[Content::Json(json!([1]))]), json!([1]));
        assert_eq!(
            wrap(&[Content::Json(json!({"a": 1}))]),
            json!({"type": "simple", "data": {"a": 1}})
        );
        let png = Content::Binary {
            media_type: "image/png".into(),
            data: vec![1, 2],
            name: None,
        };
        assert_eq!(wrap(std::slice::from_ref(&png))["type"], "binary");
        assert_eq!(wrap(std::slice::from_ref(&png))["data"], "AQI=");
        // XAgent's client appends `.png` to `name` and writes a file of that
        // name: `null` made it raise.
        let name = wrap(std::slice::from_ref(&png))["name"].clone();
        assert!(name.as_str().is_some_and(|n| n.ends_with(".png")), "{name}");
        let both = wrap(&[Content::Json(json!({"a": 1})), png]);
        assert_eq!(both["type"], "composite");
        assert_eq!(both["data"][1]["media_type"], "image/png");
    }

    #[test]
    fn cookies() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; node_id=abc123; c=d"),
        );
        assert_eq!(cookie_value(&h).as_deref(), Some("abc123"));
        assert_eq!(cookie_value(&HeaderMap::new()), None);
    }
}
