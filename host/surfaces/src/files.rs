//! The native surface's workspace files, under the caller's own session:
//!
//! - `GET /sessions/{id}/files`: its files (`path`, `size`, `modified`);
//! - `PUT /sessions/{id}/files/{path}`: the body, streamed to disk (at most
//!   `[plugins] max_upload_mb`; parents made; the session made if new);
//! - `GET /sessions/{id}/files/{path}`: the file, streamed;
//! - `DELETE /sessions/{id}/files/{path}`.
//!
//! The session id is its caller's ([`crate::auth::Who`]): another caller's
//! session is unknown here, as one never made. Paths are checked as on
//! every workspace route ([`workspace`]: no `..`, no absolute path, no
//! symlink out).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router, routing};
use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use crate::auth::Who;
use crate::error::ApiError;
use crate::state::AppState;
use crate::workspace::{self, Upload, WorkspaceError};
use toolhost_core::callers::Caller;
use toolhost_core::sessions::Session;

/// Files listed at most.
const MAX_LISTED: usize = 10_000;

pub fn routes(max_upload_bytes: usize) -> Router<AppState> {
    Router::new()
        .route("/sessions/{id}/files", routing::get(list))
        .route(
            "/sessions/{id}/files/{*path}",
            routing::get(download)
                .put(move |state, who, ids, request| {
                    upload(state, who, ids, request, max_upload_bytes)
                })
                .delete(delete),
        )
        // The upload's own limit, checked as it streams.
        .layer(axum::extract::DefaultBodyLimit::disable())
}

/// The caller's open session `id` (404 as for one never made).
fn existing(state: &AppState, who: &Caller, id: &str) -> Result<Arc<Session>, ApiError> {
    Ok(state.dispatcher.sessions().resume(who, id)?)
}

async fn list(
    State(state): State<AppState>,
    Who(who): Who,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let session = existing(&state, &who, &id)?;
    let files = tokio::task::spawn_blocking(move || session.files(MAX_LISTED + 1))
        .await
        .unwrap_or_default();
    let truncated = files.len() > MAX_LISTED;
    let files: Vec<Value> = files
        .iter()
        .take(MAX_LISTED)
        .map(|f| {
            let modified = f
                .modified
                .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_secs());
            json!({"path": f.path, "size": f.size, "modified": modified})
        })
        .collect();
    Ok(Json(
        json!({"session": id, "files": files, "truncated": truncated}),
    ))
}

async fn upload(
    State(state): State<AppState>,
    Who(who): Who,
    Path((id, path)): Path<(String, String)>,
    request: Request,
    max: usize,
) -> Result<Response, ApiError> {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        let (parts, body) = request.into_parts();
        crate::body::drain_refused(&mut body.into_data_stream()).await;
        let refused = too_large(max).into_response();
        return Ok(crate::body::close_unread(&parts.headers, refused));
    }
    let (session, _) = state.dispatcher.sessions().open(&who, Some(&id))?;
    let target = path.clone();
    let (upload, file) =
        workspace::in_session(&session, move |root| Upload::create(root, &target)).await?;
    let mut file = tokio::fs::File::from_std(file);
    let (parts, body) = request.into_parts();
    let mut body = body.into_data_stream();
    let mut written = 0usize;
    let streamed: Result<(), ApiError> = async {
        while let Some(chunk) = body.next().await {
            let chunk =
                chunk.map_err(|e| ApiError::bad_request(format!("the body failed: {e}")))?;
            written += chunk.len();
            if written > max {
                return Err(too_large(max));
            }
            file.write_all(&chunk).await.map_err(WorkspaceError::from)?;
        }
        Ok(file.flush().await.map_err(WorkspaceError::from)?)
    }
    .await;
    drop(file);
    let done = tokio::task::spawn_blocking(move || match streamed {
        Ok(()) => upload.finish().map_err(ApiError::from),
        Err(e) => {
            upload.abandon();
            Err(e)
        }
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    let path = match done {
        Ok(path) => path,
        Err(e) => {
            // What the client is still sending is read and dropped first, so
            // that it reads the refusal rather than a reset.
            crate::body::drain_refused(&mut body).await;
            return Ok(crate::body::close_unread(&parts.headers, e.into_response()));
        }
    };
    Ok((
        StatusCode::CREATED,
        Json(json!({"session": id, "path": path, "size": written})),
    )
        .into_response())
}

fn too_large(max: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_input",
        format!("the file is over the {max}-byte upload limit ([plugins] max_upload_mb)"),
    )
}

async fn download(
    State(state): State<AppState>,
    Who(who): Who,
    Path((id, path)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let session = existing(&state, &who, &id)?;
    let (file, size) =
        workspace::in_session(&session, move |root| workspace::open_file(root, &path)).await?;
    let stream = tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file));
    let mut response = Body::from_stream(stream).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    Ok(response)
}

async fn delete(
    State(state): State<AppState>,
    Who(who): Who,
    Path((id, path)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let session = existing(&state, &who, &id)?;
    let target = path.clone();
    workspace::in_session(&session, move |root| workspace::remove(root, &target)).await?;
    Ok(Json(json!({"session": id, "deleted": path})))
}
