//! `code_interpreter` (Qwen-Agent's tool, under its name and arguments): a
//! folder toolkit whose manifest has an `[interpreter]` table naming the tools
//! that can run the code, in order of preference. A call goes to the first
//! that is loaded, active and able to serve now (the Docker notebook where the
//! engine and node image are there, else the sandboxed `python_run`), through
//! the dispatcher like any call, and the answer says which ran it.
//!
//! ```toml
//! # plugins/code/code.toml
//! description = "Run Python code."
//! [interpreter]
//! targets = ["notebook_execute", "python_run"]
//! timeout_s = 60
//! ```

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::backend::{Backend, BackendFuture, EntryFile, Loaded, content_hash, folder_manifest};
use crate::backend::{Invocation, ToolCallsSlot, Toolkit};
use crate::tool::BoxFuture;
use crate::tool::{CallError, Content, Limits, ToolDescriptor};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    category: Option<String>,
    interpreter: Table,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    /// Tool ids, tried in order.
    targets: Vec<String>,
    /// Seconds the code may run (passed to targets that take `timeout_s`).
    #[serde(default = "default_timeout")]
    timeout_s: u64,
}

fn default_timeout() -> u64 {
    60
}

pub struct InterpreterBackend {
    dispatcher: ToolCallsSlot,
}

impl InterpreterBackend {
    pub fn new(dispatcher: ToolCallsSlot) -> Arc<Self> {
        Arc::new(InterpreterBackend { dispatcher })
    }
}

impl Backend for InterpreterBackend {
    fn name(&self) -> &'static str {
        "interpreter"
    }

    fn folder_kind(&self) -> Option<&'static str> {
        Some("interpreter")
    }

    fn load<'a>(
        &'a self,
        name: &'a str,
        files: Vec<EntryFile>,
        _report: &'a (dyn Fn(&'static str) + Sync),
    ) -> BackendFuture<'a, Result<Loaded, String>> {
        Box::pin(async move { self.load_manifest(name, &files) })
    }
}

impl InterpreterBackend {
    fn load_manifest(&self, name: &str, files: &[EntryFile]) -> Result<Loaded, String> {
        let (_, text) = folder_manifest(name, files)?;
        let manifest: Manifest = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        let table = manifest.interpreter;
        let own = format!("{name}_interpreter");
        if table.targets.is_empty() {
            return Err("[interpreter] targets: name at least one tool".into());
        }
        if let Some(t) = table.targets.iter().find(|t| **t == own) {
            return Err(format!("[interpreter] targets: `{t}` is this tool itself"));
        }
        if !(1..=3600).contains(&table.timeout_s) {
            return Err("[interpreter] timeout_s: 1 to 3600".into());
        }
        let _ = manifest.category;
        let tool = ToolDescriptor {
            name: "interpreter".into(),
            description: format!(
                "Run Python code, like a notebook cell, and answer what it printed, the value \
                 of its last expression, errors, and figures as images (matplotlib). Runs in \
                 the first available of: {}; the answer says which (in the notebook, variables \
                 persist between calls; in the sandboxed interpreter each call starts fresh). \
                 Files are in the session workspace.",
                table.targets.join(", ")
            ),
            input_schema: json!({
                "type": "object",
                "additionalProperties": false,
                "required": ["code"],
                "properties": {
                    "code": {"type": "string", "description": "The code to run, e.g. \"import math\\nprint(math.pi)\"."},
                    "language": {"type": "string", "enum": ["python"], "default": "python", "description": "The code's language: python."}
                }
            }),
            output_schema: None,
            continue_with: None,
            hints: Default::default(),
        };
        Ok(Loaded {
            description: manifest
                .description
                .unwrap_or_else(|| "Run code (Qwen-Agent's code_interpreter).".into()),
            version: content_hash(text.as_bytes()),
            // Only the targets' own limits apply; this one only forwards.
            limits: Limits {
                timeout_ms: (table.timeout_s + 30) * 1000,
                ..Limits::default()
            },
            toolkit: Arc::new(Interpreter {
                targets: table.targets,
                timeout_s: table.timeout_s,
                dispatcher: self.dispatcher.clone(),
            }),
            tools: vec![tool],
            compile: None,
            better: None,
            warnings: Vec::new(),
            provenance: None,
        })
    }
}

struct Interpreter {
    targets: Vec<String>,
    timeout_s: u64,
    dispatcher: ToolCallsSlot,
}

impl Toolkit for Interpreter {
    fn invoke(self: Arc<Self>, call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
        Box::pin(async move { self.run(call).await })
    }
}

