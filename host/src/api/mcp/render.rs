//! A dispatch result as MCP renders it: content blocks, structured content,
//! resource links to the files a call wrote, `_meta`; failures as `isError`
//! results; an unknown tool as the JSON-RPC error the spec names.

use base64::Engine as _;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject, Resource, ResourceContents};
use serde_json::{Value, json};

use super::features;
use crate::api::error::ApiError;
use crate::dispatch::CallOutput;
use crate::tool::{CallError, Content};

/// Resource links a tool result carries, at most (to the files it wrote).
const MAX_LINKS: usize = 32;

pub(crate) fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(
        format!("unknown tool `{name}`"),
        Some(json!({"kind": "not_found"})),
    )
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
