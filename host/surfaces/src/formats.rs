//! Tool descriptions in the formats agent frameworks load:
//! - `openai`: OpenAI tool definitions `{"type":"function","function":{name,
//!   description, parameters}}` (Qwen-Agent's `function` property is the inner
//!   object); names are tool ids, which match `^[a-zA-Z0-9_-]{1,64}$`.
//! - `mcp`: MCP `Tool`s `{name, description, inputSchema[, outputSchema]}`.
//! - `lagent`: Lagent's action descriptions: a toolkit of several tools as
//!   `{name, description, api_list:[...]}`, a one-tool toolkit as the tool
//!   itself; each tool `{name, description, parameters:[{name, type,
//!   description}], required:[...]}` with Lagent's upper-case type names.

//!
//! Each is a view borrowing the catalog's entry, serialized as it is: a list
//! of 10,000 tools copies no schema (docs/benchmarks.md#costs-that-stay-flat).

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use toolhost_core::catalog::{ToolEntry, ToolkitEntry};

/// `{"tools": [...]}`.
#[derive(Serialize)]
pub struct Listing<T> {
    pub tools: Vec<T>,
}

/// What `GET /tools` lists of a tool (seed 004's shape).
#[derive(Serialize)]
pub struct Summary<'a> {
    tool_id: &'a str,
    name: &'a str,
    category: &'a str,
    description: &'a str,
    status: &'static str,
}

impl<'a> Summary<'a> {
    pub fn of(t: &'a ToolEntry) -> Self {
        Summary {
            tool_id: &t.id,
            name: &t.descriptor.name,
            category: t.category(),
            description: &t.descriptor.description,
            status: t.record.status().as_str(),
        }
    }
}

/// An OpenAI tool definition.
#[derive(Serialize)]
pub struct OpenAi<'a> {
    r#type: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> OpenAi<'a> {
    pub fn of(t: &'a ToolEntry) -> Self {
        OpenAi {
            r#type: "function",
            function: Function {
                name: &t.id,
                description: &t.descriptor.description,
                parameters: &t.descriptor.input_schema,
            },
        }
    }
}

/// An MCP `Tool`.
#[derive(Serialize)]
pub struct McpTool<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    description: &'a str,
    #[serde(rename = "inputSchema")]
    input_schema: &'a Value,
    #[serde(rename = "outputSchema", skip_serializing_if = "Option::is_none")]
    output_schema: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a Value>,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<&'a Value>,
}

impl<'a> McpTool<'a> {
    pub fn of(t: &'a ToolEntry) -> Self {
        let hints = &t.descriptor.hints;
        McpTool {
            name: &t.id,
            title: hints.title.as_deref(),
            description: &t.descriptor.description,
            input_schema: &t.descriptor.input_schema,
            output_schema: t.descriptor.output_schema.as_ref(),
            annotations: hints.annotations.as_ref(),
            meta: hints.meta.as_ref(),
        }
    }
}

/// [`McpTool`] as a value (the MCP surface's list, which rmcp types own).
pub fn mcp(t: &ToolEntry) -> Value {
    serde_json::to_value(McpTool::of(t)).unwrap_or_default()
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
    let mut by_kit: HashMap<&str, Vec<&Arc<ToolEntry>>> = HashMap::new();
    for t in tools {
        by_kit.entry(t.toolkit.name.as_str()).or_default().push(t);
    }
    toolkits
        .iter()
        .filter_map(|kit| {
            let own = by_kit.remove(kit.name.as_str()).unwrap_or_default();
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