impl Interpreter {
    async fn run(&self, call: Invocation) -> Result<Vec<Content>, CallError> {
        let code = call.input["code"].as_str().unwrap_or_default().to_owned();
        let tools = self
            .dispatcher
            .get()
            .and_then(std::sync::Weak::upgrade)
            .ok_or_else(|| {
                CallError::BackendUnavailable("the server is starting or stopping".into())
            })?;
        let mut why_not = Vec::new();
        for target in &self.targets {
            let (backend, schema) = match tools.ready(target) {
                Ok(ready) => ready,
                Err(why) => {
                    why_not.push(format!("{target}: {why}"));
                    continue;
                }
            };
            let takes_timeout = schema["properties"].get("timeout_s").is_some();
            let input = if takes_timeout {
                json!({"code": code, "timeout_s": self.timeout_s})
            } else {
                json!({"code": code})
            };
            match tools
                .clone()
                .call(
                    call.session.clone(),
                    target.clone(),
                    input,
                    call.progress.clone(),
                )
                .await
            {
                Ok(content) => return Ok(answer(target, backend, content)),
                Err(CallError::BackendUnavailable(why)) => why_not.push(format!("{target}: {why}")),
                Err(e) => return Err(e),
            }
        }
        Err(CallError::BackendUnavailable(format!(
            "no interpreter can run code now ({})",
            why_not.join("; ")
        )))
    }
}

/// The target's answer as Qwen-Agent's code_interpreter gives it: text of
/// what was printed, the value and the error, then the figures as images, then
/// the target's JSON with `served_by` added.
fn answer(target: &str, backend: &str, content: Vec<Content>) -> Vec<Content> {
    let mut report = Value::Null;
    let mut images = Vec::new();
    for item in content {
        match item {
            Content::Json(v) if report.is_null() => report = v,
            Content::Binary { .. } => images.push(item),
            _ => {}
        }
    }
    let field = |k: &str| {
        report
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let mut text = String::new();
    let block = |text: &mut String, title: &str, body: &str| {
        text.push_str(&format!("{title}:\n```\n{}\n```\n", body.trim_end()));
    };
    if let Some(s) = field("stdout") {
        block(&mut text, "stdout", s);
    }
    if let Some(s) = field("stderr") {
        block(&mut text, "stderr", s);
    }
    if let Some(r) = field("result") {
        block(&mut text, "execute_result", r);
    }
    if let Some(e) = report.get("error").filter(|e| !e.is_null()) {
        let trace = e.get("traceback").and_then(|t| match t {
            Value::String(s) => Some(s.clone()),
            Value::Array(lines) => Some(
                lines
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            _ => None,
        });
        let head = [("ename", "evalue"), ("type", "message")]
            .iter()
            .find_map(|(n, m)| {
                Some(format!(
                    "{}: {}",
                    e.get(n)?.as_str()?,
                    e.get(m).and_then(Value::as_str).unwrap_or("")
                ))
            });
        block(
            &mut text,
            "error",
            &trace
                .filter(|t| !t.trim().is_empty())
                .or(head)
                .unwrap_or_else(|| e.to_string()),
        );
    }
    if text.is_empty() {
        text.push_str("Finished execution.\n");
    }
    let served = if backend == "docker" {
        "the notebook node (Docker): variables persist between calls"
    } else {
        "the sandboxed interpreter (wasm): each call starts fresh"
    };
    text.push_str(&format!("(ran in {served}: {target})"));
    if let Value::Object(map) = &mut report {
        map.insert("served_by".into(), json!(target));
        map.insert("backend".into(), json!(backend));
    } else {
        report = json!({"served_by": target, "backend": backend});
    }
    let mut out = vec![Content::Text(text)];
    out.extend(images);
    out.push(Content::Json(report));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_like_qwens() {
        let out = answer(
            "notebook_execute",
            "docker",
            vec![
                Content::Json(
                    json!({"stdout": "hi\n", "result": "3", "error": null, "image_count": 1}),
                ),
                Content::Binary {
                    media_type: "image/png".into(),
                    data: vec![1],
                    name: None,
                },
            ],
        );
        let Content::Text(t) = &out[0] else { panic!() };
        assert!(
            t.starts_with("stdout:\n```\nhi\n```\nexecute_result:\n```\n3\n```\n"),
            "{t}"
        );
        assert!(t.ends_with("(ran in the notebook node (Docker): variables persist between calls: notebook_execute)"), "{t}");
        assert!(matches!(out[1], Content::Binary { .. }));
        let Content::Json(j) = &out[2] else { panic!() };
        assert_eq!(j["served_by"], "notebook_execute");
        let out = answer(
            "python_run",
            "wasm",
            vec![Content::Json(
                json!({"stdout": "", "error": {"type": "ZeroDivisionError", "message": "division by zero", "traceback": ""}}),
            )],
        );
        let Content::Text(t) = &out[0] else { panic!() };
        assert!(
            t.starts_with("error:\n```\nZeroDivisionError: division by zero\n```"),
            "{t}"
        );
        assert_eq!(answer("x", "wasm", vec![]).len(), 2);
    }
}
