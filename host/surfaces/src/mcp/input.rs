//! A tool's questions ([`toolhost_core::input`]) over MCP.
//!
//! - A session (2025-11-25) whose client declared the capability: the
//!   question is sent on the session's stream (`elicitation/create`,
//!   `sampling/createMessage`, `roots/list`) and the call waits ([`PeerAsker`]).
//! - A task: the task reports `input_required` with the questions as its
//!   `inputRequests`, answered by `tasks/update` ([`TaskAsker`]).
//! - 2026-07-28 (stateless): the call ends and the answer is an
//!   `InputRequiredResult` whose `requestState` carries the answers so far,
//!   sealed with the server's key (HMAC, rmcp's `RequestStateCodec`) and bound
//!   to the tool and a digest of its arguments; the client calls again with
//!   `inputResponses` and that state, the call runs again with every answer,
//!   and a tampered or foreign state is refused (-32602) ([`Mrtr`]).
//! - Otherwise nobody can answer: the tool is told "no input available".

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolResult, ClientCapabilities, InputRequest, InputRequests, InputRequiredResult,
    ServerRequest,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::task_manager::TaskContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use tokio::sync::Notify;

use toolhost_core::input::{AskError, Asker, Can, Kind, Question, Replay, Sealer};
use toolhost_core::tool::BoxFuture;

/// A question as MCP's request.
fn request(q: &Question) -> Result<InputRequest, AskError> {
    serde_json::from_value(json!({"method": q.kind.method(), "params": q.params}))
        .map_err(|e| AskError::Invalid(format!("`{}`: {e}", q.key)))
}

/// The kinds of question a client declared it can answer.
pub fn kinds(caps: Option<&ClientCapabilities>) -> Vec<Kind> {
    let Some(caps) = caps else { return Vec::new() };
    let mut kinds = Vec::new();
    if caps.elicitation.is_some() {
        kinds.push(Kind::Form);
    }
    if caps.sampling.is_some() {
        kinds.push(Kind::Sampling);
    }
    if caps.roots.is_some() {
        kinds.push(Kind::Roots);
    }
    kinds
}

/// A stateless call that failed for want of answers its client cannot give
/// fails for the client's missing capabilities: -32021 naming them (HTTP
/// 400). A tool that did without them (another way, or a default) is not
/// concerned.
pub fn missing_capability(
    result: &Result<CallToolResult, McpError>,
    asker: &dyn Asker,
) -> Option<McpError> {
    let failed = match result {
        Ok(r) => r.is_error == Some(true),
        Err(_) => false,
    };
    let lacking = asker.lacking();
    if !failed || lacking.is_empty() {
        return None;
    }
    let mut caps = serde_json::Map::new();
    for kind in lacking {
        let name = match kind {
            Kind::Form => "elicitation",
            Kind::Sampling => "sampling",
            Kind::Roots => "roots",
        };
        caps.insert(name.into(), json!({}));
    }
    let caps: ClientCapabilities = serde_json::from_value(Value::Object(caps)).ok()?;
    Some(McpError::missing_required_client_capability(caps))
}

/// Asks on a session's stream and waits for the answers.
pub struct PeerAsker {
    pub peer: Peer<RoleServer>,
    pub can: Can,
}

impl Asker for PeerAsker {
    fn ask(&self, questions: Vec<Question>) -> BoxFuture<Result<Vec<Value>, AskError>> {
        let peer = self.peer.clone();
        let checked = self.can.check(&questions);
        Box::pin(async move {
            checked?;
            let mut sent = Vec::new();
            for q in &questions {
                let request: ServerRequest = match request(q)? {
                    InputRequest::Elicitation(r) => r.into(),
                    InputRequest::CreateMessage(r) => r.into(),
                    InputRequest::ListRoots(r) => r.into(),
                    _ => return Err(AskError::Invalid(format!("`{}`: not a question", q.key))),
                };
                sent.push(peer.send_request(request));
            }
            let mut answers = Vec::new();
            for answer in futures::future::join_all(sent).await {
                let answer = answer.map_err(|e| {
                    AskError::Unavailable(format!("the client did not answer: {e}"))
                })?;
                answers.push(serde_json::to_value(answer).unwrap_or(Value::Null));
            }
            Ok(answers)
        })
    }
}

