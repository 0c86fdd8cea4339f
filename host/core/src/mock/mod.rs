//! Mock toolkits: tools that answer what their manifest says, for testing
//! agents against tools that do not exist yet (or must not be called for
//! real in a test), served like any other tool on every surface. A folder
//! `<plugins>/<name>/` whose manifest has a `[mock]` table:
//!
//! ```toml
//! # plugins/weather/weather.toml
//! description = "Weather, canned for tests."
//! [mock]
//! [[mock.tools]]
//! name = "forecast"
//! description = "Tomorrow's forecast for a city."
//! input_schema = { type = "object", required = ["city"], properties = { city = { type = "string" } } }
//! answer = { city = "{city}", sky = "sunny", high_c = 21 }
//! ```
//!
//! The answer is returned as JSON (a string `answer` as text), with every
//! `{field}` of its strings replaced by that input field's value (a string
//! as is, anything else as JSON). A tool may `fail` instead, with a message:
//! the call is a tool error, as a real tool's would be.
//!
//! This backend is the worked example of `docs/adding-a-backend.md`.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::backend::{
    Backend, BackendFuture, EntryFile, Invocation, Loaded, Toolkit, content_hash, folder_manifest,
};
use crate::tool::{BoxFuture, CallError, Content, Limits, ToolDescriptor};

/// `[mock]` in the server's configuration.
#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MockConfig {
    /// Serve `[mock]` folders of the plugins directory.
    pub enabled: bool,
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig { enabled: true }
    }
}

/// Most tools one mock toolkit may declare.
const MAX_TOOLS: usize = 256;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    description: Option<String>,
    mock: Table,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    #[serde(default)]
    tools: Vec<MockTool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct MockTool {
    name: String,
    description: String,
    #[serde(default = "open_object")]
    input_schema: Value,
    #[serde(default)]
    answer: Option<toml::Value>,
    #[serde(default)]
    fail: Option<String>,
}

fn open_object() -> Value {
    serde_json::json!({"type": "object"})
}

pub struct MockBackend;

impl Backend for MockBackend {
    fn name(&self) -> &'static str {
        "mock"
    }

    fn folder_kind(&self) -> Option<&'static str> {
        Some("mock")
    }

    fn load<'a>(
        &'a self,
        name: &'a str,
        files: Vec<EntryFile>,
        _report: &'a (dyn Fn(&'static str) + Sync),
    ) -> BackendFuture<'a, Result<Loaded, String>> {
        Box::pin(async move { load(name, &files) })
    }
}

fn load(name: &str, files: &[EntryFile]) -> Result<Loaded, String> {
    let (_, text) = folder_manifest(name, files)?;
    let manifest: Manifest = toml::from_str(text).map_err(|e| e.message().to_owned())?;
    let tools = manifest.mock.tools;
    if tools.is_empty() {
        return Err("[mock] declares no tools: add [[mock.tools]] entries".into());
    }
    if tools.len() > MAX_TOOLS {
        return Err(format!(
            "[mock] declares {} tools; at most {MAX_TOOLS}",
            tools.len()
        ));
    }
    for t in &tools {
        match (&t.answer, &t.fail) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "mock tool `{}`: give `answer` or `fail`, not both",
                    t.name
                ));
            }
            (None, None) => {
                return Err(format!(
                    "mock tool `{}`: give an `answer` (or `fail`)",
                    t.name
                ));
            }
            _ => {}
        }
    }
    let descriptors = tools
        .iter()
        .map(|t| ToolDescriptor {
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema: t.input_schema.clone(),
            output_schema: None,
            continue_with: None,
            hints: Default::default(),
        })
        .collect();
    Ok(Loaded {
        description: manifest
            .description
            .unwrap_or_else(|| format!("Mock tools of {name}.")),
        version: content_hash(text.as_bytes()),
        limits: Limits {
            timeout_ms: 1_000,
            max_concurrency: 256,
            max_queue: 256,
            max_output_kb: 1024,
        },
        toolkit: Arc::new(MockToolkit { tools }),
        tools: descriptors,
        compile: None,
        better: None,
        warnings: Vec::new(),
        provenance: None,
    })
}

struct MockToolkit {
    tools: Vec<MockTool>,
}

impl Toolkit for MockToolkit {
    fn invoke(self: Arc<Self>, call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
        Box::pin(async move {
            let tool = self
                .tools
                .iter()
                .find(|t| t.name == call.tool)
                .ok_or_else(|| CallError::NotFound(call.tool.clone()))?;
            if let Some(message) = &tool.fail {
                return Err(CallError::ToolError(fill_text(message, &call.input)));
            }
            let answer = tool.answer.clone().map(to_json).unwrap_or(Value::Null);
            Ok(vec![match fill(answer, &call.input) {
                Value::String(text) => Content::Text(text),
                json => Content::Json(json),
            }])
        })
    }
}

fn to_json(v: toml::Value) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// `answer` with `{field}` in its strings replaced from `input`.
fn fill(answer: Value, input: &Value) -> Value {
    match answer {
        Value::String(s) => Value::String(fill_text(&s, input)),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| fill(v, input)).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, fill(v, input))).collect())
        }
        other => other,
    }
}

fn fill_text(text: &str, input: &Value) -> String {
    let Some(fields) = input.as_object() else {
        return text.to_owned();
    };
    let mut out = text.to_owned();
    for (key, value) in fields {
        let with = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out = out.replace(&format!("{{{key}}}"), &with);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn files(text: &str) -> Vec<EntryFile> {
        vec![EntryFile::new(
            std::path::PathBuf::from("/p/weather/weather.toml"),
            text.as_bytes().to_vec(),
        )]
    }

    #[test]
    fn manifests_are_checked() {
        let e = |t: &str| load("weather", &files(t)).err().unwrap();
        assert!(e("[mock]\n").contains("no tools"));
        assert!(
            e("[mock]\n[[mock.tools]]\nname = \"a\"\ndescription = \"d\"\n")
                .contains("give an `answer`")
        );
        assert!(e("[mock]\n[[mock.tools]]\nname = \"a\"\ndescription = \"d\"\nanswer = 1\nfail = \"x\"\n").contains("not both"));
        assert!(e("[mock]\nunknown = 1\n").contains("unknown"));
        let ok = load(
            "weather",
            &files("[mock]\n[[mock.tools]]\nname = \"a\"\ndescription = \"d\"\nanswer = 1\n"),
        )
        .unwrap();
        assert_eq!(ok.tools[0].input_schema, json!({"type": "object"}));
    }

    #[test]
    fn answers_are_filled_from_the_input() {
        let input = json!({"city": "Oslo", "days": 3});
        assert_eq!(
            fill(
                json!({"city": "{city}", "n": ["{days} days"], "k": 1}),
                &input
            ),
            json!({"city": "Oslo", "n": ["3 days"], "k": 1})
        );
        assert_eq!(fill_text("{missing} stays", &input), "{missing} stays");
    }
}
