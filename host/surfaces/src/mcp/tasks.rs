//! MCP's tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): a
//! `tools/call` still running after [`TASK_AFTER`] becomes a task the client
//! follows with `tasks/get` (status, then the result inlined), answers with
//! `tasks/update` (a tool's questions, [`super::input`]) and stops with
//! `tasks/cancel`.
//!
//! The call is the dispatcher's [`Running`] (which XAgent's 450 answer
//! parks): started and waited for the same way, only the surfaces' patience
//! and wire differ. rmcp's [`TaskManager`] keeps the tasks' wire state (ids,
//! timestamps, TTL, pending input requests); there is one for the whole
//! server, since a stateless (2026-07-28) request's handler ends with it.
//!
//! Which calls: the tool's `task` in its manifest ([`TaskSupport`]) and the
//! client's capabilities (at `initialize`, or in the request's `_meta`). A
//! client without the extension waits for the result as before, or is refused
//! with -32021 for a `required` tool. A tool's failure is a `completed` task
//! whose result has `isError`; a trap or a host failure is a `failed` task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, ClientCapabilities, CreateTaskResult, ServerNotification, Task, TaskStatus,
    TaskStatusNotification, TaskStatusNotificationParams,
};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use rmcp::{Peer, RoleServer};

use serde_json::Value;

use super::input::TaskAsker;
use crate::state::AppState;
use opentelemetry::trace::SpanContext;
use toolhost_core::callers::Caller;
use toolhost_core::catalog::{Catalog, ToolEntry};
use toolhost_core::declared::{TaskSupport, ToolDecl};
use toolhost_core::dispatch::Running;
use toolhost_core::dispatch::{CallOptions, CallOutput};
use toolhost_core::input::{AskError, Asker, Kind, Question, Replay};
use toolhost_core::sessions::Session;
use toolhost_core::tool::BoxFuture;
use toolhost_core::tool::CallError;

/// How long a `tools/call` of an `optional` tool runs before it becomes a
/// task (its client still gets the result at once if it is done by then).
pub const TASK_AFTER: Duration = Duration::from_millis(500);
/// How long a task and its result are kept (rmcp keeps a finished one as long
/// again after it ends).
const TTL_MS: u64 = 600_000;
/// Suggested interval between `tasks/get` polls.
const POLL_MS: u64 = 250;
/// How often a task's status is looked at for `notifications/tasks`.
const STATUS_EVERY: Duration = Duration::from_millis(100);

/// How `entry` is served over MCP (its manifest's `[tools.<name>]`).
pub fn decl(entry: &ToolEntry) -> ToolDecl {
    entry
        .toolkit
        .toolkit
        .declared()
        .map(|d| d.tool(&entry.descriptor.name))
        .unwrap_or_default()
}

/// The name MCP lists `entry` by: its alias, else its id.
pub fn listed_name(entry: &ToolEntry) -> String {
    decl(entry).alias.unwrap_or_else(|| entry.id.clone())
}

/// The tool id an MCP `tools/call` names: a tool id (known, or of a plugin
/// still loading) wins over an alias of the same name.
pub fn resolve(catalog: &Catalog, name: &str) -> Option<String> {
    if catalog.may_have(name) {
        return Some(name.to_owned());
    }
    catalog
        .tools()
        .into_iter()
        .find(|t| decl(t).alias.as_deref() == Some(name))
        .map(|t| t.id.clone())
}

/// Every task of the server.
#[derive(Clone, Default)]
pub struct Tasks {
    pub manager: TaskManager,
    /// The caller of every task, and when it was made: another caller's task
    /// is unknown to a caller.
    /// Each task's caller, when it was made, and the span of the request
    /// that made it (later requests about it link to it).
    owners: Arc<Mutex<HashMap<String, Owner>>>,
}

