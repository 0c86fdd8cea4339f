//! Tool requests and their tasks (seed 004): `POST /tools/request` makes a
//! task, a worker builds it off the request path (one at a time), and its
//! status, log and events are kept in the registry, so a restart finds
//! them: `pending → building → testing → completed | failed | cancelled`.
//!
//! A `build_tool` task builds the given source with the language's SDK
//! ([`build`]); a `request` (a description only) waits, `pending`, for an
//! external builder (a coding agent) to claim it and submit source, then
//! proceeds the same way.

pub mod billing;
pub mod budget;
pub mod build;
mod claims;
pub mod config;
pub mod deploy;
pub mod deploy_plan;
pub mod repair;
mod replicas;
pub mod seed;
pub mod spec;
mod uv_build;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use crate::registry::{Registry, Write};
pub use spec::{Example, TaskSpec};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Over the budget's approval threshold: waiting for an admin.
    AwaitingApproval,
    Pending,
    Building,
    Testing,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::AwaitingApproval => "awaiting_approval",
            TaskStatus::Pending => "pending",
            TaskStatus::Building => "building",
            TaskStatus::Testing => "testing",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// One step's command and what it printed (seed 004's `last_run.log`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunLog {
    pub command: String,
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub duration_ms: u64,
}

/// A line of a task's history, also sent on `GET /tasks/{id}/events`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskEvent {
    /// Unix time, ms.
    pub at: u64,
    pub status: TaskStatus,
    pub message: String,
}

/// What a completed task made.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskResult {
    pub tool_id: String,
    pub tool_ids: Vec<String>,
    /// Where to call `tool_id`.
    pub url: String,
    pub version: String,
}

/// A task as `GET /tasks/{id}/status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    pub task_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub status: TaskStatus,
    pub spec: TaskSpec,
    pub created_at: u64,
    pub updated_at: u64,
    pub result: Option<TaskResult>,
    pub error: Option<String>,
    pub last_run: Option<RunLog>,
    /// The external builder that claimed it.
    pub claimed_by: Option<String>,
    pub events: Vec<TaskEvent>,
    /// The replica building it (or to build it) on a shared registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// What its builder is given beside the spec (a repair's errors,
    /// health and source: [`repair::context`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<serde_json::Value>,
}

impl Task {
    /// Seed 004's task status: everything but the history (see
    /// `/tasks/{id}/events`) and the source (its size instead).
    pub fn view(&self) -> serde_json::Value {
        let mut spec = serde_json::to_value(&self.spec).unwrap_or_default();
        if let Some(source) = &self.spec.source {
            spec["source"] = serde_json::json!(format!("<{} bytes>", source.len()));
        }
        serde_json::json!({
            "task_id": self.task_id,
            "type": self.kind,
            "status": self.status,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "result": self.result,
            "error": self.error,
            "last_run": self.last_run,
            "claimed_by": self.claimed_by,
            "runner": self.runner,
            "context": self.context,
            "spec": spec,
        })
    }
}

/// Ended tasks kept (in memory and in the registry); the oldest beyond are
/// forgotten as new tasks come.
pub const KEEP_ENDED: usize = 1000;

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

struct Entry {
    task: Task,
    events: broadcast::Sender<TaskEvent>,
    cancel: CancellationToken,
}

impl Entry {
    fn new(task: Task) -> Entry {
        Entry {
            task,
            events: broadcast::channel(256).0,
            cancel: CancellationToken::new(),
        }
    }
}

/// A builder's fix of a claimed task.
pub enum Fix {
    /// A module, built like a `build_tool` task.
    Source { language: String, source: String },
    /// A repaired service's build context (flat).
    Files(std::collections::BTreeMap<String, String>),
}

/// Why a task operation was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    NotFound(String),
    /// 409: the task's state does not allow it.
    Conflict(String),
    /// 422: the budget refuses its cost.
    OverBudget(String),
    /// 422: what was given cannot be used.
    Invalid(String),
}