/// Asks through a task's `input_required` status. The task may not exist yet
/// when the tool asks: [`TaskAsker::wanted`] tells the call's runner to make
/// it at once, and the question waits for its context.
/// A cheap handle: clones share one asker.
#[derive(Clone, Default)]
pub struct TaskAsker(Arc<TaskAskerState>);

#[derive(Default)]
pub struct TaskAskerState {
    context: Mutex<Option<TaskContext>>,
    ready: Notify,
    pub wanted: Notify,
    can: Can,
}

impl std::ops::Deref for TaskAsker {
    type Target = TaskAskerState;
    fn deref(&self) -> &TaskAskerState {
        &self.0
    }
}

impl TaskAsker {
    pub fn new(kinds: Vec<Kind>) -> Self {
        TaskAsker(Arc::new(TaskAskerState {
            can: Can::new(kinds),
            ..Default::default()
        }))
    }
}

impl TaskAskerState {
    pub fn attach(&self, context: TaskContext) {
        *self.context.lock().unwrap_or_else(|e| e.into_inner()) = Some(context);
        self.ready.notify_waiters();
    }

    /// Whether its task exists (questions go through it).
    pub fn attached(&self) -> bool {
        self.context().is_some()
    }

    fn context(&self) -> Option<TaskContext> {
        self.context
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Asker for TaskAsker {
    fn ask(&self, questions: Vec<Question>) -> BoxFuture<Result<Vec<Value>, AskError>> {
        let this = self.clone();
        let checked = self.can.check(&questions);
        Box::pin(async move {
            checked?;
            let requests = questions
                .iter()
                .map(request)
                .collect::<Result<Vec<_>, _>>()?;
            let context = loop {
                let ready = this.ready.notified();
                if let Some(c) = this.context() {
                    break c;
                }
                this.wanted.notify_one();
                ready.await;
            };
            let asked = questions
                .iter()
                .zip(requests)
                .map(|(q, r)| context.request_input(q.key.clone(), r));
            futures::future::join_all(asked)
                .await
                .into_iter()
                .map(|a| a.map_err(|_| AskError::Unavailable("the task was cancelled".into())))
                .collect()
        })
    }
}

/// Stateless input rounds (2026-07-28): `requestState` is sealed by
/// [`toolhost_core::input::Sealer`].
pub struct Mrtr {
    sealer: Sealer,
}

impl Default for Mrtr {
    /// A key of this server's run: states do not outlive a restart.
    fn default() -> Self {
        Mrtr {
            sealer: Sealer::new("mcp"),
        }
    }
}

impl Mrtr {
    /// The asker of a round: the answers of the sealed `state` (checked) and
    /// of `responses`.
    pub fn replay(
        &self,
        tool: &str,
        input: &Value,
        state: Option<&str>,
        responses: Option<BTreeMap<String, Value>>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Arc<Replay>, McpError> {
        let mut answers = BTreeMap::new();
        if let Some(sealed) = state {
            let opened = self
                .sealer
                .open(sealed, tool, input)
                .map_err(|e| McpError::invalid_params(format!("requestState: {e}"), None))?;
            answers = opened.answers;
        }
        for (key, value) in responses.unwrap_or_default() {
            if !value.is_object() {
                return Err(McpError::invalid_params(
                    format!("inputResponses `{key}`: a result object"),
                    None,
                ));
            }
            answers.insert(key, value);
        }
        let kinds = kinds(context.client_capabilities().as_ref());
        Ok(Replay::new(answers, kinds))
    }

    /// The `InputRequiredResult` of a round that ended on questions.
    pub fn input_required(
        &self,
        tool: &str,
        input: &Value,
        replay: &Replay,
    ) -> Result<InputRequiredResult, McpError> {
        let mut requests = InputRequests::new();
        for q in replay.pending() {
            let r = request(&q).map_err(|e| McpError::internal_error(e.to_string(), None))?;
            requests.insert(q.key.clone(), r);
        }
        let sealed = self
            .sealer
            .seal(tool, input, replay)
            .map_err(|e| McpError::internal_error(e, None))?;
        Ok(InputRequiredResult::new(Some(requests), Some(sealed)))
    }
}
