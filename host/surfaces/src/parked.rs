//! Calls XAgent's `/execute_tool` stopped waiting for: XAgent's 450 retry
//! for any tool, not only those with a continuation of their own.
//!
//! A call still running after `[xagent] patience_ms` goes on in the
//! background ("parked" in its session). The caller gets 450 with the call's
//! latest progress and `next_calling` = [`AWAIT_CALL`] with the call's id;
//! calling that waits as long again and answers the result, or 450 again
//! with newer progress. A parked call is cancelled (on the server, for an MCP
//! tool) when its session is closed or released, or when nobody has asked
//! for it for [`UNCLAIMED`]. At most [`PER_SESSION`] calls of a session are
//! parked at once: beyond, `/execute_tool` waits for the call to end, as it
//! did before parking existed.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use toolhost_core::dispatch::{CallOutput, Running};
use toolhost_core::tool::CallError;

/// The continuation `next_calling` names. Not a catalog tool: plugin names
/// are lowercase, so no tool id can take it. Answered by `/execute_tool`;
/// `/get_json_schema_for_tools` describes it.
pub const AWAIT_CALL: &str = "ToolhostEnv_await_call";
/// Calls of one session parked at once.
pub const PER_SESSION: usize = 8;
/// A parked call nobody has asked for this long is cancelled and forgotten.
pub const UNCLAIMED: Duration = Duration::from_secs(600);

/// [`AWAIT_CALL`] as XAgent's `tools_json` lists a tool.
pub fn await_call_json() -> Value {
    json!({
        "name": AWAIT_CALL,
        "description": "Wait for a tool call that was still running (answered 450 with this as `next_calling`) and return its result, or its latest progress if it is still running.",
        "parameters": {
            "type": "object",
            "properties": {
                "call_id": {"type": "string", "description": "The `call_id` the 450 answer gave."}
            },
            "required": ["call_id"],
        },
    })
}

struct Slot {
    session: String,
    tool: String,
    /// Taken while somebody waits for the call.
    running: Option<Running>,
    claimed: Instant,
}

/// What waiting for a parked call came to.
pub enum Awaited {
    /// The call of this tool ended.
    Done(String, Result<CallOutput, CallError>),
    /// Still running: the 450 body's `detail`.
    Retry(Value),
    Unknown,
    /// Somebody else is waiting for it now.
    Busy,
}

/// The parked calls of every session.
pub struct Parked {
    slots: Mutex<HashMap<String, Slot>>,
    /// How long a request waits for a call (`[xagent] patience_ms`).
    pub patience: Duration,
}

impl Parked {
    pub fn new(patience: Duration) -> Self {
        Parked {
            slots: Default::default(),
            patience,
        }
    }

    /// Park `running` (still running after the patience) for `session`:
    /// the 450 body's `detail`. `Err(running)` when the session has its
    /// fill of parked calls.
    pub fn park(&self, session: &str, tool: &str, mut running: Running) -> Result<Value, Running> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        sweep(&mut slots);
        if slots.values().filter(|s| s.session == session).count() >= PER_SESSION {
            return Err(running);
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        running.detach();
        let detail = retry(&id, tool, &running);
        slots.insert(
            id,
            Slot {
                session: session.to_owned(),
                tool: tool.to_owned(),
                running: Some(running),
                claimed: Instant::now(),
            },
        );
        Ok(detail)
    }

    /// Wait up to the patience for parked call `id` of `session`.
    pub async fn wait(&self, session: &str, id: &str) -> Awaited {
        let (tool, running) = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            sweep(&mut slots);
            let Some(slot) = slots.get_mut(id).filter(|s| s.session == session) else {
                return Awaited::Unknown;
            };
            slot.claimed = Instant::now();
            match slot.running.take() {
                Some(r) => (slot.tool.clone(), r),
                None => return Awaited::Busy,
            }
        };
        // Put back however this wait ends, its caller gone included.
        let mut guard = PutBack {
            parked: self,
            id,
            running: Some(running),
        };
        let running = guard.running.as_mut().expect("just put");
        if let Some(origin) = running.origin() {
            toolhost_core::telemetry::link(&tracing::Span::current(), origin, "awaits_call");
        }
        match running.wait(self.patience).await {
            Some(done) => {
                self.slots
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(id);
                Awaited::Done(tool, done)
            }
            None => Awaited::Retry(retry(id, &tool, running)),
        }
    }

    /// Cancel and forget the parked calls of `session`.
    pub fn forget_session(&self, session: &str) {
        // The calls are cancelled as their `Running`s drop, outside the lock.
        let gone: Vec<Slot> = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let ids: Vec<String> = slots
                .iter()
                .filter(|(_, s)| s.session == session)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| slots.remove(id)).collect()
        };
        drop(gone);
    }
}

/// Returns a call taken out for a wait to its slot, however the wait ends.
struct PutBack<'a> {
    parked: &'a Parked,
    id: &'a str,
    running: Option<Running>,
}

impl Drop for PutBack<'_> {
    fn drop(&mut self) {
        let mut slots = self.parked.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = slots.get_mut(self.id) {
            slot.claimed = Instant::now();
            if slot.running.is_none() {
                slot.running = self.running.take();
            }
        }
    }
}

/// Forget (so cancel) calls nobody asked for in [`UNCLAIMED`].
fn sweep(slots: &mut HashMap<String, Slot>) {
    slots.retain(|_, s| s.running.is_none() || s.claimed.elapsed() < UNCLAIMED);
}

/// The `detail` of a 450 answer for parked call `id`.
fn retry(id: &str, tool: &str, running: &Running) -> Value {
    json!({
        "type": "retry",
        "message": format!("`{tool}` is still running: call `{AWAIT_CALL}` with these arguments for its result"),
        "next_calling": AWAIT_CALL,
        "arguments": {"call_id": id},
        "partial": running.partial(),
    })
}