/// Every task, and the queue of the build worker.
pub struct Tasks {
    entries: Mutex<HashMap<String, Entry>>,
    /// Task ids, oldest first.
    order: Mutex<Vec<String>>,
    queue: mpsc::UnboundedSender<String>,
    registry: Option<Arc<Registry>>,
    budget: budget::BudgetConfig,
    /// Tasks of gone replicas already offered to this one's worker.
    offered: Mutex<std::collections::HashSet<String>>,
    /// Where a task's end is told (`tool_ready`, `tool_error`).
    pub events: std::sync::OnceLock<Arc<crate::events::Events>>,
    /// Seed 004's billing log: a completed task's cost, admins' entries.
    pub billing: billing::Billing,
}

impl Tasks {
    /// The tasks saved in the registry (`saved`, JSON) and the receiving end
    /// of the build queue. A task the last run left building or testing
    /// ends `failed` (the build died with that process); a claimed request
    /// goes back to `pending`; pending builds are queued again.
    pub fn new(
        registry: Option<Arc<Registry>>,
        saved: Vec<String>,
        budget: budget::BudgetConfig,
    ) -> (Arc<Tasks>, mpsc::UnboundedReceiver<String>) {
        let (queue, rx) = mpsc::unbounded_channel();
        let tasks = Arc::new(Tasks {
            entries: Mutex::new(HashMap::new()),
            order: Mutex::new(Vec::new()),
            queue,
            budget,
            offered: Mutex::default(),
            events: Default::default(),
            billing: billing::Billing::new(registry.clone()),
            registry,
        });
        // Replicas sharing the registry take over what a gone one was
        // building ([`Tasks::take_over`]) instead of failing it.
        let shared = tasks.shared();
        for body in saved {
            let Ok(task) = serde_json::from_str::<Task>(&body) else {
                tracing::warn!("a saved task does not parse; skipped");
                continue;
            };
            let id = task.task_id.clone();
            let status = task.status;
            let external = task.claimed_by.is_some() && task.spec.source.is_none();
            tasks.insert(task);
            match status {
                _ if shared => {}
                TaskStatus::Building | TaskStatus::Testing if external => {
                    tasks.update(&id, |t| {
                        t.claimed_by = None;
                        (
                            TaskStatus::Pending,
                            "the server restarted: the claim is void, the request is open again"
                                .into(),
                        )
                    });
                }
                TaskStatus::Building | TaskStatus::Testing => {
                    tasks.update(&id, |t| {
                        let message = format!(
                            "the server stopped while this task was {}: submit the request again",
                            status.as_str()
                        );
                        t.error = Some(message.clone());
                        (TaskStatus::Failed, message)
                    });
                }
                TaskStatus::Pending if task_is_buildable(&tasks, &id) => {
                    let _ = tasks.queue.send(id);
                }
                _ => {}
            }
        }
        (tasks, rx)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn insert(&self, task: Task) {
        let id = task.task_id.clone();
        self.lock().insert(id.clone(), Entry::new(task));
        self.order
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(id);
    }

    fn save(&self, task: &Task) {
        if let Some(registry) = &self.registry
            && let Ok(body) = serde_json::to_string(task)
        {
            registry.write(Write::Task(task.task_id.clone(), body));
        }
    }

    /// What this month spent (the billing log's entries, those awaiting
    /// approval held too) and committed (the cost of tasks going on or
    /// awaiting approval: entered in the log when they complete; nothing
    /// for one that fails or is cancelled).
    fn spent_this_month(&self, entries: &HashMap<String, Entry>) -> f64 {
        let going: f64 = entries
            .values()
            .filter(|e| !e.task.status.is_final())
            .filter_map(|e| e.task.spec.cost_usd)
            .sum();
        // (A sum of nothing is -0.0.)
        self.billing.spent_this_month() + going + 0.0
    }

    /// The budget: limits, and what this month committed.
    pub fn budget(&self) -> serde_json::Value {
        let spent = self.spent_this_month(&self.lock());
        let b = &self.budget;
        serde_json::json!({
            "monthly_limit_usd": b.monthly_limit_usd,
            "single_tx_limit_usd": b.single_tx_limit_usd,
            "require_approval_above_usd": b.require_approval_above_usd,
            "spent_this_month_usd": spent,
            "transactions": self.billing.current(),
            "remaining_usd": b.monthly_limit_usd.map(|l| (l - spent).max(0.0)),
        })
    }

    /// A new task for `spec` (already checked), queued if it can be built;
    /// over the budget's approval threshold it waits for an admin, over a
    /// limit it is refused.
    pub fn submit(&self, spec: TaskSpec) -> Result<Task, Refusal> {
        let now = now_ms();
        let mut entries = self.lock();
        let verdict = self
            .budget
            .judge(spec.cost_usd, self.spent_this_month(&entries));
        let (status, message) = match verdict {
            budget::Verdict::Refused(why) => return Err(Refusal::OverBudget(why)),
            budget::Verdict::NeedsApproval(why) => (TaskStatus::AwaitingApproval, why),
            budget::Verdict::Go if spec.kind() == spec::BUILD_TOOL => (
                TaskStatus::Pending,
                "queued for the build worker".to_owned(),
            ),
            budget::Verdict::Go => (
                TaskStatus::Pending,
                "waiting for a builder to claim it (POST /tasks/{id}/claim)".to_owned(),
            ),
        };
        let task = Task {
            task_id: format!("task-{}", uuid::Uuid::new_v4().simple()),
            kind: spec.kind().to_owned(),
            status,
            created_at: now,
            updated_at: now,
            result: None,
            error: None,
            last_run: None,
            claimed_by: None,
            events: vec![TaskEvent {
                at: now,
                status,
                message,
            }],
            spec,
            runner: self.me(),
            context: None,
        };
        let id = task.task_id.clone();
        entries.insert(id.clone(), Entry::new(task.clone()));
        drop(entries);
        self.order
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(id.clone());
        self.save(&task);
        self.forget_oldest_ended(KEEP_ENDED);
        if status == TaskStatus::Pending && task.spec.buildable() {
            let _ = self.queue.send(id);
        }
        Ok(task)
    }

    /// `POST /tasks/{id}/approve`: an admin lets a task over the approval
    /// threshold go on.
    pub fn approve(&self, id: &str) -> Result<Task, Refusal> {
        let current = self
            .get(id)
            .ok_or_else(|| Refusal::NotFound(format!("no task `{id}`")))?;
        if current.status != TaskStatus::AwaitingApproval {
            return Err(Refusal::Conflict(format!(
                "task `{id}` is not awaiting approval"
            )));
        }
        let has_source = current.spec.buildable();
        let claimed = current.claimed_by.is_some();
        let task = self
            .update(id, |_| match (has_source, claimed) {
                (true, true) => (
                    TaskStatus::Building,
                    "approved: queued for the build worker".into(),
                ),
                (true, false) => (
                    TaskStatus::Pending,
                    "approved: queued for the build worker".into(),
                ),
                (false, _) => (
                    TaskStatus::Pending,
                    "approved: waiting for a builder to claim it".into(),
                ),
            })
            .ok_or_else(|| Refusal::NotFound(format!("no task `{id}`")))?;
        if has_source {
            let _ = self.queue.send(id.to_owned());
        }
        Ok(task)
    }

    /// Forget the oldest ended tasks beyond `keep` of them.
    pub fn forget_oldest_ended(&self, keep: usize) {
        let mut order = self.order.lock().unwrap_or_else(|e| e.into_inner());
        let mut entries = self.lock();
        let ended = order
            .iter()
            .filter(|id| entries.get(*id).is_some_and(|e| e.task.status.is_final()))
            .count();
        if ended <= keep {
            return;
        }
        let mut excess = ended - keep;
        let mut gone = Vec::new();
        order.retain(|id| {
            if excess > 0 && entries.get(id).is_some_and(|e| e.task.status.is_final()) {
                excess -= 1;
                gone.push(id.clone());
                return false;
            }
            true
        });
        for id in gone {
            entries.remove(&id);
            if let Some(registry) = &self.registry {
                registry.write(Write::ForgetTask(id));
            }
        }
    }

    /// Change task `id`: `change` returns its new status and the event's
    /// message. Saved and broadcast.
    pub fn update(
        &self,
        id: &str,
        change: impl FnOnce(&mut Task) -> (TaskStatus, String),
    ) -> Option<Task> {
        let mut entries = self.lock();
        let entry = entries.get_mut(id)?;
        let was_final = entry.task.status.is_final();
        let (status, message) = change(&mut entry.task);
        let event = TaskEvent {
            at: now_ms(),
            status,
            message,
        };
        entry.task.status = status;
        entry.task.updated_at = event.at;
        entry.task.events.push(event.clone());
        let task = entry.task.clone();
        // Billed before the status shows (the tasks' lock is held until the
        // event is sent): whoever sees `completed` finds its cost entered.
        if !was_final && task.status == TaskStatus::Completed {
            self.bill(&task);
        }
        let _ = entry.events.send(event);
        drop(entries);
        self.save(&task);
        if let Some(events) = self.events.get().filter(|_| !was_final) {
            events.task_ended(&task);
        }
        Some(task)
    }

    /// Enter a completed task's reported cost in the billing log.
    fn bill(&self, task: &Task) {
        let Some(amount) = task.spec.cost_usd.filter(|c| *c > 0.0) else {
            return;
        };
        let by = task.claimed_by.clone().unwrap_or_else(|| "toolhost".into());
        self.billing.enter(billing::Transaction {
            id: billing::new_id(),
            at: now_ms(),
            provider: format!("builder:{by}"),
            amount_usd: amount,
            description: format!("task {}: {} `{}`", task.task_id, task.kind, task.spec.name),
            task_id: Some(task.task_id.clone()),
            by,
            status: billing::COMMITTED.into(),
        });
    }

    /// Write task `id` as building and wait until that is on disk, before
    /// its build runs and shows the status: a server stopped during the
    /// build then fails the task at its restart ([`Tasks::new`]), where a
    /// status still queued for the registry's writer left it `pending` on
    /// disk and the restarted server built it again unseen.
    pub async fn building_on_disk(&self, id: &str) {
        let (Some(registry), Some(mut task)) = (&self.registry, self.get(id)) else {
            return;
        };
        task.status = TaskStatus::Building;
        self.save(&task);
        if let Err(e) = registry.sync().await {
            tracing::warn!(task = %id, error = %e, "cannot write the task's status before its build");
        }
    }

    pub fn get(&self, id: &str) -> Option<Task> {
        self.lock().get(id).map(|e| e.task.clone())
    }

    /// Every task, oldest first.
    pub fn list(&self) -> Vec<Task> {
        let order = self.order.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let entries = self.lock();
        order
            .iter()
            .filter_map(|id| entries.get(id).map(|e| e.task.clone()))
            .collect()
    }

    /// The task's history so far and its events from now on, taken together
    /// (none missed, none twice).
    pub fn follow(&self, id: &str) -> Option<(Task, broadcast::Receiver<TaskEvent>)> {
        let entries = self.lock();
        let entry = entries.get(id)?;
        Some((entry.task.clone(), entry.events.subscribe()))
    }

    /// The cancellation of task `id`'s build.
    pub fn cancellation(&self, id: &str) -> Option<CancellationToken> {
        self.lock().get(id).map(|e| e.cancel.clone())
    }

    /// Whether a task not yet final is about toolkit `name`.
    pub fn in_flight_for(&self, name: &str) -> Option<String> {
        self.lock()
            .values()
            .find(|e| !e.task.status.is_final() && e.task.spec.name == name)
            .map(|e| e.task.task_id.clone())
    }

    /// `DELETE /tasks/{id}`: a pending task ends now; a running build is
    /// stopped and ends `cancelled`.
    pub fn cancel(&self, id: &str) -> Result<Task, Refusal> {
        let (status, token) = {
            let entries = self.lock();
            let entry = entries
                .get(id)
                .ok_or_else(|| Refusal::NotFound(format!("no task `{id}`")))?;
            (entry.task.status, entry.cancel.clone())
        };
        if status.is_final() {
            return Err(Refusal::Conflict(format!(
                "task `{id}` has already ended ({})",
                status.as_str()
            )));
        }
        token.cancel();
        self.update(id, |_| {
            (TaskStatus::Cancelled, "cancelled by an admin".into())
        })
        .ok_or_else(|| Refusal::NotFound(format!("no task `{id}`")))
    }
}

fn task_is_buildable(tasks: &Tasks, id: &str) -> bool {
    tasks.get(id).is_some_and(|t| t.spec.buildable())
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
