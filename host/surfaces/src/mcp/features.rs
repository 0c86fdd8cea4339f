//! MCP prompts, resources and completion, in rmcp's types.
//!
//! - Prompts: those the plugins declare ([`toolhost_core::declared`]), named
//!   `<plugin>_<name>` as their tools are.
//! - Resources: the files of the caller's session workspace, as
//!   `toolhost://workspace/<path>` (listed a page at a time, read as text or
//!   base64; every access goes through [`workspace`], which cannot leave the
//!   workspace), then the resources and resource templates plugins declare.
//! - Completion: a prompt argument's declared values, a template variable's
//!   declared values, and workspace paths for the workspace template.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, Prompt, PromptArgument, PromptMessage,
    ReadResourceResult, Reference, Resource, ResourceContents, ResourceTemplate, Role,
};
use serde_json::json;

use crate::workspace::{self, WorkspaceError};
use toolhost_core::catalog::Catalog;
use toolhost_core::declared::{self, Body, Rendered};
use toolhost_core::input::{Kind, Question};
use toolhost_core::sessions::Session;

/// Where the session workspace's files live as resources.
pub const WORKSPACE_PREFIX: &str = "toolhost://workspace/";
/// The workspace files' URI template.
pub const WORKSPACE_TEMPLATE: &str = "toolhost://workspace/{+path}";
/// Resources per `resources/list` page.
const PAGE: usize = 100;
/// Largest workspace file `resources/read` returns.
pub const MAX_READ_BYTES: usize = 16 << 20;
/// Files of a workspace listed at most (over all pages).
const MAX_FILES: usize = 10_000;

