//! The builder tools for coding agents (seed 004 §7), admin only, on the
//! native API (`GET /admin/builder/tools`, `POST /admin/builder/{tool}`)
//! and on an MCP endpoint of their own (`/admin/mcp`): they never join the
//! public catalog. Each call is audited (`GET /admin/audit`).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::{Json, Router, routing};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::ApiError;
use crate::state::AppState;
use toolhost_core::builder::BuilderError;
use toolhost_core::tasks::{Example, TaskSpec};

/// The tools: name, description, input schema.
pub fn tools() -> Vec<(&'static str, &'static str, Value)> {
    let s = |v: Value| v;
    vec![
        (
            "create_env",
            "Create a build environment: a sandboxed container (no network, capped memory and CPU) with a work folder at /work. Returns its env_id.",
            s(json!({"type": "object", "properties": {
             "memory_mb": {"type": "integer", "minimum": 64, "maximum": 4096, "description": "Memory cap (default 1024)."},
             "cpus": {"type": "number", "exclusiveMinimum": 0, "maximum": 4, "description": "CPU cap (default 1)."},
             "gpu": {"type": "boolean", "description": "Give it GPUs (an engine with a GPU runtime only; refused where there is none)."},
             "gpu_count": {"type": "integer", "minimum": -1, "description": "How many GPUs with gpu (default -1: all of an engine's)."}}})),
        ),
        (
            "write_file",
            "Write a text file in an environment's /work folder.",
            s(
                json!({"type": "object", "required": ["env_id", "path", "content"], "properties": {
             "env_id": {"type": "string"}, "path": {"type": "string", "description": "Relative to /work."},
             "content": {"type": "string"}}}),
            ),
        ),
        (
            "read_file",
            "Read a text file of an environment's /work folder.",
            s(
                json!({"type": "object", "required": ["env_id", "path"], "properties": {
             "env_id": {"type": "string"}, "path": {"type": "string"}}}),
            ),
        ),
        (
            "run",
            "Run a shell command in /work of an environment; returns exit_code, stdout, stderr (their last 64 KiB).",
            s(
                json!({"type": "object", "required": ["env_id", "command"], "properties": {
             "env_id": {"type": "string"}, "command": {"type": "string"},
             "timeout_s": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Killed after this (default 120)."}}}),
            ),
        ),
        (
            "destroy_env",
            "Remove a build environment and its files.",
            s(
                json!({"type": "object", "required": ["env_id"], "properties": {"env_id": {"type": "string"}}}),
            ),
        ),
        (
            "create_uv_project",
            "Create a uv project (an application) in an environment's /work: its pyproject.toml and .venv with the image's Python. Returns project_dir.",
            s(
                json!({"type": "object", "required": ["env_id", "name"], "properties": {
             "env_id": {"type": "string"}, "name": {"type": "string", "description": "Lowercase letters, digits, - and _."},
             "python_version": {"type": "string", "description": "E.g. 3.11 (Pythons are never downloaded: the image's only)."}}}),
            ),
        ),
        (
            "run_in_uv",
            "Run a shell command in a uv project's environment (uv run); returns exit_code, stdout, stderr.",
            s(
                json!({"type": "object", "required": ["env_id", "project_dir", "command"], "properties": {
             "env_id": {"type": "string"}, "project_dir": {"type": "string"}, "command": {"type": "string"},
             "timeout_s": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Killed after this (default 120)."}}}),
            ),
        ),
        (
            "uv_add_dependency",
            "Add a PyPI package to a uv project: its wheels are fetched from PyPI by the host (the environment has no network; wheels only), then uv add. Returns status and message.",
            s(
                json!({"type": "object", "required": ["env_id", "project_dir", "package"], "properties": {
             "env_id": {"type": "string"}, "project_dir": {"type": "string"},
             "package": {"type": "string", "description": "A requirement: name, extras, versions (requests, pydantic>=2)."},
             "dev": {"type": "boolean"}}}),
            ),
        ),
        (
            "rebuild_docker_ports",
            "Make an environment anew with new caps (its /work files kept): returns the new env_id. Ports are never published (no network); the answer says so for any given.",
            s(
                json!({"type": "object", "required": ["env_id"], "properties": {
             "env_id": {"type": "string"},
             "ports": {"type": "array", "items": {"type": "integer"}},
             "mem_limit_mb": {"type": "integer", "minimum": 64, "maximum": 4096},
             "cpus": {"type": "number", "exclusiveMinimum": 0, "maximum": 4}}}),
            ),
        ),
        (
            "register_tool",
            "Register the tool whose source (Python or JavaScript, the toolhost SDK's shape) is a file of an environment: a build_tool task builds it, runs the examples and activates it. Returns the task_id.",
            s(
                json!({"type": "object", "required": ["env_id", "name", "language", "source_path"], "properties": {
             "env_id": {"type": "string"}, "name": {"type": "string", "description": "Toolkit name: its tools are <name>_<tool>."},
             "description": {"type": "string"}, "category": {"type": "string"},
             "language": {"type": "string", "enum": ["python", "javascript"]},
             "source_path": {"type": "string", "description": "The module (app.py / app.js), relative to /work."},
             "examples": {"type": "array", "items": {"type": "object", "required": ["tool"], "properties": {
                 "tool": {"type": "string"}, "input": {"type": "object"}, "output": {}}}},
             "replace": {"type": "boolean"}}}),
            ),
        ),
        (
            "open_tasks",
            "The tasks waiting for a builder: requests (a tool to write from a description) and repairs (a degraded tool, with its recent errors, health check and source or files in `context`).",
            s(json!({"type": "object", "properties": {}})),
        ),
        (
            "claim_task",
            "Claim a waiting request or repair: it is yours to fix (submit_fix).",
            s(
                json!({"type": "object", "required": ["task_id"], "properties": {
             "task_id": {"type": "string"}, "builder": {"type": "string", "description": "Who claims (default: builder)."}}}),
            ),
        ),
        (
            "submit_fix",
            "Submit the fix of a claimed task, from an environment's files: a module (language + source_path) built like register_tool, or a repaired service's build context (paths: files of /work, flat; its manifest stays). Its examples run before it serves. Returns the task's status.",
            s(
                json!({"type": "object", "required": ["task_id", "env_id"], "properties": {
             "task_id": {"type": "string"}, "env_id": {"type": "string"},
             "language": {"type": "string", "enum": ["python", "javascript"]},
             "source_path": {"type": "string", "description": "The module, relative to /work."},
             "paths": {"type": "array", "items": {"type": "string"}, "description": "A service's files, relative to /work; each lands under its own name."},
             "examples": {"type": "array", "description": "Calls that must pass before the fix serves (else the ones the tool was made with).", "items": {"type": "object", "required": ["tool"], "properties": {
                 "tool": {"type": "string"}, "input": {"type": "object"}, "output": {}}}}}}),
            ),
        ),
        (
            "task_status",
            "The status of a task (building, testing, completed with its tool_id, failed with the build's output ...).",
            s(
                json!({"type": "object", "required": ["task_id"], "properties": {"task_id": {"type": "string"}}}),
            ),
        ),
    ]
}

fn arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, BuilderError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| BuilderError(422, format!("`{key}` (a string) is required")))
}

/// Run builder tool `name`, audited as `actor`'s.
pub async fn call(
    state: &AppState,
    actor: &str,
    name: &str,
    args: Value,
) -> Result<Value, BuilderError> {
    let b = &state.builders;
    let result = match name {
        "create_env" => {
            let memory = args
                .get("memory_mb")
                .and_then(Value::as_u64)
                .unwrap_or(1024)
                .clamp(64, 4096);
            let cpus = args
                .get("cpus")
                .and_then(Value::as_f64)
                .unwrap_or(1.0)
                .clamp(0.1, 4.0);
            let gpus = match args.get("gpu").and_then(Value::as_bool) {
                Some(true) => match args.get("gpu_count").and_then(Value::as_i64).unwrap_or(-1) {
                    n if n == -1 || n >= 1 => Some(n),
                    n => {
                        return Err(BuilderError(
                            422,
                            format!("`gpu_count` {n}: a number of GPUs, or -1 for all"),
                        ));
                    }
                },
                _ => None,
            };
            b.create(memory as u32, cpus, gpus).await
        }
        "write_file" => {
            b.write(
                arg(&args, "env_id")?,
                arg(&args, "path")?,
                arg(&args, "content")?,
            )
            .await
        }
        "read_file" => b
            .read(arg(&args, "env_id")?, arg(&args, "path")?)
            .await
            .map(|content| json!({"content": content})),
        "run" => {
            let timeout = args.get("timeout_s").and_then(Value::as_u64).unwrap_or(120);
            b.run(
                arg(&args, "env_id")?,
                arg(&args, "command")?,
                Duration::from_secs(timeout),
            )
            .await
        }
        "destroy_env" => b.destroy(arg(&args, "env_id")?).await,
        "create_uv_project" => {
            let python = args.get("python_version").and_then(Value::as_str);
            b.uv_init(arg(&args, "env_id")?, arg(&args, "name")?, python)
                .await
        }
        "run_in_uv" => {
            let timeout = args.get("timeout_s").and_then(Value::as_u64).unwrap_or(120);
            b.uv_run(
                arg(&args, "env_id")?,
                arg(&args, "project_dir")?,
                arg(&args, "command")?,
                Duration::from_secs(timeout),
            )
            .await
        }
        "uv_add_dependency" => {
            let dev = args.get("dev").and_then(Value::as_bool).unwrap_or(false);
            b.uv_add(
                arg(&args, "env_id")?,
                arg(&args, "project_dir")?,
                arg(&args, "package")?,
                dev,
            )
            .await
        }
        "rebuild_docker_ports" => {
            let memory = args
                .get("mem_limit_mb")
                .and_then(Value::as_u64)
                .map(|m| m.clamp(64, 4096) as u32);
            let cpus = args
                .get("cpus")
                .and_then(Value::as_f64)
                .map(|c| c.clamp(0.1, 4.0));
            let mut rebuilt = b.rebuild(arg(&args, "env_id")?, memory, cpus).await;
            if let (Ok(v), Some(ports)) = (&mut rebuilt, args.get("ports")) {
                v["port_mapping"] = json!({});
                v["ports"] = json!(format!(
                    "{ports} not published: an environment has no network; a service it runs is reached from inside it (run, run_in_uv), a deployed one inside its own network namespace"
                ));
            }
            rebuilt
        }
        "register_tool" => register(state, &args).await,
        "open_tasks" => Ok(open_tasks(state)),
        "claim_task" => {
            let builder = args
                .get("builder")
                .and_then(Value::as_str)
                .unwrap_or("builder");
            state
                .tasks
                .claim(arg(&args, "task_id")?, builder)
                .map(|t| t.view())
                .map_err(refusal)
        }
        "submit_fix" => submit_fix(state, &args).await,
        "task_status" => {
            let id = arg(&args, "task_id")?;
            state
                .tasks
                .get(id)
                .map(|t| t.view())
                .ok_or_else(|| BuilderError(404, format!("no task `{id}`")))
        }
        other => Err(BuilderError(404, format!("no builder tool `{other}`"))),
    };
    let mut shown = args.clone();
    if let Some(content) = shown.get("content").and_then(Value::as_str) {
        shown["content"] = json!(format!("<{} bytes>", content.len()));
    }
    let outcome = match &result {
        Ok(_) => "ok".to_owned(),
        Err(e) => format!("{}: {}", e.0, e.1),
    };
    state.audit(actor, name, shown, &outcome);
    result
}

/// An API error as a builder tool's failure (its status and message).
fn failure(e: ApiError) -> BuilderError {
    BuilderError(e.status.as_u16(), e.message)
}

fn refusal(r: toolhost_core::tasks::Refusal) -> BuilderError {
    failure(super::tasks::refused(r))
}

/// Pending requests and repairs, with what their builder is given.
fn open_tasks(state: &AppState) -> Value {
    let open: Vec<Value> = state
        .tasks
        .list()
        .into_iter()
        .filter(|t| t.status == toolhost_core::tasks::TaskStatus::Pending && !t.spec.buildable())
        .map(|t| {
            let mut v = t.view();
            v["description"] = json!(t.spec.description);
            v
        })
        .collect();
    json!({ "tasks": open })
}

/// A claimed task's fix, read from an environment.
async fn submit_fix(state: &AppState, args: &Value) -> Result<Value, BuilderError> {
    let env = arg(args, "env_id")?;
    let mut submission = super::tasks::Submission {
        language: args
            .get("language")
            .and_then(Value::as_str)
            .map(str::to_owned),
        source: None,
        files: None,
        examples: match args.get("examples") {
            Some(v) => Some(
                serde_json::from_value(v.clone())
                    .map_err(|e| BuilderError(422, format!("`examples`: {e}")))?,
            ),
            None => None,
        },
        cost_usd: None,
    };
    if let Some(path) = args.get("source_path").and_then(Value::as_str) {
        submission.source = Some(state.builders.read(env, path).await?);
    }
    if let Some(paths) = args.get("paths").and_then(Value::as_array) {
        let mut files = std::collections::BTreeMap::new();
        for path in paths.iter().filter_map(Value::as_str) {
            let name = path.rsplit('/').next().unwrap_or(path).to_owned();
            files.insert(name, state.builders.read(env, path).await?);
        }
        submission.files = Some(files);
    }
    let s = submission.fix().map_err(failure)?;
    let task = state
        .tasks
        .submit_source(arg(args, "task_id")?, s.fix, s.examples, s.cost_usd)
        .map_err(refusal)?;
    Ok(json!({"task_id": task.task_id, "status": task.status}))
}

async fn register(state: &AppState, args: &Value) -> Result<Value, BuilderError> {
    let env = arg(args, "env_id")?;
    let source = state.builders.read(env, arg(args, "source_path")?).await?;
    let examples: Vec<Example> = match args.get("examples") {
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| BuilderError(422, format!("`examples`: {e}")))?,
        None => Vec::new(),
    };
    let spec = TaskSpec {
        kind: Some(toolhost_core::tasks::spec::BUILD_TOOL.into()),
        name: arg(args, "name")?.to_owned(),
        description: args
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        category: args
            .get("category")
            .and_then(Value::as_str)
            .map(str::to_owned),
        language: Some(arg(args, "language")?.to_owned()),
        source: Some(source),
        examples,
        replace: args
            .get("replace")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        ..Default::default()
    };
    super::tasks::admit(state, &spec).map_err(failure)?;
    let task = state.tasks.submit(spec).map_err(refusal)?;
    Ok(json!({"task_id": task.task_id, "status": task.status}))
}

/// Who the audit log names: the admin token's holder.
const ADMIN: &str = "admin";

pub fn routes(state: AppState, allowed_hosts: Option<Vec<String>>) -> Router<AppState> {
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token((*state.shutdown).clone())
        .with_json_response(true);
    config = match allowed_hosts {
        Some(hosts) => config.with_allowed_hosts(hosts),
        None => config.disable_allowed_hosts(),
    };
    let mcp_state = state.clone();
    let mcp = StreamableHttpService::new(
        move || {
            Ok(BuilderMcp {
                state: mcp_state.clone(),
            })
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .route("/admin/builder/tools", routing::get(list))
        .route("/admin/builder/{tool}", routing::post(native_call))
        .route("/admin/audit", routing::get(audit))
        .route_service("/admin/mcp", mcp)
        .route_layer(axum::middleware::from_fn_with_state(
            state.admin_token.clone(),
            super::auth::required,
        ))
}

async fn list() -> Json<Value> {
    let tools: Vec<Value> = tools()
        .into_iter()
        .map(|(name, description, schema)| json!({"name": name, "description": description, "input_schema": schema}))
        .collect();
    Json(json!({ "tools": tools }))
}

async fn native_call(
    State(state): State<AppState>,
    Path(tool): Path<String>,
    _headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let args: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?
    };
    match call(&state, ADMIN, &tool, args).await {
        Ok(v) => Ok(Json(json!({"status": "success", "result": v}))),
        Err(BuilderError(status, message)) => Err(ApiError::new(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            "builder_error",
            message,
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    #[serde(default = "audit_limit")]
    limit: usize,
}

fn audit_limit() -> usize {
    500
}

/// `GET /admin/audit?limit=N`: the latest N (500; at most 1000) entries of
/// the audit log, every replica's, oldest first.
async fn audit(
    State(state): State<AppState>,
    query: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let Some(registry) = state.dispatcher.catalog().registry() else {
        return Ok(Json(json!({ "entries": [] })));
    };
    let mut entries = registry.audit_log(query.limit).await.map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "registry_unavailable",
            format!("the audit log cannot be read: {e}"),
        )
    })?;
    entries.reverse();
    Ok(Json(json!({ "entries": entries })))
}

/// `/admin/mcp`: the builder tools over MCP.
struct BuilderMcp {
    state: AppState,
}

impl ServerHandler for BuilderMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("toolhost-builder", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Build tools for a toolhost server: create an environment, write and run code in it, then register_tool and follow task_status.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = tools()
            .into_iter()
            .filter_map(|(name, description, schema)| {
                serde_json::from_value::<Tool>(
                    json!({"name": name, "description": description, "inputSchema": schema}),
                )
                .ok()
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        if !tools().iter().any(|(n, _, _)| *n == name) {
            return Err(McpError::invalid_params(
                format!("no builder tool `{name}`"),
                None,
            ));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        let result = match call(&self.state, ADMIN, &name, args).await {
            Ok(v) => {
                let mut r = CallToolResult::success(vec![ContentBlock::text(v.to_string())]);
                r.structured_content = Some(v);
                r
            }
            Err(BuilderError(status, message)) => {
                CallToolResult::error(vec![ContentBlock::text(format!("{status}: {message}"))])
            }
        };
        Ok(CallToolResponse::from(result))
    }
}
