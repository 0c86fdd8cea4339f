//! The native API's rendering of a call's result: the success body, its
//! convenient `result`, and each content item as JSON (binary as base64),
//! which XAgent's wrapping shares.

use base64::Engine as _;
use serde_json::{Value, json};

use toolhost_core::dispatch::CallOutput;
use toolhost_core::tool::{Content, EmbeddedResource, ResourceLink};

/// `{"status":"success","result":...,"content":[...],"error":null}`.
pub fn success_body(out: &CallOutput) -> Value {
    let (content, meta) = Content::split_meta(&out.content);
    let mut body = json!({
        "status": "success",
        "result": simple_result(&content),
        "content": content.iter().map(content_json).collect::<Vec<_>>(),
        "error": null,
        "elapsed_ms": out.elapsed.as_secs_f64() * 1000.0,
        "fuel": out.fuel,
        "version": out.version,
    });
    // A fallback served the call: which.
    if let Some(by) = &out.served_by {
        body["served_by"] = json!(by);
    }
    // The source's own metadata of the result (an MCP server's `_meta`).
    if let Some(meta) = meta {
        body["meta"] = meta.clone();
    }
    body
}

/// The convenient form: the structured result when there is one, else one
/// text or JSON item as itself, else the item list.
fn simple_result(content: &[Content]) -> Value {
    if let Some(v) = Content::structured(content) {
        return v.clone();
    }
    match content {
        [one] => match one.plain() {
            Content::Text(t) => Value::String(t.clone()),
            Content::Json(v) => v.clone(),
            _ => Value::Array(vec![content_json(one)]),
        },
        items => Value::Array(items.iter().map(content_json).collect()),
    }
}

/// A content item on the wire; binary data is base64.
pub fn content_json(c: &Content) -> Value {
    match c {
        Content::Text(t) => json!({"type": "text", "text": t}),
        Content::Json(v) => json!({"type": "json", "json": v}),
        Content::Structured(v) => json!({"type": "json", "json": v, "structured": true}),
        Content::Meta(v) => json!({"type": "meta", "meta": v}),
        Content::Binary {
            media_type,
            data,
            name,
        } => binary_json(media_type, data, name.as_deref()),
        Content::Link(link) => link_json(link),
        Content::Resource(r) => resource_json(r),
        Content::Annotated(a) => {
            let mut v = content_json(&a.item);
            if let Some(annotations) = &a.annotations {
                v["annotations"] = annotations.clone();
            }
            if let Some(meta) = &a.meta {
                v["meta"] = meta.clone();
            }
            v
        }
    }
}

/// A resource link as JSON (`{"type":"resource_link","uri","name",...}`),
/// absent fields left out.
pub fn link_json(l: &ResourceLink) -> Value {
    let mut v = json!({"type": "resource_link", "uri": l.uri, "name": l.name});
    for (key, value) in [
        ("title", &l.title),
        ("description", &l.description),
        ("mime_type", &l.mime_type),
    ] {
        if let Some(value) = value {
            v[key] = json!(value);
        }
    }
    if let Some(size) = l.size {
        v["size"] = json!(size);
    }
    v
}

/// An embedded resource as JSON: its text, or its bytes as base64 `data`.
pub fn resource_json(r: &EmbeddedResource) -> Value {
    let mut v = json!({"type": "resource", "uri": r.uri});
    if let Some(m) = &r.mime_type {
        v["mime_type"] = json!(m);
    }
    if let Some(t) = &r.text {
        v["text"] = json!(t);
    }
    if let Some(b) = &r.blob {
        v["data"] = json!(base64::engine::general_purpose::STANDARD.encode(b));
    }
    v
}

/// A binary item as JSON (`{"type":"binary","media_type","name","data":<base64>}`),
/// the same in the native API and in XAgent's wrapping.
/// `name` is always a string ([`toolhost_core::tool::binary_file_name`]).
pub fn binary_json(media_type: &str, data: &[u8], name: Option<&str>) -> Value {
    json!({
        "type": "binary",
        "media_type": media_type,
        "name": toolhost_core::tool::binary_file_name(media_type, data, name),
        "data": base64::engine::general_purpose::STANDARD.encode(data),
    })
}
