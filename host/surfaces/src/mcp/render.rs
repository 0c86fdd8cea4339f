//! A dispatch result as MCP renders it: content blocks, structured content,
//! resource links to the files a call wrote, `_meta`; failures as `isError`
//! results; an unknown tool as the JSON-RPC error the spec names.

use base64::Engine as _;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject, Resource, ResourceContents};
use serde_json::{Value, json};

use super::features;
use crate::error::ApiError;
use toolhost_core::dispatch::CallOutput;
use toolhost_core::tool::{CallError, Content};

/// Resource links a tool result carries, at most (to the files it wrote).
const MAX_LINKS: usize = 32;

pub(crate) fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(
        format!("unknown tool `{name}`"),
        Some(json!({"kind": "not_found"})),
    )
}

/// A successful call as an MCP result: each item as its content block
/// (annotations and `_meta` kept), a [`Content::Structured`] item as
/// `structuredContent`; a result that is one JSON value is also
/// `structuredContent` (what `outputSchema` describes).
pub(crate) fn success(out: CallOutput) -> CallToolResult {
    let mut blocks: Vec<ContentBlock> = out.content.iter().filter_map(block).collect();
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
    let mut meta = source_meta(&out.content);
    let structured = Content::structured(&out.content).cloned();
    if let Some(v) = structured {
        result.structured_content = Some(v);
    } else if let [Content::Json(_)] = out.content.as_slice()
        && let Some(Content::Json(v)) = out.content.into_iter().next()
    {
        result.structured_content = Some(v);
    }
    meta.insert("toolhost/version".into(), Value::String(out.version));
    if let Some(by) = out.served_by {
        meta.insert("toolhost/served_by".into(), Value::String(by));
    }
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
    // A tool's own error result goes on as it came.
    let mut result = match e {
        CallError::Reported(items) => {
            let mut r = CallToolResult::error(items.iter().filter_map(block).collect());
            r.structured_content = Content::structured(items).cloned();
            r
        }
        _ => CallToolResult::error(vec![ContentBlock::text(rendered.text())]),
    };
    let mut meta = match e {
        CallError::Reported(items) => source_meta(items),
        _ => MetaObject::new(),
    };
    meta.insert("toolhost/error_kind".into(), json!(rendered.kind));
    result.meta = Some(meta);
    result
}

/// The result's own `_meta` its source gave ([`Content::Meta`]), to which
/// toolhost adds its `toolhost/...` keys.
fn source_meta(items: &[Content]) -> MetaObject {
    match Content::split_meta(items).1 {
        Some(Value::Object(map)) => MetaObject(map.clone()),
        _ => MetaObject::new(),
    }
}

/// One content item as an MCP content block; none for the structured
/// result (it is `structuredContent`).
fn block(c: &Content) -> Option<ContentBlock> {
    Some(match c {
        Content::Text(t) => ContentBlock::text(t.clone()),
        Content::Json(v) => ContentBlock::text(v.to_string()),
        Content::Structured(_) | Content::Meta(_) => return None,
        Content::Link(l) => {
            let mut v = json!({"type": "resource_link", "uri": l.uri, "name": l.name});
            for (key, value) in [
                ("title", &l.title),
                ("description", &l.description),
                ("mimeType", &l.mime_type),
            ] {
                if let Some(value) = value {
                    v[key] = json!(value);
                }
            }
            if let Some(size) = l.size {
                v["size"] = json!(size);
            }
            from_json(v)?
        }
        Content::Resource(r) => {
            let mut resource = json!({"uri": r.uri});
            if let Some(m) = &r.mime_type {
                resource["mimeType"] = json!(m);
            }
            if let Some(t) = &r.text {
                resource["text"] = json!(t);
            }
            if let Some(b) = &r.blob {
                resource["blob"] = json!(base64::engine::general_purpose::STANDARD.encode(b));
            }
            if let Some(m) = &r.meta {
                resource["_meta"] = m.clone();
            }
            from_json(json!({"type": "resource", "resource": resource}))?
        }
        Content::Annotated(a) => {
            let inner = block(&a.item)?;
            let mut v = serde_json::to_value(&inner).ok()?;
            if let Some(annotations) = &a.annotations {
                v["annotations"] = annotations.clone();
            }
            if let Some(meta) = &a.meta {
                v["_meta"] = meta.clone();
            }
            from_json(v).unwrap_or(inner)
        }
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
                    toolhost_core::tool::binary_file_name(media_type, data, name.as_deref())
                );
                ContentBlock::resource(
                    ResourceContents::blob(b64, uri).with_mime_type(media_type.clone()),
                )
            }
        }
    })
}

/// A content block from its MCP JSON (what rmcp would parse off the wire).
fn from_json(v: Value) -> Option<ContentBlock> {
    serde_json::from_value(v)
        .inspect_err(|e| tracing::warn!(error = %e, "a content item MCP cannot carry was left out"))
        .ok()
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

    /// Issue #35: a mounted server's result reaches an MCP caller unchanged.
    /// Every kind the spec has, with annotations and `_meta`, and
    /// `structuredContent` beside text, goes through the gateway's mapping
    /// (`mcpserver::client::into_content`) and back out through this
    /// renderer; the JSON is the server's, item for item.
    #[test]
    fn a_mounted_servers_result_is_rendered_unchanged() {
        let upstream = json!({
            "content": [
                {"type": "text", "text": "{\"path\":\"a.txt\"}",
                 "annotations": {"audience": ["user"], "priority": 0.5}},
                {"type": "text", "text": "plain"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png",
                 "_meta": {"example/origin": "camera"}},
                {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///tmp/a.txt", "name": "a.txt",
                 "title": "A", "description": "the file", "mimeType": "text/plain", "size": 6},
                {"type": "resource", "resource": {"uri": "file:///tmp/b.txt",
                 "mimeType": "text/plain", "text": "bee", "_meta": {"k": 1}}},
                {"type": "resource", "resource": {"uri": "file:///tmp/c.bin",
                 "mimeType": "application/octet-stream", "blob": "AAEC"}}
            ],
            "structuredContent": {"path": "a.txt"},
            "isError": false
        });
        let result: CallToolResult = serde_json::from_value(upstream.clone()).unwrap();
        let content = toolhost_core::mcpserver::client::into_content(result).unwrap();
        let out = CallOutput {
            content,
            elapsed: std::time::Duration::ZERO,
            version: "v".into(),
            fuel: None,
            written: Vec::new(),
            served_by: None,
        };
        let mut rendered = serde_json::to_value(success(out)).unwrap();
        // Toolhost's own `_meta` (version, time), and the revision's
        // `resultType` rmcp writes on every result, are not the server's.
        rendered.as_object_mut().unwrap().remove("_meta");
        rendered.as_object_mut().unwrap().remove("resultType");
        assert_eq!(rendered, upstream, "{rendered:#}");

        // The native API shows every item, and the structured result as the answer.
        let result: CallToolResult = serde_json::from_value(upstream.clone()).unwrap();
        let content = toolhost_core::mcpserver::client::into_content(result).unwrap();
        let native = crate::render::success_body(&CallOutput {
            content,
            elapsed: std::time::Duration::ZERO,
            version: "v".into(),
            fuel: None,
            written: Vec::new(),
            served_by: None,
        });
        assert_eq!(native["result"], json!({"path": "a.txt"}));
        let kinds: Vec<&str> = native["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "text",
                "text",
                "binary",
                "binary",
                "resource_link",
                "resource",
                "resource",
                "json"
            ]
        );
        assert_eq!(native["content"][0]["annotations"]["priority"], 0.5);
    }
}
