//! Asking the caller for input mid-call (`toolhost:input/ask@0.1.0`): a
//! confirmation, a missing value, a completion from the client's model.
//!
//! ```ignore
//! use toolhost_sdk::input;
//! match input::confirm("delete", &format!("Delete {path}?")) {
//!     Ok(true) => { /* go on */ }
//!     Ok(false) => return Err(ToolError::failed("not confirmed")),
//!     Err(input::Unavailable(why)) => return Err(ToolError::failed(why)),
//! }
//! ```
//!
//! Over MCP a question becomes elicitation (or sampling, roots) for clients
//! that can answer; a stateless client answers in a second request, for which
//! the host runs the call again from the start with the answers so far, so a
//! tool asks before it changes anything, with the same keys for the same
//! input. Where nobody can answer, [`ask`] says so ([`Unavailable`]).
//! Outside wasm (native unit tests) nobody can answer.

use serde_json::{Value, json};

pub use crate::bindings::toolhost::input::ask::{AskError, Kind, Question};

/// Nobody can answer (or the question could not be sent): why.
#[derive(Debug, Clone, PartialEq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A question of `kind` with MCP's `params`.
pub fn question(key: &str, kind: Kind, params: &Value) -> Question {
    Question {
        key: key.to_owned(),
        kind,
        params: params.to_string(),
    }
}

/// A form question: `message` and a flat object JSON Schema.
pub fn form(key: &str, message: &str, schema: &Value) -> Question {
    question(
        key,
        Kind::Form,
        &json!({"message": message, "requestedSchema": schema}),
    )
}

/// Ask every question at once; the answers in order, as JSON.
pub fn ask(questions: &[Question]) -> Result<Vec<Value>, Unavailable> {
    #[cfg(target_arch = "wasm32")]
    {
        let answers =
            crate::bindings::toolhost::input::ask::ask(questions).map_err(|e| match e {
                AskError::Unavailable(m) | AskError::Invalid(m) => Unavailable(m),
            })?;
        Ok(answers
            .iter()
            .map(|a| serde_json::from_str(a).unwrap_or(Value::Null))
            .collect())
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = questions;
        Err(Unavailable("no input available outside the host".into()))
    }
}

/// Ask for a form; its `content` when the user accepted, `None` when they
/// declined or cancelled.
pub fn fill(key: &str, message: &str, schema: &Value) -> Result<Option<Value>, Unavailable> {
    let answer = ask(&[form(key, message, schema)])?
        .pop()
        .unwrap_or(Value::Null);
    Ok(accepted(&answer).cloned())
}

/// The content of an accepted form answer.
pub fn accepted(answer: &Value) -> Option<&Value> {
    (answer.get("action").and_then(Value::as_str) == Some("accept"))
        .then(|| answer.get("content"))
        .flatten()
}

/// Ask the user to confirm `message` (a yes/no form): true only for an
/// accepted "yes".
pub fn confirm(key: &str, message: &str) -> Result<bool, Unavailable> {
    let schema = json!({
        "type": "object",
        "properties": {"confirm": {"type": "boolean", "title": "Confirm", "default": false}},
        "required": ["confirm"],
    });
    Ok(fill(key, message, &schema)?
        .and_then(|c| c.get("confirm").and_then(Value::as_bool))
        .unwrap_or(false))
}
