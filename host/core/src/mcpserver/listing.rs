//! A mounted server's tools as catalog entries, within caps: at most
//! `[mcp] max_tools` of them (the pages after are not even asked for), each
//! description at most [`MAX_DESCRIPTION`] bytes (cut, and the cut said),
//! each schema at most [`MAX_SCHEMA_BYTES`] (a larger one leaves its tool
//! out). What was cut or left out is a warning in `GET /plugins`.

use std::collections::HashMap;

use rmcp::model::{PaginatedRequestParams, Tool};
use rmcp::service::{Peer, RoleClient};
use serde_json::Value;

use crate::tool::{ToolDescriptor, ToolHints};

/// The longest tool description kept, bytes.
pub const MAX_DESCRIPTION: usize = 8 * 1024;

/// The largest input or output schema kept, bytes of JSON.
pub const MAX_SCHEMA_BYTES: usize = 256 * 1024;

/// Pages of `tools/list` read at most (a server whose cursor never ends).
const MAX_PAGES: usize = 1000;

/// The server's tools, the first `max` of them, and whether it has more.
pub async fn list(peer: &Peer<RoleClient>, max: usize) -> Result<(Vec<Tool>, bool), String> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(|e| format!("the MCP server's tools/list failed: {e}"))?;
        tools.extend(page.tools);
        if tools.len() > max {
            tools.truncate(max);
            return Ok((tools, true));
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok((tools, false)),
        }
    }
    Ok((tools, true))
}

/// The catalog's entries for `listed` (ids of at most `room` characters),
/// their names on the server by ours, and what was cut or left out.
pub fn descriptors(
    toolkit: &str,
    listed: Vec<Tool>,
    room: usize,
) -> (Vec<ToolDescriptor>, HashMap<String, String>, Vec<String>) {
    let mut tools = Vec::new();
    let mut names = HashMap::new();
    let mut warnings = Vec::new();
    for t in listed {
        let ours: String = t
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(room)
            .collect();
        if ours.is_empty() {
            continue;
        }
        let input = Value::Object((*t.input_schema).clone());
        let output = t
            .output_schema
            .as_ref()
            .map(|s| Value::Object((**s).clone()));
        let size = |v: &Value| serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
        let largest = size(&input).max(output.as_ref().map_or(0, size));
        if largest > MAX_SCHEMA_BYTES {
            warnings.push(format!(
                "tool `{}` left out: a schema of {largest} bytes (at most {MAX_SCHEMA_BYTES})",
                t.name
            ));
            continue;
        }
        if let Err(e) = jsonschema::validator_for(&input) {
            tracing::warn!(toolkit, tool = %t.name, error = %e, "MCP server tool skipped: its input schema is not valid");
            warnings.push(format!(
                "tool `{}` left out: its input schema is not valid ({e})",
                t.name
            ));
            continue;
        }
        if names.contains_key(&ours) {
            tracing::warn!(toolkit, tool = %t.name, "MCP server tool skipped: its name clashes with another once made an id");
            warnings.push(format!(
                "tool `{}` left out: its name is `{ours}` once made an id, like another's",
                t.name
            ));
            continue;
        }
        let description = cut(t.description.as_deref().unwrap_or_default());
        names.insert(ours.clone(), t.name.to_string());
        tools.push(ToolDescriptor {
            name: ours,
            description,
            input_schema: input,
            output_schema: output,
            continue_with: None,
            hints: hints(&t),
        });
    }
    (tools, names, warnings)
}

/// `text` in at most [`MAX_DESCRIPTION`] bytes, the cut said at its end.
fn cut(text: &str) -> String {
    if text.len() <= MAX_DESCRIPTION {
        return text.to_owned();
    }
    let note = format!(
        " … (cut by toolhost: the server's description is {} bytes)",
        text.len()
    );
    format!(
        "{}{note}",
        crate::text::truncate(text, MAX_DESCRIPTION - note.len())
    )
}

/// What the server says of tool `t` for clients beside its schema: title,
/// annotations, `_meta`, passed on as they came.
fn hints(t: &Tool) -> ToolHints {
    let wire = serde_json::to_value(t).unwrap_or_default();
    let field = |k: &str| wire.get(k).filter(|v| !v.is_null()).cloned();
    ToolHints {
        title: field("title").and_then(|v| v.as_str().map(str::to_owned)),
        annotations: field("annotations"),
        meta: field("_meta"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str, schema: Value) -> Tool {
        serde_json::from_value(serde_json::json!({
            "name": name, "description": description, "inputSchema": schema
        }))
        .unwrap()
    }

    #[test]
    fn long_descriptions_are_cut_and_huge_schemas_left_out() {
        let object = serde_json::json!({"type": "object"});
        let mut huge = serde_json::Map::new();
        for i in 0..20_000 {
            huge.insert(format!("p{i}"), serde_json::json!({"type": "string"}));
        }
        let listed = vec![
            tool("long", &"é".repeat(10_000), object.clone()),
            tool(
                "huge",
                "x",
                serde_json::json!({"type": "object", "properties": huge}),
            ),
            tool("a.b", "x", object.clone()),
            tool("a_b", "x", object),
        ];
        let (tools, names, warnings) = descriptors("t", listed, 40);
        let ids: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(ids, ["long", "a_b"]);
        assert_eq!(names["a_b"], "a.b");
        let long = &tools[0].description;
        assert!(long.len() <= MAX_DESCRIPTION, "{}", long.len());
        assert!(long.ends_with("description is 20000 bytes)"), "{long}");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].contains("`huge` left out: a schema of"),
            "{warnings:?}"
        );
        assert!(warnings[1].contains("`a_b` left out"), "{warnings:?}");
    }
}
