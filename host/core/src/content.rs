//! The content model: every kind of item a backend can answer (text, JSON,
//! bytes, links to resources, embedded resources, structured content,
//! annotations and `_meta`), so that no surface turns one kind into another
//! and back; the surfaces only render it.

use serde_json::Value;

/// One item of a tool's result: every kind a backend can answer, so that no
/// surface has to turn one kind into another and back (the surfaces only
/// render: `api::render` for the native API, XAgent's wrapping, MCP's
/// content blocks).
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    Json(Value),
    /// Bytes with a media type: an image, audio, a file.
    Binary {
        media_type: String,
        data: Vec<u8>,
        name: Option<String>,
    },
    /// A link to a resource the caller can read (MCP `resource_link`).
    Link(ResourceLink),
    /// A resource carried in the result, text or bytes (MCP's embedded
    /// `resource`).
    Resource(EmbeddedResource),
    /// The call's structured result, beside its other items (MCP
    /// `structuredContent`, which an `outputSchema` describes). MCP renders
    /// it as `structuredContent` only; the other surfaces as a JSON item.
    Structured(Value),
    /// An item with the annotations (audience, priority, ...) and `_meta`
    /// its producer gave it, kept for the surfaces that carry them.
    Annotated(Box<Annotated>),
    /// The result's own metadata (an MCP server's result-level `_meta`),
    /// not an item: MCP renders it as the result's `_meta`, the native API
    /// as the body's `meta`; XAgent's shapes have no place for it.
    Meta(Value),
}

/// A link to a resource ([`Content::Link`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceLink {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub size: Option<u64>,
}

/// An embedded resource ([`Content::Resource`]): `text` or `blob`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EmbeddedResource {
    pub uri: String,
    pub mime_type: Option<String>,
    pub text: Option<String>,
    pub blob: Option<Vec<u8>>,
    /// The resource's own `_meta`.
    pub meta: Option<Value>,
}

/// An item with its annotations and `_meta` ([`Content::Annotated`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Annotated {
    pub item: Content,
    pub annotations: Option<Value>,
    pub meta: Option<Value>,
}

impl Content {
    /// Bytes this item occupies, for the output-size limit.
    pub fn size(&self) -> usize {
        match self {
            Content::Text(t) => t.len(),
            // Measured by the text the plugin returned, see the wasm backend.
            Content::Json(v) | Content::Structured(v) | Content::Meta(v) => estimate_json_size(v),
            Content::Binary {
                data,
                media_type,
                name,
            } => data.len() + media_type.len() + name.as_ref().map_or(0, String::len),
            Content::Link(l) => {
                l.uri.len()
                    + l.name.len()
                    + [&l.title, &l.description, &l.mime_type]
                        .iter()
                        .map(|s| s.as_ref().map_or(0, String::len))
                        .sum::<usize>()
            }
            Content::Resource(r) => {
                r.uri.len()
                    + r.text.as_ref().map_or(0, String::len)
                    + r.blob.as_ref().map_or(0, Vec::len)
                    + r.meta.as_ref().map_or(0, estimate_json_size)
            }
            Content::Annotated(a) => {
                a.item.size()
                    + a.annotations.as_ref().map_or(0, estimate_json_size)
                    + a.meta.as_ref().map_or(0, estimate_json_size)
            }
        }
    }

    /// The structured result among `items` ([`Content::Structured`]), if
    /// there is one.
    pub fn structured(items: &[Content]) -> Option<&Value> {
        items.iter().find_map(|c| match c.plain() {
            Content::Structured(v) => Some(v),
            _ => None,
        })
    }

    /// The items of a result without its metadata ([`Content::Meta`]), and
    /// that metadata; borrowed as they are when there is none (the usual case).
    pub fn split_meta(items: &[Content]) -> (std::borrow::Cow<'_, [Content]>, Option<&Value>) {
        let meta = items.iter().find_map(|c| match c {
            Content::Meta(v) => Some(v),
            _ => None,
        });
        match meta {
            None => (std::borrow::Cow::Borrowed(items), None),
            Some(_) => (
                items
                    .iter()
                    .filter(|c| !matches!(c, Content::Meta(_)))
                    .cloned()
                    .collect(),
                meta,
            ),
        }
    }

    /// The item without its annotations and `_meta` (for the surfaces that
    /// show neither).
    pub fn plain(&self) -> &Content {
        match self {
            Content::Annotated(a) => a.item.plain(),
            other => other,
        }
    }
}

/// The file name of a binary item: its own, else one made from its content
/// and media type (`<12 hex digits of its SHA-256>.<ext>`), so every binary
/// item clients see has a name (XAgent's client appends `.png` to it and
/// writes a file of that name) and the same bytes always get the same one.
pub fn binary_file_name(media_type: &str, data: &[u8], name: Option<&str>) -> String {
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        return name.to_owned();
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(data);
    let stem = crate::text::hex(&digest[..6]);
    format!("{stem}.{}", extension_of(media_type))
}

/// The usual file extension of a media type (`bin` when unknown).
pub fn extension_of(media_type: &str) -> &'static str {
    let essence = media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "image/bmp" => "bmp",
        "application/pdf" => "pdf",
        "application/json" => "json",
        "application/zip" => "zip",
        "text/plain" => "txt",
        "text/csv" => "csv",
        "text/html" => "html",
        "text/markdown" => "md",
        "audio/mpeg" => "mp3",
        "audio/wav" | "audio/x-wav" => "wav",
        _ => "bin",
    }
}

fn estimate_json_size(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 2 + a.iter().map(estimate_json_size).sum::<usize>(),
        Value::Object(o) => {
            2 + o
                .iter()
                .map(|(k, v)| k.len() + 3 + estimate_json_size(v))
                .sum::<usize>()
        }
    }
}
