//! Input requests: a tool asking its caller for input mid-call (the WIT
//! package `toolhost:input`, wit/deps/input). A surface that can put a
//! question to its client passes an [`Asker`] with the call
//! ([`crate::dispatch::CallOptions::ask`]); without one, a tool that asks is
//! told that no input is available.
//!
//! Askers: MCP elicitation on a session's stream (2025-11-25), a task's
//! `input_required` status (the tasks extension), and [`Replay`] for clients
//! that answer in a second request (MCP's `InputRequiredResult` in 2026-07-28,
//! the native API's `input_required`): the call runs again from the start with
//! the answers so far, and a question not answered yet ends it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::BoxFuture;

/// Questions of one `ask` at most.
pub const MAX_QUESTIONS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A form for the user (MCP `elicitation/create`).
    Form,
    /// A completion from the client's model (MCP `sampling/createMessage`).
    Sampling,
    /// The client's root folders (MCP `roots/list`).
    Roots,
}

impl Kind {
    /// The MCP method that asks it.
    pub fn method(self) -> &'static str {
        match self {
            Kind::Form => "elicitation/create",
            Kind::Sampling => "sampling/createMessage",
            Kind::Roots => "roots/list",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    pub key: String,
    pub kind: Kind,
    /// MCP's parameters of the request.
    pub params: Value,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AskError {
    /// Nobody can answer.
    #[error("no input available: {0}")]
    Unavailable(String),
    /// A question that cannot be sent.
    #[error("invalid question: {0}")]
    Invalid(String),
    /// The questions were recorded for the client, which answers in a second
    /// request: the call ends here (see [`Replay`]).
    #[error("input required")]
    Pending,
}

/// Puts questions to a call's caller.
pub trait Asker: Send + Sync {
    /// The answers to `questions`, in order.
    fn ask(&self, questions: Vec<Question>) -> BoxFuture<Result<Vec<Value>, AskError>>;
}

/// Check questions before they go out: keys unique and non-empty, at most
/// [`MAX_QUESTIONS`], params objects.
pub fn check(questions: &[Question]) -> Result<(), AskError> {
    if questions.is_empty() || questions.len() > MAX_QUESTIONS {
        return Err(AskError::Invalid(format!(
            "ask 1 to {MAX_QUESTIONS} questions at once"
        )));
    }
    let mut keys = std::collections::HashSet::new();
    for q in questions {
        if q.key.is_empty() || !keys.insert(&q.key) {
            return Err(AskError::Invalid(format!(
                "key `{}`: empty or twice",
                q.key
            )));
        }
        if !q.params.is_object() {
            return Err(AskError::Invalid(format!(
                "key `{}`: params must be an object",
                q.key
            )));
        }
    }
    Ok(())
}

/// For clients that answer in a second request: answers what it was given
/// (earlier rounds' and this request's), records what it was not, and ends
/// the call ([`AskError::Pending`]); the surface then answers with the
/// recorded questions ([`Replay::pending`]).
#[derive(Default)]
pub struct Replay {
    answers: BTreeMap<String, Value>,
    pending: Mutex<Vec<Question>>,
    /// The kinds the client can answer (others: unavailable).
    can: Vec<Kind>,
}

impl Replay {
    pub fn new(answers: BTreeMap<String, Value>, can: Vec<Kind>) -> Arc<Self> {
        Arc::new(Replay {
            answers,
            pending: Mutex::default(),
            can,
        })
    }

    /// The questions the call asked and nobody answered yet.
    pub fn pending(&self) -> Vec<Question> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The answers it held.
    pub fn answers(&self) -> &BTreeMap<String, Value> {
        &self.answers
    }
}

impl Asker for Replay {
    fn ask(&self, questions: Vec<Question>) -> BoxFuture<Result<Vec<Value>, AskError>> {
        let result = (|| {
            check(&questions)?;
            if let Some(q) = questions.iter().find(|q| !self.can.contains(&q.kind)) {
                return Err(AskError::Unavailable(format!(
                    "the client cannot answer {} (`{}`)",
                    q.kind.method(),
                    q.key
                )));
            }
            let missing: Vec<Question> = questions
                .iter()
                .filter(|q| !self.answers.contains_key(&q.key))
                .cloned()
                .collect();
            if missing.is_empty() {
                return Ok(questions
                    .iter()
                    .map(|q| self.answers[&q.key].clone())
                    .collect());
            }
            *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = missing;
            Err(AskError::Pending)
        })();
        Box::pin(std::future::ready(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn q(key: &str) -> Question {
        Question {
            key: key.into(),
            kind: Kind::Form,
            params: json!({"message": key}),
        }
    }

    #[tokio::test]
    async fn replay_answers_what_it_has_and_records_the_rest() {
        let replay = Replay::new(
            BTreeMap::from([("a".to_owned(), json!({"action": "accept"}))]),
            vec![Kind::Form],
        );
        assert_eq!(
            replay.ask(vec![q("a")]).await.unwrap(),
            vec![json!({"action": "accept"})]
        );
        assert_eq!(
            replay.ask(vec![q("a"), q("b")]).await,
            Err(AskError::Pending)
        );
        assert_eq!(replay.pending(), vec![q("b")]);
        let none = Replay::new(BTreeMap::new(), vec![]);
        assert!(matches!(
            none.ask(vec![q("a")]).await,
            Err(AskError::Unavailable(_))
        ));
        assert!(matches!(
            replay.ask(vec![q("a"), q("a")]).await,
            Err(AskError::Invalid(_))
        ));
    }
}
