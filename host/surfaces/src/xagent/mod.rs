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
//!
//! `tools` answers discovery and calls, `files` the workspace and tool
//! registration; this module the routes, errors, cookie and sessions.

mod files;
mod tools;

use crate::auth::Who;
use crate::parked::*;
pub use crate::parked::{AWAIT_CALL, Parked};
use files::*;
use toolhost_core::callers::Caller;
use tools::*;
pub use tools::{PRINT_TREE, tool_json, wrap};

use std::sync::Arc;

use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router, routing};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use super::body::JsonBody;
use super::workspace::{self, WorkspaceError};
use crate::state::AppState;
use toolhost_core::catalog::ToolEntry;
use toolhost_core::dispatch::{CallOptions, CallOutput};
use toolhost_core::sessions::Session;
use toolhost_core::tool::{CallError, Content, ErrorKind};

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

/// Whether `path` is an XAgent route, whose every error is in XAgent's
/// (FastAPI's) shape, `{"detail": message}`: answers of the checks all
/// surfaces share (caller tokens, body size and deadline, a wrong method)
/// and of the shared body extractor carry the native error body; they are
/// reshaped by [`detail`], so XAgent's client always finds `detail`.
pub fn reshapes(path: &str) -> bool {
    PATHS.contains(&path)
}

/// An XAgent route's answer with its error in XAgent's shape
/// ([`reshapes`]); success answers (and 450) pass untouched.
pub async fn detail(response: Response) -> Response {
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
        Detail::from(super::error::ApiError::from(e))
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
fn session(state: &AppState, who: &Caller, headers: &HeaderMap) -> Result<Arc<Session>, Detail> {
    let Some(id) = cookie_value(headers) else {
        return Err(Detail::new(
            StatusCode::BAD_REQUEST,
            "no session: call /get_cookie first and send its `node_id` cookie",
        ));
    };
    state
        .dispatcher
        .sessions()
        .resume(who, &id)
        .map_err(|e| match e {
            toolhost_core::sessions::SessionError::Unknown(_) => Detail::new(
                StatusCode::BAD_REQUEST,
                format!("{e}: call /get_cookie or /reconnect_session"),
            ),
            e => Detail::from(super::error::ApiError::from(e)),
        })
}

async fn get_cookie(State(state): State<AppState>, Who(who): Who) -> Result<Response, Detail> {
    let (session, _) = state
        .dispatcher
        .sessions()
        .open(&who, None)
        .map_err(|e| Detail::from(super::error::ApiError::from(e)))?;
    let mut response =
        Json(json!({"message": "session created", COOKIE: session.client_id()})).into_response();
    set_cookie(&mut response, session.client_id());
    Ok(response)
}

async fn reconnect_session(
    State(state): State<AppState>,
    Who(who): Who,
    headers: HeaderMap,
) -> Result<Response, Detail> {
    let id = cookie_value(&headers);
    let (session, created) = state
        .dispatcher
        .sessions()
        .open(&who, id.as_deref())
        .map_err(|e| Detail::from(super::error::ApiError::from(e)))?;
    let message = if created {
        "session recreated (its earlier state is gone)"
    } else {
        "session reconnected"
    };
    let mut response =
        Json(json!({"message": message, COOKIE: session.client_id()})).into_response();
    set_cookie(&mut response, session.client_id());
    Ok(response)
}

/// Stop the session's nodes; its workspace stays (the sessions' release).
async fn close_session(
    State(state): State<AppState>,
    Who(who): Who,
    headers: HeaderMap,
) -> Result<Json<Value>, Detail> {
    let session = session(&state, &who, &headers)?;
    state.parked.forget_session(session.id());
    state.dispatcher.sessions().release(session.id()).await;
    Ok(Json(
        json!({"message": "session closed", COOKIE: session.client_id()}),
    ))
}

/// Delete the session: its nodes and its workspace (the sessions' close).
async fn release_session(
    State(state): State<AppState>,
    Who(who): Who,
    headers: HeaderMap,
) -> Result<Json<Value>, Detail> {
    let session = session(&state, &who, &headers)?;
    let (id, client_id) = (session.id().to_owned(), session.client_id().to_owned());
    drop(session);
    state.parked.forget_session(&id);
    state.dispatcher.sessions().close(&id).await.map_err(|e| {
        Detail::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot delete the workspace: {e}"),
        )
    })?;
    Ok(Json(
        json!({"message": "session released", COOKIE: client_id}),
    ))
}

/// [`workspace::in_session`], its failures in XAgent's shape.
async fn in_workspace<T: Send + 'static>(
    session: &Arc<Session>,
    work: impl FnOnce(&std::path::Path) -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, Detail> {
    Ok(workspace::in_session(session, work).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_core::tool::Content;

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
