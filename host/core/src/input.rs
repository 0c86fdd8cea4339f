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
//! the answers so far, and a question not answered yet ends it. Between the
//! two requests the answers so far travel with the client, sealed
//! ([`Sealer`]): bound to the tool and a digest of its arguments, refused when
//! altered or foreign.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use rmcp::model::{RequestStateCodec, SealOptions};
use sha2::Digest as _;

use crate::tool::BoxFuture;

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

    /// Whether it ended the call to put its questions in a second request
    /// ([`AskError::Pending`]): the call did not fail, it is not over yet.
    fn ended_the_call(&self) -> bool {
        false
    }

    /// The kinds of question it was asked and its caller cannot answer (a
    /// call that failed for want of them failed for the caller's missing
    /// capability).
    fn lacking(&self) -> Vec<Kind> {
        Vec::new()
    }
}

/// The kinds of question a caller can answer, and those it was asked and
/// cannot ([`Asker::lacking`]).
#[derive(Default)]
pub struct Can {
    kinds: Vec<Kind>,
    lacking: Mutex<Vec<Kind>>,
}

impl Can {
    pub fn new(kinds: Vec<Kind>) -> Self {
        Can {
            kinds,
            lacking: Mutex::default(),
        }
    }

    pub fn kinds(&self) -> &[Kind] {
        &self.kinds
    }

    /// [`check`] `questions`, then the error a tool gets for the first whose
    /// kind the caller cannot answer (remembered).
    pub fn check(&self, questions: &[Question]) -> Result<(), AskError> {
        check(questions)?;
        let Some(q) = questions.iter().find(|q| !self.kinds.contains(&q.kind)) else {
            return Ok(());
        };
        let mut lacking = self.lacking.lock().unwrap_or_else(|e| e.into_inner());
        if !lacking.contains(&q.kind) {
            lacking.push(q.kind);
        }
        Err(AskError::Unavailable(format!(
            "the client cannot answer {} (`{}`)",
            q.kind.method(),
            q.key
        )))
    }

    pub fn lacking(&self) -> Vec<Kind> {
        self.lacking
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// For a caller that can answer nothing: every question is unavailable, and
/// remembered ([`Asker::lacking`]).
#[derive(Default)]
pub struct Nobody(Can);

impl Asker for Nobody {
    fn ask(&self, questions: Vec<Question>) -> BoxFuture<Result<Vec<Value>, AskError>> {
        let result = self.0.check(&questions).map(|()| Vec::new());
        Box::pin(std::future::ready(result))
    }

    fn lacking(&self) -> Vec<Kind> {
        self.0.lacking()
    }
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
    can: Can,
}

impl Replay {
    pub fn new(answers: BTreeMap<String, Value>, can: Vec<Kind>) -> Arc<Self> {
        Arc::new(Replay {
            answers,
            pending: Mutex::default(),
            can: Can::new(can),
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
            self.can.check(&questions)?;
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

    fn lacking(&self) -> Vec<Kind> {
        self.can.lacking()
    }

    fn ended_the_call(&self) -> bool {
        !self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }
}

/// Check a client's answer to `q`: an object; for a form, its `action`
/// (`accept`, `decline`, `cancel`) and, when accepted, a `content` that fits
/// the question's `requestedSchema`.
pub fn check_answer(q: &Question, answer: &Value) -> Result<(), String> {
    let key = &q.key;
    let Some(obj) = answer.as_object() else {
        return Err(format!("answer `{key}`: an object, not {answer}"));
    };
    if q.kind != Kind::Form {
        return Ok(());
    }
    match obj.get("action").and_then(Value::as_str) {
        Some("accept") => {}
        Some("decline" | "cancel") => return Ok(()),
        _ => {
            return Err(format!(
                "answer `{key}`: `action` is accept, decline or cancel"
            ));
        }
    }
    let content = obj.get("content").unwrap_or(&Value::Null);
    let Some(schema) = q.params.get("requestedSchema") else {
        return Ok(());
    };
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| format!("question `{key}` has an invalid schema: {e}"))?;
    let errors = crate::schema::violations(&validator, content, usize::MAX);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "answer `{key}` does not fit the question: {}",
            errors.join("; ")
        ))
    }
}

/// How long a sealed state stays good.
pub const STATE_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// What a sealed state holds: the answers so far and the questions the round
/// asked, bound to the tool and its arguments.
#[derive(Debug, Serialize, Deserialize)]
pub struct Round {
    pub tool: String,
    /// SHA-256 of the arguments' JSON text.
    pub args: String,
    pub answers: BTreeMap<String, Value>,
    /// The questions left unanswered when the round ended.
    #[serde(default)]
    pub asked: Vec<Question>,
    /// The `traceparent` of the round's span: the next round's links to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StateError {
    /// Altered, expired, sealed by another server (or run, or surface), or
    /// not a state at all.
    #[error("state refused: {0}")]
    Refused(String),
    /// Sound, but for another tool or other arguments.
    #[error("state refused: it belongs to another call (another tool or other arguments)")]
    Foreign,
}

/// Seals and opens the states of input rounds with a key of this server's
/// run (HMAC, rmcp's `RequestStateCodec`): a client can neither forge nor
/// alter a state, and states do not outlive a restart. `surface` goes into
/// the seal as associated data, so a state of one surface is refused by
/// another.
pub struct Sealer {
    codec: RequestStateCodec,
    surface: &'static str,
}

fn digest(input: &Value) -> String {
    format!("{:x}", sha2::Sha256::digest(input.to_string().as_bytes()))
}

impl Sealer {
    /// A sealer with a new random key.
    pub fn new(surface: &'static str) -> Self {
        let key: Vec<u8> = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()]
            .iter()
            .flat_map(|u| *u.as_bytes())
            .collect();
        Sealer {
            codec: RequestStateCodec::try_new(key).expect("32 random bytes are a key"),
            surface,
        }
    }

