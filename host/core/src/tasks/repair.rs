//! Repair tasks (seed 004 §4.3: `tool_id`, `error`, `container_id`,
//! `description`): asked for (`POST /tools/request`), or made when a tool
//! turns degraded (`[health] repair`). A repair waits, `pending`, for a
//! builder to claim it, like a request; it carries what the builder needs
//! ([`context`]): the tool's recent errors, its last health check, and its
//! source (the module a build task made it from) or its folder's files (a
//! service's build context and manifest). The fix is submitted as a module
//! (`language`, `source`: built like `build_tool`) or as a service's files
//! (the build context; the manifest stays the one serving), and goes the
//! same way as any build: built, its examples run (the ones it was made
//! with, unless the fix brings its own), staging, active. Until the fix
//! passes, the old version keeps its place (degraded: its fallbacks serve).

use std::path::Path;

use serde_json::{Value, json};

use super::spec::TaskSpec;
use super::{Refusal, Task, TaskStatus, Tasks};
use crate::catalog::Catalog;

pub const REPAIR_TOOL: &str = "repair_tool";

/// A folder's files given to a builder: text only, each at most this ...
const MAX_FILE: u64 = 64 << 10;
/// ... and all together at most this.
const MAX_FILES: u64 = 256 << 10;

/// Read a repair spec's subject: `name` (the seed's `tool_id`) is a tool
/// id or a toolkit name; the toolkit becomes `name` and the tool `tool`.
pub fn resolve(spec: &mut TaskSpec, catalog: &Catalog) -> Result<(), Refusal> {
    let given = spec.tool.clone().unwrap_or_else(|| spec.name.clone());
    if let Some(tool) = catalog.get(&given) {
        spec.name = tool.toolkit.name.clone();
        spec.tool = Some(given);
        return Ok(());
    }
    match catalog.toolkits().iter().find(|k| k.name == given) {
        Some(_) => {
            spec.name = given;
            Ok(())
        }
        None => Err(Refusal::NotFound(format!(
            "no tool or toolkit `{given}` to repair"
        ))),
    }
}

/// What the builder of a repair of `spec` (resolved) is given.
fn context(
    spec: &TaskSpec,
    catalog: &Catalog,
    plugins: &Path,
    health: &crate::health::Health,
    made_by: Option<&Task>,
) -> Value {
    let toolkit = catalog.toolkits().into_iter().find(|k| k.name == spec.name);
    let tools: Vec<_> = catalog
        .all_tools()
        .into_iter()
        .filter(|t| t.toolkit.name == spec.name)
        .filter(|t| spec.tool.as_ref().is_none_or(|id| *id == t.id))
        .collect();
    let errors: Vec<Value> = tools
        .iter()
        .map(|t| json!({"tool_id": t.id, "errors": t.record.stats.recent_errors()}))
        .collect();
    let health: Vec<Value> = tools
        .iter()
        .map(|t| json!({"tool_id": t.id, "health": health.view(&t.id)}))
        .collect();
    let source = made_by
        .filter(|t| t.spec.source.is_some())
        .map(|t| json!({"language": t.spec.language, "source": t.spec.source}));
    json!({
        "toolkit": spec.name,
        "backend": toolkit.as_ref().map(|k| k.backend.name()),
        "version": toolkit.as_ref().map(|k| k.version.clone()),
        "recent_errors": errors,
        "health": health,
        "source": source,
        "files": folder_files(&plugins.join(&spec.name)),
        "how_to_fix": "claim the task, then submit {language, source} (a module, built like build_tool) or {files} (a service's build context, flat; its manifest stays)",
    })
}

/// The text files of folder `dir` (a folder toolkit), within the limits.
fn folder_files(dir: &Path) -> Option<Value> {
    let mut files = serde_json::Map::new();
    let mut total = 0;
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(meta) = entry.metadata() else { continue };
        if name.starts_with('.') || !meta.is_file() || meta.len() > MAX_FILE {
            continue;
        }
        if total + meta.len() > MAX_FILES {
            break;
        }
        if let Ok(text) = std::fs::read_to_string(entry.path()) {
            total += meta.len();
            files.insert(name, Value::String(text));
        }
    }
    Some(Value::Object(files))
}

impl Tasks {
    /// The last completed task that made toolkit `name`.
    pub fn made(&self, name: &str) -> Option<Task> {
        self.list().into_iter().rev().find(|t| {
            t.status == TaskStatus::Completed && t.spec.name == name && t.kind != REPAIR_TOOL
        })
    }

    /// A repair task for `spec` (resolved), its [`context`] attached; the
    /// examples are those the toolkit was made with unless it brings its own.
    pub fn open_repair(
        &self,
        mut spec: TaskSpec,
        catalog: &Catalog,
        plugins: &Path,
        health: &crate::health::Health,
    ) -> Result<Task, Refusal> {
        let made = self.made(&spec.name);
        let context = context(&spec, catalog, plugins, health, made.as_ref());
        if spec.examples.is_empty()
            && let Some(made) = made
        {
            spec.examples = made.spec.examples;
        }
        let task = self.submit(spec)?;
        self.update(&task.task_id, |t| {
            t.context = Some(context);
            (
                t.status,
                "its recent errors, health and source are attached (GET /tasks/{id})".into(),
            )
        })
        .ok_or_else(|| Refusal::NotFound(format!("no task `{}`", task.task_id)))
    }
}

/// What `[health] repair` makes of a tool found degraded (told at each look
/// while it is): `request`: a repair task when it turns; `auto`: its
/// toolkit restarted when it turns, a repair task when it is still degraded
/// at the next look. One repair at a time per toolkit.
pub fn on_degraded(
    policy: crate::health::Repair,
    tasks: std::sync::Weak<Tasks>,
    catalog: std::sync::Weak<Catalog>,
    health: std::sync::Weak<crate::health::Health>,
    plugins: std::path::PathBuf,
) -> impl Fn(crate::health::Degraded) + Send + Sync {
    use crate::health::Repair;
    move |d| {
        let (Some(tasks), Some(catalog), Some(health)) =
            (tasks.upgrade(), catalog.upgrade(), health.upgrade())
        else {
            return;
        };
        let task_now = match policy {
            Repair::Off => false,
            Repair::Request => d.looks == 1,
            Repair::Auto if d.looks == 1 => {
                if let Some(k) = catalog.toolkits().iter().find(|k| k.name == d.toolkit) {
                    tracing::info!(toolkit = %d.toolkit, reason = %d.reason, "restarting a degraded toolkit ([health] repair = \"auto\")");
                    k.backend.restart(&d.toolkit);
                }
                false
            }
            Repair::Auto => d.looks == 2,
        };
        if !task_now || tasks.in_flight_for(&d.toolkit).is_some() {
            return;
        }
        let spec = TaskSpec {
            kind: Some(REPAIR_TOOL.into()),
            name: d.toolkit.clone(),
            tool: Some(d.tool_id.clone()),
            description: format!(
                "{} is degraded: {}; diagnose and fix it",
                d.tool_id, d.reason
            ),
            error: Some(d.check.clone().unwrap_or_else(|| d.reason.clone())),
            container_id: d.container_id.clone(),
            ..Default::default()
        };
        match tasks.open_repair(spec, &catalog, &plugins, &health) {
            Ok(task) => {
                tracing::warn!(tool = %d.tool_id, task = %task.task_id, "repair task opened for a degraded tool")
            }
            Err(e) => {
                tracing::warn!(tool = %d.tool_id, error = ?e, "no repair task for a degraded tool")
            }
        }
    }
}
