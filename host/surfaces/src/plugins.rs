//! Plugin status and the admin routes that change the plugins directory.
//!
//! - `GET /plugins`, `GET /plugins/{name}`: status of each plugin (open to
//!   every caller, like `GET /tools`); the list says how many of each
//!   plugin's tools `[pins]` holds for the admin (`held`).
//! - `PUT /plugins/{name}`: upload a component, as the raw body
//!   (`Content-Type: application/wasm`) or as multipart form fields
//!   `component` and optional `manifest`. It is loaded first and written into
//!   the directory only when it loads.
//! - `DELETE /plugins/{name}`: remove the plugin's files and tools.
//!
//! The admin routes need the admin token (see [`super::auth`]).

use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router, routing};
use bytes::Bytes;
use serde_json::{Value, json};
use toolhost_core::plugins::admin::Proofs;

use super::auth;
use super::error::ApiError;
use crate::state::AppState;
use toolhost_core::plugins::ChangeError;

/// Room beyond the component's size limit for multipart framing and a manifest.
const UPLOAD_SLACK: usize = 256 << 10;
const TOO_LARGE: &str = "the upload is over the size limit ([plugins] max_upload_mb)";

pub fn routes(max_upload_bytes: usize) -> Router<AppState> {
    Router::new().route("/plugins", routing::get(list)).route(
        "/plugins/{name}",
        routing::get(get_one).put(upload).delete(delete).layer(
            axum::extract::DefaultBodyLimit::max(max_upload_bytes + UPLOAD_SLACK),
        ),
    )
}

async fn list(
    State(state): State<AppState>,
    engines: Option<axum::Extension<super::engines::Engines>>,
) -> Json<Value> {
    let engines = engines.map(|e| e.0).unwrap_or_default();
    // Each plugin's tools held for the admin by `[pins]` (super::pins).
    let pins = state.dispatcher.catalog().pins().cloned();
    let plugins: Vec<Value> = state
        .plugins
        .list()
        .into_iter()
        .map(|p| {
            let mut v = json!(p);
            if let (Some(pins), Some(name)) = (&pins, v["name"].as_str()) {
                v["held"] = json!(pins.held(name));
            }
            v
        })
        .collect();
    Json(json!({ "plugins": plugins, "engines": engines.list() }))
}

async fn get_one(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    state
        .plugins
        .get(&name)
        .map(|s| Json(json!(s)))
        .ok_or_else(|| ApiError::not_found(format!("no plugin `{name}`")))
}

impl From<ChangeError> for ApiError {
    fn from(e: ChangeError) -> Self {
        let status = match &e {
            ChangeError::InvalidName(_) => StatusCode::BAD_REQUEST,
            ChangeError::NotFound(_) => return ApiError::not_found(e.to_string()),
            ChangeError::ManifestNotText | ChangeError::Load { .. } => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ChangeError::Register { .. } => StatusCode::CONFLICT,
            ChangeError::Io(_) => {
                return toolhost_core::tool::CallError::Internal(e.to_string()).into();
            }
        };
        ApiError::new(status, "invalid_input", e.to_string())
    }
}

async fn upload(
    State(state): State<AppState>,
    Path(name): Path<String>,
    auth::Who(who): auth::Who,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, ApiError> {
    auth::check(state.admin_token.as_ref(), &headers, &who)?;
    // Refuse a declared oversize body before reading any of it.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > (state.limits.max_upload_bytes + UPLOAD_SLACK) as u64) {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_input",
            TOO_LARGE,
        ));
    }
    let is_multipart = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let (component, manifest, proofs) = if is_multipart {
        let multipart = Multipart::from_request(request, &())
            .await
            .map_err(|e| ApiError::new(e.status(), "invalid_input", e.body_text()))?;
        read_form(multipart).await?
    } else {
        let body = Bytes::from_request(request, &()).await.map_err(too_large)?;
        (body.to_vec(), None, Proofs::default())
    };
    if component.is_empty() {
        return Err(ApiError::bad_request(
            "no component: send it as the body (application/wasm) or as the multipart field `component`",
        ));
    }
    let existed = state.plugins.get(&name).is_some();
    let args = json!({"plugin": name, "bytes": component.len(), "manifest": manifest.is_some(), "signed": proofs.signature.is_some() || proofs.bundle.is_some()});
    let status = state
        .plugins
        .upload_signed(&name, component, manifest, proofs)
        .await
        .inspect_err(|e| state.audit(who.name(), "upload_plugin", args.clone(), &e.to_string()))?;
    state.audit(who.name(), "upload_plugin", args, "ok");
    let code = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((code, Json(json!(status))).into_response())
}

fn too_large(rejection: axum::extract::rejection::BytesRejection) -> ApiError {
    let status = rejection.status();
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        TOO_LARGE.to_owned()
    } else {
        format!("cannot read the upload: {rejection}")
    };
    ApiError::new(status, "invalid_input", message)
}

/// The `component` and optional `manifest`, `signature` (a cosign blob
/// signature) and `bundle` (a Sigstore bundle) fields of a multipart upload.
async fn read_form(mut form: Multipart) -> Result<(Vec<u8>, Option<Vec<u8>>, Proofs), ApiError> {
    let (mut component, mut manifest, mut proofs) = (None, None, Proofs::default());
    loop {
        let field = form.next_field().await.map_err(multipart_error)?;
        let Some(field) = field else { break };
        let name = field.name().unwrap_or_default().to_owned();
        let bytes = field.bytes().await.map_err(multipart_error)?.to_vec();
        match name.as_str() {
            "component" | "file" => component = Some(bytes),
            "manifest" => manifest = Some(bytes),
            "signature" => proofs.signature = Some(bytes),
            "bundle" => proofs.bundle = Some(bytes),
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown form field `{other}`: expected `component` and optional \
                     `manifest`, `signature` and `bundle`"
                )));
            }
        }
    }
    Ok((component.unwrap_or_default(), manifest, proofs))
}

fn multipart_error(e: axum::extract::multipart::MultipartError) -> ApiError {
    let status = e.status();
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        TOO_LARGE.to_owned()
    } else {
        e.body_text()
    };
    ApiError::new(status, "invalid_input", message)
}

async fn delete(
    State(state): State<AppState>,
    Path(name): Path<String>,
    auth::Who(who): auth::Who,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    auth::check(state.admin_token.as_ref(), &headers, &who)?;
    let outcome = state.plugins.delete(&name).await;
    let shown = outcome
        .as_ref()
        .map_or_else(ToString::to_string, |_| "ok".into());
    state.audit(who.name(), "delete_plugin", json!({"plugin": name}), &shown);
    outcome?;
    Ok(Json(json!({ "deleted": name })))
}
