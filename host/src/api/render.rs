//! The native API's rendering of a call's result: the success body, its
//! convenient `result`, and each content item as JSON (binary as base64),
//! which XAgent's wrapping shares.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::dispatch::CallOutput;
use crate::tool::Content;

/// `{"status":"success","result":...,"content":[...],"error":null}`.
pub fn success_body(out: &CallOutput) -> Value {
    json!({
        "status": "success",
        "result": simple_result(&out.content),
        "content": out.content.iter().map(content_json).collect::<Vec<_>>(),
        "error": null,
        "elapsed_ms": out.elapsed.as_secs_f64() * 1000.0,
        "fuel": out.fuel,
        "version": out.version,
    })
}

/// The convenient form: one text or JSON item as itself, else the item list.
fn simple_result(content: &[Content]) -> Value {
    match content {
        [Content::Text(t)] => Value::String(t.clone()),
        [Content::Json(v)] => v.clone(),
        items => Value::Array(items.iter().map(content_json).collect()),
    }
}

/// A content item on the wire; binary data is base64.
pub fn content_json(c: &Content) -> Value {
    match c {
        Content::Text(t) => json!({"type": "text", "text": t}),
        Content::Json(v) => json!({"type": "json", "json": v}),
        Content::Binary {
            media_type,
            data,
            name,
        } => binary_json(media_type, data, name.as_deref()),
    }
}

/// A binary item as JSON (`{"type":"binary","media_type","name","data":<base64>}`),
/// the same in the native API and in XAgent's wrapping.
/// `name` is always a string ([`crate::tool::binary_file_name`]).
pub fn binary_json(media_type: &str, data: &[u8], name: Option<&str>) -> Value {
    json!({
        "type": "binary",
        "media_type": media_type,
        "name": crate::tool::binary_file_name(media_type, data, name),
        "data": base64::engine::general_purpose::STANDARD.encode(data),
    })
}
