//! Tool descriptions in the formats agent frameworks load:
//! - `openai`: OpenAI tool definitions `{"type":"function","function":{name,
//!   description, parameters}}` (Qwen-Agent's `function` property is the inner
//!   object); names are tool ids, which match `^[a-zA-Z0-9_-]{1,64}$`.
//! - `mcp`: MCP `Tool`s `{name, description, inputSchema[, outputSchema]}`.
//! - `lagent`: Lagent's action descriptions: a toolkit of several tools as
//!   `{name, description, api_list:[...]}`, a one-tool toolkit as the tool
//!   itself; each tool `{name, description, parameters:[{name, type,
//!   description}], required:[...]}` with Lagent's upper-case type names.

use std::sync::Arc;

use serde_json::{Value, json};

use toolhost_core::catalog::{ToolEntry, ToolkitEntry};

pub fn openai(t: &ToolEntry) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": t.id,
            "description": t.descriptor.description,
            "parameters": t.descriptor.input_schema,
        }
    })
}

pub fn mcp(t: &ToolEntry) -> Value {
    let mut tool = json!({
        "name": t.id,
        "description": t.descriptor.description,
        "inputSchema": t.descriptor.input_schema,
    });
    if let Some(out) = &t.descriptor.output_schema {
        tool["outputSchema"] = out.clone();
    }
    let hints = &t.descriptor.hints;
    if let Some(title) = &hints.title {
        tool["title"] = json!(title);
    }
    if let Some(a) = &hints.annotations {
        tool["annotations"] = a.clone();
    }
    if let Some(m) = &hints.meta {
        tool["_meta"] = m.clone();
    }
    tool
}

/// One tool as a Lagent API description.
fn lagent_api(t: &ToolEntry, name: &str) -> Value {
    let schema = &t.descriptor.input_schema;
    let parameters: Vec<Value> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(pname, p)| {
                    let kind = p
                        .get("type")
                        .and_then(|t| match t {
                            Value::String(s) => Some(s.as_str()),
                            // ["string", "null"]: the first non-null type.
                            Value::Array(a) => a.iter().filter_map(Value::as_str).find(|s| *s != "null"),
                            _ => None,
                        })
                        .unwrap_or("string");
                    json!({
                        "name": pname,
                        "type": kind.to_ascii_uppercase(),
                        "description": p.get("description").and_then(Value::as_str).unwrap_or_default(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "name": name,
        "description": t.descriptor.description,
        "parameters": parameters,
        "required": schema.get("required").cloned().unwrap_or_else(|| json!([])),
    })
}

pub fn lagent(toolkits: &[Arc<ToolkitEntry>], tools: &[Arc<ToolEntry>]) -> Vec<Value> {
    toolkits
        .iter()
        .filter_map(|kit| {
            let own: Vec<&Arc<ToolEntry>> = tools.iter().filter(|t| t.toolkit.name == kit.name).collect();
            match own.as_slice() {
                [] => None,
                [one] => Some(lagent_api(one, &one.id)),
                many => Some(json!({
                    "name": kit.name,
                    "description": kit.description,
                    "api_list": many.iter().map(|t| lagent_api(t, &t.descriptor.name)).collect::<Vec<_>>(),
                })),
            }
        })
        .collect()
}
