//! The native API's rendering of a call's result: the success body, its
//! convenient `result`, and each content item as JSON (binary as base64),
//! which XAgent's wrapping shares.

use base64::Engine as _;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Value, json};

use toolhost_core::dispatch::CallOutput;
use toolhost_core::tool::{Content, EmbeddedResource, ResourceLink};

/// `{"status":"success","result":...,"content":[...],"error":null}`.
pub fn success_body(out: &CallOutput) -> Value {
    serde_json::to_value(SuccessBody(out)).expect("a call's output is JSON")
}

/// [`success_body`] written straight from the output, as a response body
/// is: no JSON tree made and copied per call. The keys in the order a
/// [`Value`]'s map keeps them (sorted), so both write the same bytes.
pub struct SuccessBody<'a>(pub &'a CallOutput);

impl Serialize for SuccessBody<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let out = self.0;
        let (content, meta) = Content::split_meta(&out.content);
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("content", &Items(&content))?;
        map.serialize_entry("elapsed_ms", &(out.elapsed.as_secs_f64() * 1000.0))?;
        map.serialize_entry("error", &())?;
        map.serialize_entry("fuel", &out.fuel)?;
        // The source's own metadata of the result (an MCP server's `_meta`).
        if let Some(meta) = meta {
            map.serialize_entry("meta", meta)?;
        }
        map.serialize_entry("result", &SimpleResult(&content))?;
        // A fallback served the call: which.
        if let Some(by) = &out.served_by {
            map.serialize_entry("served_by", by)?;
        }
        map.serialize_entry("status", "success")?;
        map.serialize_entry("version", &out.version)?;
        map.end()
    }
}

/// The convenient form: the structured result when there is one, else one
/// text or JSON item as itself, else the item list.
struct SimpleResult<'a>(&'a [Content]);

impl Serialize for SimpleResult<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let Some(v) = Content::structured(self.0) {
            return v.serialize(serializer);
        }
        match self.0 {
            [one] => match one.plain() {
                Content::Text(t) => t.serialize(serializer),
                Content::Json(v) => v.serialize(serializer),
                _ => Items(self.0).serialize(serializer),
            },
            items => Items(items).serialize(serializer),
        }
    }
}

/// Content items as [`content_json`] writes them; the plain kinds without
/// a tree of their own.
struct Items<'a>(&'a [Content]);

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            match item {
                Content::Text(text) => seq.serialize_element(&Tagged("text", "text", text))?,
                Content::Json(v) => seq.serialize_element(&Tagged("json", "json", v))?,
                other => seq.serialize_element(&content_json(other))?,
            }
        }
        seq.end()
    }
}

/// `Tagged(kind, key, value)`: `{"<key>": value, "type": kind}`, sorted as
/// a [`Value`] writes it ("json" and "text" sort before "type").
struct Tagged<'a, T>(&'static str, &'static str, &'a T);

impl<T: Serialize> Serialize for Tagged<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry(self.1, self.2)?;
        map.serialize_entry("type", self.0)?;
        map.end()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use toolhost_core::content::Annotated;

    /// The body as a JSON tree was built before it was written straight
    /// (the same keys and items), for the bytes to be compared with.
    fn as_a_tree(out: &CallOutput) -> Value {
        let (content, meta) = Content::split_meta(&out.content);
        let result = match Content::structured(&content) {
            Some(v) => v.clone(),
            None => match &content[..] {
                [one] => match one.plain() {
                    Content::Text(t) => Value::String(t.clone()),
                    Content::Json(v) => v.clone(),
                    _ => Value::Array(vec![content_json(one)]),
                },
                items => Value::Array(items.iter().map(content_json).collect()),
            },
        };
        let mut body = json!({
            "status": "success",
            "result": result,
            "content": content.iter().map(content_json).collect::<Vec<_>>(),
            "error": null,
            "elapsed_ms": out.elapsed.as_secs_f64() * 1000.0,
            "fuel": out.fuel,
            "version": out.version,
        });
        if let Some(by) = &out.served_by {
            body["served_by"] = json!(by);
        }
        if let Some(meta) = meta {
            body["meta"] = meta.clone();
        }
        body
    }

    #[test]
    fn the_body_written_straight_is_the_trees_bytes() {
        let text = Content::Text("7 \"quoted\" \u{e9}\n".into());
        let json = Content::Json(json!({"b": [1, 2.5, null], "a": {"z": true}}));
        let structured = Content::Structured(json!({"value": 7}));
        let binary = Content::Binary {
            media_type: "image/png".into(),
            data: vec![137, 80, 78, 71],
            name: None,
        };
        let annotated = Content::Annotated(Box::new(Annotated {
            item: Content::Text("for the user".into()),
            annotations: Some(json!({"audience": ["user"]})),
            meta: Some(json!({"k": 1})),
        }));
        let link = Content::Link(ResourceLink {
            uri: "file:///a.txt".into(),
            name: "a.txt".into(),
            size: Some(3),
            ..ResourceLink::default()
        });
        let meta = Content::Meta(json!({"source": "mcp"}));
        let contents: Vec<Vec<Content>> = vec![
            vec![],
            vec![text.clone()],
            vec![json.clone()],
            vec![binary.clone()],
            vec![annotated.clone()],
            vec![text.clone(), structured.clone()],
            vec![
                text.clone(),
                json.clone(),
                binary,
                link,
                annotated,
                meta.clone(),
            ],
            vec![structured, meta],
        ];
        for (i, content) in contents.into_iter().enumerate() {
            for (fuel, served_by) in [(Some(34_757), None), (None, Some("fallback".into()))] {
                let out = CallOutput {
                    content: content.clone(),
                    elapsed: Duration::from_micros(1234 + i as u64 * 7919),
                    version: "sha256:abc".into(),
                    fuel,
                    written: Vec::new(),
                    served_by,
                };
                let straight = serde_json::to_string(&SuccessBody(&out)).unwrap();
                let tree = serde_json::to_string(&as_a_tree(&out)).unwrap();
                assert_eq!(straight, tree, "case {i}");
                assert_eq!(success_body(&out), as_a_tree(&out), "case {i}");
            }
        }
    }
}