/// Every declared prompt: (served name, prompt).
fn prompts(catalog: &Catalog) -> Vec<(String, declared::Prompt)> {
    let mut out = Vec::new();
    for kit in catalog.toolkits() {
        if let Some(d) = kit.toolkit.declared() {
            for p in &d.prompts {
                out.push((format!("{}_{}", kit.name, p.name), p.clone()));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

pub fn list_prompts(catalog: &Catalog) -> ListPromptsResult {
    let prompts = prompts(catalog)
        .into_iter()
        .map(|(name, p)| {
            let arguments = p
                .arguments
                .iter()
                .map(|a| {
                    let mut arg = PromptArgument::new(&a.name).with_required(a.required);
                    if let Some(d) = &a.description {
                        arg = arg.with_description(d);
                    }
                    arg
                })
                .collect::<Vec<_>>();
            let mut prompt = Prompt::new(
                name,
                p.description.clone(),
                (!arguments.is_empty()).then_some(arguments),
            );
            if let Some(t) = &p.title {
                prompt = prompt.with_title(t);
            }
            prompt
        })
        .collect();
    ListPromptsResult::with_all_items(prompts)
}

/// The question for the required arguments of prompt `name` missing from
/// `arguments`: one form, a string field each (an enum where the manifest
/// lists values); none when nothing is missing or the prompt is unknown.
pub fn missing_arguments(
    catalog: &Catalog,
    name: &str,
    arguments: &serde_json::Map<String, serde_json::Value>,
) -> Option<Question> {
    let (_, prompt) = prompts(catalog).into_iter().find(|(n, _)| n == name)?;
    let missing: Vec<&declared::Argument> = prompt
        .arguments
        .iter()
        .filter(|a| a.required && !arguments.contains_key(&a.name))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let mut properties = serde_json::Map::new();
    for a in &missing {
        let mut field = json!({"type": "string", "title": a.name});
        if let Some(d) = &a.description {
            field["description"] = json!(d);
        }
        if !a.values.is_empty() {
            field["enum"] = json!(a.values);
        }
        properties.insert(a.name.clone(), field);
    }
    let names: Vec<&str> = missing.iter().map(|a| a.name.as_str()).collect();
    Some(Question {
        key: "arguments".into(),
        kind: Kind::Form,
        params: json!({
            "message": format!("The prompt `{name}` needs: {}.", names.join(", ")),
            "requestedSchema": {"type": "object", "properties": properties, "required": names},
        }),
    })
}

pub fn get_prompt(
    catalog: &Catalog,
    name: &str,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
) -> Result<GetPromptResult, McpError> {
    let Some((_, prompt)) = prompts(catalog).into_iter().find(|(n, _)| n == name) else {
        return Err(McpError::invalid_params(
            format!("unknown prompt `{name}`"),
            Some(json!({"kind": "not_found"})),
        ));
    };
    let arguments: BTreeMap<String, String> = arguments
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            (k, v)
        })
        .collect();
    let messages = prompt
        .render(&arguments)
        .map_err(|e| McpError::invalid_params(format!("prompt `{name}`: {e}"), None))?
        .into_iter()
        .map(|(role, m)| {
            let role = match role {
                declared::Role::User => Role::User,
                declared::Role::Assistant => Role::Assistant,
            };
            let content = match m {
                Rendered::Text(t) => rmcp::model::ContentBlock::text(t),
                Rendered::Image { data, mime_type } => {
                    rmcp::model::ContentBlock::image(data, mime_type)
                }
                Rendered::Resource {
                    uri,
                    body,
                    mime_type,
                } => rmcp::model::ContentBlock::resource(contents(uri, body, mime_type)),
            };
            PromptMessage::new(role, content)
        })
        .collect();
    let mut result = GetPromptResult::new(messages);
    result.description = prompt.description.clone();
    Ok(result)
}

fn contents(uri: String, body: Body, mime_type: Option<String>) -> ResourceContents {
    let c = match body {
        Body::Text(t) => ResourceContents::text(t, uri),
        Body::Blob(b) => ResourceContents::blob(b, uri),
    };
    match mime_type {
        Some(m) => c.with_mime_type(m),
        None => c,
    }
}

/// One page of resources: the workspace's files, then the declared ones.
/// `cursor` is the index of the page's first item.
pub fn list_resources(
    catalog: &Catalog,
    session: &Session,
    cursor: Option<&str>,
) -> Result<ListResourcesResult, McpError> {
    let start: usize = match cursor {
        None => 0,
        Some(c) => c
            .parse()
            .map_err(|_| McpError::invalid_params(format!("invalid cursor `{c}`"), None))?,
    };
    let mut all: Vec<Resource> = workspace_files(session)
        .into_iter()
        .map(|(path, size)| {
            Resource::new(format!("{WORKSPACE_PREFIX}{path}"), path.clone())
                .with_mime_type(media_type(&path))
                .with_size(size)
        })
        .collect();
    for kit in catalog.toolkits() {
        if let Some(d) = kit.toolkit.declared() {
            for r in &d.resources {
                let mut res = Resource::new(&r.uri, &r.name);
                if let Some(m) = &r.mime_type {
                    res = res.with_mime_type(m);
                }
                if let Some(d) = &r.description {
                    res = res.with_description(d);
                }
                if let Some(t) = &r.title {
                    res = res.with_title(t);
                }
                all.push(res);
            }
        }
    }
    let page: Vec<Resource> = all.iter().skip(start).take(PAGE).cloned().collect();
    let mut result = ListResourcesResult::with_all_items(page);
    if start + PAGE < all.len() {
        result.next_cursor = Some((start + PAGE).to_string());
    }
    Ok(result)
}

pub fn list_resource_templates(catalog: &Catalog) -> ListResourceTemplatesResult {
    let mut all = vec![
        ResourceTemplate::new(WORKSPACE_TEMPLATE, "workspace")
            .with_description("A file of this session's workspace, by its relative path."),
    ];
    for kit in catalog.toolkits() {
        if let Some(d) = kit.toolkit.declared() {
            for t in &d.resource_templates {
                let mut tpl = ResourceTemplate::new(&t.uri_template, &t.name);
                if let Some(m) = &t.mime_type {
                    tpl = tpl.with_mime_type(m);
                }
                if let Some(d) = &t.description {
                    tpl = tpl.with_description(d);
                }
                all.push(tpl);
            }
        }
    }
    ListResourceTemplatesResult::with_all_items(all)
}

fn not_found(uri: &str) -> McpError {
    // -32602 with the URI in `data`, as 2026-07-28 asks (SEP-2164).
    McpError::invalid_params(
        format!("no resource `{uri}`"),
        Some(json!({"uri": uri, "kind": "not_found"})),
    )
}

/// The workspace path a resource URI names, if it is a workspace URI.
pub fn workspace_path(uri: &str) -> Option<&str> {
    uri.strip_prefix(WORKSPACE_PREFIX)
}

pub async fn read_resource(
    catalog: &Catalog,
    session: Arc<Session>,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    if let Some(path) = workspace_path(uri) {
        let root = session.workspace_path().to_owned();
        let path = path.to_owned();
        let read = tokio::task::spawn_blocking(move || {
            workspace::read(&root, &path, MAX_READ_BYTES).map(|(_, b)| (path, b))
        })
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        return match read {
            Ok((path, bytes)) => {
                let mime = media_type(&path);
                let c = match String::from_utf8(bytes) {
                    Ok(text) if !text.contains('\0') => ResourceContents::text(text, uri),
                    Ok(text) => ResourceContents::blob(
                        base64::engine::general_purpose::STANDARD.encode(text),
                        uri,
                    ),
                    Err(e) => ResourceContents::blob(
                        base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
                        uri,
                    ),
                };
                Ok(ReadResourceResult::new(vec![c.with_mime_type(mime)]))
            }
            Err(WorkspaceError::NotFound(_)) => Err(not_found(uri)),
            Err(WorkspaceError::BadPath(p)) => Err(McpError::invalid_params(
                format!("invalid path `{p}`: a relative path inside the workspace"),
                Some(json!({"uri": uri, "kind": "invalid_input"})),
            )),
            Err(WorkspaceError::TooLarge(m)) => Err(McpError::invalid_params(m, None)),
            Err(e) => {
                tracing::warn!(error = %e, "MCP: workspace read failed");
                Err(McpError::internal_error("workspace read failed", None))
            }
        };
    }
    for kit in catalog.toolkits() {
        let Some(d) = kit.toolkit.declared() else {
            continue;
        };
        if let Some(r) = d.resources.iter().find(|r| r.uri == uri) {
            let c = contents(uri.to_owned(), r.body(), r.mime_type.clone());
            return Ok(ReadResourceResult::new(vec![c]));
        }
        for t in &d.resource_templates {
            if let Some(body) = t.read(uri) {
                let c = contents(uri.to_owned(), body, t.mime_type.clone());
                return Ok(ReadResourceResult::new(vec![c]));
            }
        }
    }
    Err(not_found(uri))
}

/// Relative paths and sizes of the workspace's regular files, sorted (no
/// symlink followed); none when it does not exist yet.
pub fn workspace_files(session: &Session) -> Vec<(String, u64)> {
    session
        .files(MAX_FILES)
        .into_iter()
        .map(|f| (f.path, f.size))
        .collect()
}

/// A media type from a file name's extension.
pub fn media_type(path: &str) -> String {
    let ext = path
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "log" | "rs" | "py" | "js" | "ts" | "c" | "h" | "sh" | "toml" | "yaml" | "yml" => {
            "text/plain"
        }
        "md" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "xml" => "application/xml",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        "zip" => "application/zip",
        _ => "application/octet-stream",
    }
    .to_owned()
}

/// Completion values: at most [`CompletionInfo::MAX_VALUES`] of `candidates`
/// starting with `prefix`.
fn complete_from(candidates: impl IntoIterator<Item = String>, prefix: &str) -> CompleteResult {
    let matching: Vec<String> = candidates
        .into_iter()
        .filter(|c| c.starts_with(prefix))
        .collect();
    let total = matching.len();
    let values: Vec<String> = matching
        .into_iter()
        .take(CompletionInfo::MAX_VALUES)
        .collect();
    let more = total > values.len();
    let info =
        CompletionInfo::with_pagination(values, Some(total as u32), more).unwrap_or_default();
    CompleteResult::new(info)
}

pub fn complete(
    catalog: &Catalog,
    session: Option<&Session>,
    request: &CompleteRequestParams,
) -> Result<CompleteResult, McpError> {
    let (arg, prefix) = (&request.argument.name, &request.argument.value);
    match &request.r#ref {
        Reference::Prompt(p) => {
            let Some((_, prompt)) = prompts(catalog).into_iter().find(|(n, _)| *n == p.name) else {
                return Err(McpError::invalid_params(
                    format!("unknown prompt `{}`", p.name),
                    None,
                ));
            };
            let values = prompt
                .arguments
                .iter()
                .find(|a| &a.name == arg)
                .map(|a| a.values.clone())
                .unwrap_or_default();
            Ok(complete_from(values, prefix))
        }
        Reference::Resource(r) if r.uri == WORKSPACE_TEMPLATE => {
            let files = session.map(workspace_files).unwrap_or_default();
            Ok(complete_from(files.into_iter().map(|(p, _)| p), prefix))
        }
        Reference::Resource(r) => {
            let values = catalog
                .toolkits()
                .iter()
                .filter_map(|k| k.toolkit.declared())
                .flat_map(|d| d.resource_templates.iter())
                .find(|t| t.uri_template == r.uri)
                .and_then(|t| t.values.get(arg).cloned())
                .unwrap_or_default();
            Ok(complete_from(values, prefix))
        }
        _ => Ok(CompleteResult::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_filters_by_prefix_and_caps_the_count() {
        let r = complete_from((0..150).map(|i| format!("v{i}")), "v1");
        // v1, v10..v19, v100..v149
        assert_eq!(r.completion.total, Some(61));
        assert_eq!(r.completion.values.len(), 61);
        let all = complete_from((0..150).map(|i| format!("v{i}")), "");
        assert_eq!(all.completion.values.len(), 100);
        assert_eq!(all.completion.has_more, Some(true));
    }

    #[test]
    fn workspace_uris_map_to_paths() {
        assert_eq!(
            workspace_path("toolhost://workspace/a/b.txt"),
            Some("a/b.txt")
        );
        assert_eq!(workspace_path("test://static-text"), None);
        assert_eq!(media_type("x/y.PNG"), "image/png");
    }
}