/// A call that may become a task.
pub struct Call {
    pub session: Arc<Session>,
    pub tool: String,
    pub input: serde_json::Value,
    pub support: TaskSupport,
    /// Link the files it wrote in its result (its session outlives it).
    pub note_written: bool,
    /// Who is told of the task's status changes (`notifications/tasks`): an
    /// MCP session's client. A stateless request's peer ends with it, and
    /// `subscriptions/listen` has no filter for tasks yet: those poll.
    pub notify: Option<Peer<RoleServer>>,
    /// A stateless client's rounds: questions asked before the task exists
    /// end the call with [`Outcome::Asked`]; the next round's call, with the
    /// answers, goes on (as a task).
    pub rounds: Option<Arc<Replay>>,
    /// Who calls (its policy applies; the task is its).
    pub caller: Caller,
}

/// What a `tools/call` comes to: a result now, or a task.
pub enum Outcome {
    Now(Result<CallOutput, CallError>),
    Task(CreateTaskResult),
    /// The call ended on questions for the client's next round.
    Asked,
}

type Owner = (Caller, Instant, Option<SpanContext>);

/// The -32021 refusal of a `required` tool to a client without tasks.
pub fn tasks_required() -> McpError {
    McpError::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

impl Tasks {
    /// `Err` as for a task never made (the task manager's own words) when
    /// task `id` is another caller's.
    pub fn check_owner(&self, id: &str, who: &Caller) -> Result<(), McpError> {
        let owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        match owners.get(id) {
            Some((owner, _, _)) if !owner.same(who) => {
                tracing::info!(
                    caller = who.name(),
                    task = id,
                    rule = "tasks belong to their caller",
                    "MCP: another caller's task: answered as unknown"
                );
                Err(McpError::invalid_params(
                    format!("unknown task: {id}"),
                    None,
                ))
            }
            _ => Ok(()),
        }
    }

    /// Record `task`'s caller and origin; forget those of tasks past twice
    /// their TTL.
    fn note_owner(&self, task: &Task, owner: &Caller, origin: Option<SpanContext>) {
        let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        let keep = Duration::from_millis(2 * TTL_MS);
        owners.retain(|_, (_, made, _)| made.elapsed() < keep);
        owners.insert(
            task.task_id.clone(),
            (owner.clone(), Instant::now(), origin),
        );
    }

    /// The span of the request that made task `id`, if traced.
    pub fn origin(&self, id: &str) -> Option<SpanContext> {
        let owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        owners.get(id).and_then(|(_, _, origin)| origin.clone())
    }

    /// Run `tool` for a client that can follow a task: the result if it
    /// comes within [`TASK_AFTER`] (and the tool is not `required`), else a
    /// task. `on_end` runs when the call has ended (a toolhost session the
    /// task kept open is let go there).
    pub async fn run(
        &self,
        state: &AppState,
        call: Call,
        asker: TaskAsker,
        on_end: impl FnOnce() + Send + 'static,
    ) -> Outcome {
        let Call {
            session,
            tool,
            input,
            support,
            note_written,
            notify,
            rounds,
            caller,
        } = call;
        let ask: Arc<dyn toolhost_core::input::Asker> = match &rounds {
            Some(replay) => Arc::new(Rounds {
                replay: replay.clone(),
                task: asker.clone(),
            }),
            None => Arc::new(asker.clone()),
        };
        let options = CallOptions {
            ask: Some(ask),
            note_written,
            caller: Some(caller.clone()),
            ..CallOptions::default()
        };
        let mut running = Running::start(
            state.dispatcher.clone(),
            session,
            tool.clone(),
            input,
            options,
        );
        let origin = running.origin().cloned();
        let options = TaskOptions::new()
            .with_ttl_ms(TTL_MS)
            .with_poll_interval_ms(POLL_MS)
            .with_status_message(format!("`{tool}` is running"));
        // A question makes the call a task at once (rounds: ends it).
        if support == TaskSupport::Optional || rounds.is_some() {
            let done = tokio::select! {
                done = running.wait(TASK_AFTER) => done,
                () = asker.wanted.notified() => None,
            };
            if let Some(done) = done {
                on_end();
                if rounds.is_some_and(|r| !r.pending().is_empty()) {
                    return Outcome::Asked;
                }
                if support == TaskSupport::Optional {
                    return Outcome::Now(done);
                }
                // A `required` tool's answer is a task's, even when quick.
                let ended = settle(done);
                let task = self
                    .manager
                    .spawn(options, move |_| Box::pin(std::future::ready(ended)));
                self.note_owner(&task, &caller, origin.clone());
                return Outcome::Task(CreateTaskResult::new(task));
            }
        }
        let task: Task = self.manager.spawn(options, move |context: TaskContext| {
            asker.attach(context.clone());
            Box::pin(async move {
                let outcome = tokio::select! {
                    done = running.finish() => settle(done),
                    // Dropping the call cancels it (the wasm store is torn
                    // down, a Docker node's command discarded).
                    () = context.cancelled() => Err(TaskExit::Cancelled),
                };
                on_end();
                outcome
            })
        });
        self.note_owner(&task, &caller, origin.clone());
        tracing::debug!(tool, task = %task.task_id, "MCP: the call goes on as a task");
        if let Some(peer) = notify {
            tokio::spawn(tell_status(
                self.manager.clone(),
                task.task_id.clone(),
                task.status,
                peer,
            ));
        }
        Outcome::Task(CreateTaskResult::new(task))
    }
}

/// A stateless client's asker for a call that may become a task: answers
/// from its rounds first; then, once the task exists, through the task; else
/// the questions end the call for the next round.
struct Rounds {
    replay: Arc<Replay>,
    task: TaskAsker,
}

impl Asker for Rounds {
    fn ask(&self, questions: Vec<Question>) -> BoxFuture<Result<Vec<Value>, AskError>> {
        let answered = questions
            .iter()
            .all(|q| self.replay.answers().contains_key(&q.key));
        if !answered && self.task.attached() {
            return self.task.ask(questions);
        }
        self.replay.ask(questions)
    }

    fn ended_the_call(&self) -> bool {
        self.replay.ended_the_call()
    }

    fn lacking(&self) -> Vec<Kind> {
        self.replay.lacking()
    }
}

/// Send `peer` the task's status each time it changes from `last` (with what
/// `tasks/get` would answer then: the questions, the result), up to its end.
async fn tell_status(
    manager: TaskManager,
    id: String,
    mut last: TaskStatus,
    peer: Peer<RoleServer>,
) {
    loop {
        tokio::time::sleep(STATUS_EVERY).await;
        let Ok(now) = manager.get_task(&id) else {
            return; // expired
        };
        let status = now.task.status;
        if status == last {
            continue;
        }
        last = status;
        let note = TaskStatusNotification::new(TaskStatusNotificationParams::new(now));
        if peer
            .send_notification(ServerNotification::TaskStatusNotification(note))
            .await
            .is_err()
            || status.is_terminal()
        {
            return;
        }
    }
}

/// A task's ended call: the tool's own failures (and limits) are results with
/// `isError`, as they are without a task; a trap or a host failure fails the
/// task (`failed`, with a JSON-RPC error).
fn settle(done: Result<CallOutput, CallError>) -> Result<CallToolResult, TaskExit> {
    match done {
        Ok(out) => Ok(super::success(out)),
        Err(e @ (CallError::Trap(_) | CallError::Internal(_))) => {
            let rendered = crate::error::ApiError::from(e);
            Err(TaskExit::Error(McpError::internal_error(
                rendered.text(),
                Some(serde_json::json!({"kind": rendered.kind})),
            )))
        }
        Err(CallError::NotFound(name)) => Err(TaskExit::Error(super::unknown_tool(&name))),
        Err(e) => Ok(super::failure(&e)),
    }
}
