//! What a service deploy's spec becomes before anything runs: its
//! `[[tools]]` entries (given, or derived from an OpenAPI `api_spec`), the
//! generated manifest, and its build context (inline files or a git URL),
//! each checked. Pure functions of the spec, used when a task is submitted
//! (`spec`) and when it is deployed (`deploy`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::TaskSpec;

/// The `[[tools]]` entries of a deploy: given, or derived from its
/// `api_spec` (operations with path parameters, or with parameters beside
/// a body, cannot be service endpoints and are left out, named).
pub fn tool_entries(spec: &TaskSpec) -> Result<(Vec<Value>, Vec<String>), String> {
    if let Some(tools) = &spec.tools {
        for t in tools {
            for key in ["name", "endpoint_path"] {
                if t.get(key).and_then(Value::as_str).is_none() {
                    return Err(format!("each of `tools` needs `{key}`: {t}"));
                }
            }
        }
        return Ok((tools.clone(), Vec::new()));
    }
    let doc = spec
        .api_spec
        .as_ref()
        .ok_or("a service deploy needs `tools` or an OpenAPI `api_spec`")?;
    let select = crate::httpapi::openapi::Selection::default();
    let (ops, _) =
        crate::httpapi::openapi::operations(doc, &select, 64 - spec.name.len() - 1, false)?;
    let (mut tools, mut skipped) = (Vec::new(), Vec::new());
    for op in ops {
        let input = match (&op.body, op.params.is_empty()) {
            (None, _) => op.input_schema.clone(),
            (Some(body), true) => op
                .input_schema
                .pointer(&format!("/properties/{body}"))
                .cloned()
                .unwrap_or(json!({"type": "object"})),
            (Some(_), false) => {
                skipped.push(format!("{} (parameters beside a body)", op.name));
                continue;
            }
        };
        if op.path.contains('{') {
            skipped.push(format!("{} (path parameters)", op.name));
            continue;
        }
        let mut tool = json!({
            "name": op.name,
            "endpoint_path": op.path,
            "http_method": op.method.to_ascii_uppercase(),
            "description": op.description,
            "input_schema": input,
        });
        if let Some(output) = op.output_schema {
            tool["output_schema"] = output;
        }
        tools.push(tool);
    }
    if tools.is_empty() {
        return Err(format!(
            "the api_spec has no operation a service can serve (skipped: {})",
            skipped.join(", ")
        ));
    }
    Ok((tools, skipped))
}

/// The folder manifest of a deploy.
pub fn manifest(spec: &TaskSpec, tools: &[Value]) -> Result<String, String> {
    let port = spec
        .internal_port
        .ok_or("a service deploy needs `internal_port`")?;
    let mut docker = toml::Table::new();
    match (&spec.dockerfile, &spec.image) {
        (Some(file), _) => {
            docker.insert("build".into(), file.clone().into());
        }
        (None, Some(image)) => {
            docker.insert("image".into(), image.clone().into());
        }
        (None, None) => {
            docker.insert("image".into(), "toolhost-node:latest".into());
        }
    }
    if let Some(command) = &spec.command {
        docker.insert(
            "command".into(),
            toml::Value::Array(command.iter().map(|c| c.clone().into()).collect()),
        );
    }
    docker.insert("internal_port".into(), i64::from(port).into());
    // The port, for a service that reads it (a uv build's listens on $PORT).
    let mut env = toml::Table::new();
    env.insert("PORT".into(), port.to_string().into());
    docker.insert("env".into(), toml::Value::Table(env));
    docker.insert(
        "health_path".into(),
        spec.health_path
            .clone()
            .unwrap_or_else(|| "/health".into())
            .into(),
    );
    docker.insert("start_timeout_s".into(), 60i64.into());
    docker.insert("scheduling".into(), "cold".into());
    docker.insert("network".into(), "none".into());
    // A small share each: several services fit the allocation rule.
    docker.insert("cpus".into(), 0.5.into());
    let memory = spec
        .requirements
        .as_ref()
        .and_then(|r| r.memory_mb)
        .unwrap_or(256);
    docker.insert("memory_mb".into(), i64::from(memory).into());
    // §4's requirements.gpu: one GPU (admitted only where an engine has one).
    if spec.requirements.as_ref().is_some_and(|r| r.gpu) {
        docker.insert("gpu".into(), true.into());
        docker.insert("gpu_count".into(), 1i64.into());
    }
    let mut root = toml::Table::new();
    root.insert("description".into(), spec.description.clone().into());
    if let Some(category) = &spec.category {
        root.insert("category".into(), category.clone().into());
    }
    root.insert("docker".into(), toml::Value::Table(docker));
    let tools: Vec<toml::Value> = tools
        .iter()
        .map(|t| {
            toml::Value::try_from(t)
                .map_err(|e| format!("a tool entry cannot be a manifest table: {e}"))
        })
        .collect::<Result<_, _>>()?;
    root.insert("tools".into(), toml::Value::Array(tools));
    toml::to_string(&root).map_err(|e| e.to_string())
}

/// Whether `name` may be a file of a flat build context.
pub fn context_file_problem(name: &str, toolkit: &str) -> Option<String> {
    if name.is_empty()
        || name.contains('/')
        || name.contains('\\')
        || name.starts_with('.')
        || name == format!("{toolkit}.toml")
    {
        return Some(format!(
            "`{name}` cannot be a file of the build context (flat names, no leading dot, not the manifest)"
        ));
    }
    None
}

/// Why a deploy's git URL may not be cloned, if it may not: `https://`
/// hosts must be in `[tasks] git_allow`, `file://` URLs need `file` there.
pub fn git_refusal(url: &str, allow: &[String]) -> Option<String> {
    if let Some(path) = url.strip_prefix("file://") {
        return (!allow.iter().any(|a| a == "file") || !path.starts_with('/')).then(|| {
            format!(
                "`{url}`: file:// URLs need \"file\" in [tasks] git_allow (and an absolute path)"
            )
        });
    }
    let parsed = match reqwest::Url::parse(url) {
        Ok(u) if u.scheme() == "https" => u,
        _ => return Some(format!("`{url}` is not an https:// or file:// git URL")),
    };
    let host = parsed.host_str().unwrap_or_default();
    (!allow.iter().any(|a| a == host)).then(|| format!("`{host}` is not in [tasks] git_allow"))
}

/// The inline build context, checked.
pub fn context_files(spec: &TaskSpec) -> Result<BTreeMap<String, String>, String> {
    let files = spec.files.clone().unwrap_or_default();
    if let Some(problem) = files
        .keys()
        .find_map(|n| context_file_problem(n, &spec.name))
    {
        return Err(problem);
    }
    Ok(files)
}