    /// The state of a round of `tool` on `input` that ended on questions.
    pub fn seal(&self, tool: &str, input: &Value, replay: &Replay) -> Result<String, String> {
        let round = Round {
            tool: tool.to_owned(),
            args: digest(input),
            answers: replay.answers().clone(),
            asked: replay.pending(),
            trace: crate::telemetry::traceparent(),
        };
        let options = SealOptions::new()
            .ttl(STATE_TTL)
            .associated_data(self.surface.as_bytes());
        self.codec
            .seal_json_with(&round, &options)
            .map_err(|e| e.to_string())
    }

    /// The round of a sealed state, checked: sealed here, unaltered, not
    /// expired, for `tool` on `input`.
    pub fn open(&self, sealed: &str, tool: &str, input: &Value) -> Result<Round, StateError> {
        let round: Round = self
            .codec
            .open_json_with(sealed, self.surface.as_bytes())
            .map_err(|e| StateError::Refused(e.to_string()))?;
        if round.tool != tool || round.args != digest(input) {
            return Err(StateError::Foreign);
        }
        if let Some(earlier) = &round.trace {
            crate::telemetry::link_traceparent(&tracing::Span::current(), earlier, "input_round");
        }
        Ok(round)
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

    #[tokio::test]
    async fn sealed_rounds_open_only_for_their_call() {
        let sealer = Sealer::new("native");
        let input = json!({"path": "a.txt"});
        let replay = Replay::new(
            BTreeMap::from([("a".to_owned(), json!({"action": "accept"}))]),
            vec![Kind::Form],
        );
        assert_eq!(replay.ask(vec![q("b")]).await, Err(AskError::Pending));
        let sealed = sealer.seal("files_delete", &input, &replay).unwrap();
        let round = sealer.open(&sealed, "files_delete", &input).unwrap();
        assert_eq!(round.answers, *replay.answers());
        assert_eq!(round.asked, vec![q("b")]);
        // Another call's, altered, or sealed by another surface or run.
        assert_eq!(
            sealer.open(&sealed, "files_read", &input).unwrap_err(),
            StateError::Foreign
        );
        assert_eq!(
            sealer
                .open(&sealed, "files_delete", &json!({"path": "b.txt"}))
                .unwrap_err(),
            StateError::Foreign
        );
        let mut altered = sealed.clone().into_bytes();
        let mid = altered.len() / 2;
        altered[mid] = if altered[mid] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).unwrap();
        assert!(matches!(
            sealer.open(&altered, "files_delete", &input),
            Err(StateError::Refused(_))
        ));
        for other in [Sealer::new("mcp"), Sealer::new("native")] {
            assert!(matches!(
                other.open(&sealed, "files_delete", &input),
                Err(StateError::Refused(_))
            ));
        }
    }

    #[test]
    fn answers_must_fit_their_question() {
        let confirm = Question {
            key: "confirm".into(),
            kind: Kind::Form,
            params: json!({
                "message": "Delete?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"confirm": {"type": "boolean"}},
                    "required": ["confirm"],
                },
            }),
        };
        let ok = |a: Value| check_answer(&confirm, &a);
        assert_eq!(
            ok(json!({"action": "accept", "content": {"confirm": true}})),
            Ok(())
        );
        assert_eq!(ok(json!({"action": "decline"})), Ok(()));
        let wrong = ok(json!({"action": "accept", "content": {"confirm": "yes"}})).unwrap_err();
        assert!(
            wrong.contains("does not fit") && wrong.contains("/confirm"),
            "{wrong}"
        );
        assert!(ok(json!({"action": "accept"})).is_err());
        assert!(ok(json!({"action": "maybe"})).is_err());
        assert!(ok(json!("yes")).is_err());
    }
}
