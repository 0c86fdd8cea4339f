//! XAgent's workspace files (upload, download, structure, archive) and tool
//! registration.

use super::*;
use crate::auth::Who;

pub(super) async fn upload_file(
    State(state): State<AppState>,
    Who(who): Who,
    headers: HeaderMap,
    request: Request,
) -> Result<Json<Value>, Detail> {
    let session = session(&state, &who, &headers)?;
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
pub(super) struct DownloadRequest {
    file_path: String,
    #[serde(default)]
    #[allow(dead_code)]
    file_type: Option<String>,
}

pub(super) async fn download_file(
    State(state): State<AppState>,
    Who(who): Who,
    headers: HeaderMap,
    JsonBody(req): JsonBody<DownloadRequest>,
) -> Result<Response, Detail> {
    let session = session(&state, &who, &headers)?;
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

pub(super) async fn workspace_structure(
    State(state): State<AppState>,
    Who(who): Who,
    headers: HeaderMap,
) -> Result<Json<Value>, Detail> {
    let session = session(&state, &who, &headers)?;
    Ok(Json(in_workspace(&session, workspace::tree).await?))
}

pub(super) async fn download_workspace(
    State(state): State<AppState>,
    Who(who): Who,
    headers: HeaderMap,
) -> Result<Response, Detail> {
    let session = session(&state, &who, &headers)?;
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
pub(super) struct RegisterRequest {
    /// The plugin name.
    tool_name: String,
    /// The component, base64.
    code: String,
    #[serde(default)]
    manifest: Option<String>,
}

/// In toolhost, "registering a tool" is uploading a component (admin token).
pub(super) async fn register_new_tool(
    State(state): State<AppState>,
    crate::auth::Who(who): crate::auth::Who,
    headers: HeaderMap,
    JsonBody(req): JsonBody<RegisterRequest>,
) -> Result<Json<Value>, Detail> {
    crate::auth::check(state.admin_token.as_ref(), &headers, &who)?;
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
        .map_err(|e| Detail::from(crate::error::ApiError::from(e)))?;
    let catalog = state.dispatcher.catalog();
    let tools: Vec<Value> = status
        .tools
        .iter()
        .filter_map(|id| catalog.get(id))
        .map(|t| tool_json(&t))
        .collect();
    Ok(Json(json!({"plugin": status, "tools_json": tools})))
}
