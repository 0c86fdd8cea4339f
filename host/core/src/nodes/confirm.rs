//! Commands a Docker toolkit's manifest marks as needing the caller's
//! confirmation (`[tools.confirm]` of a tool): before such a call reaches its
//! node, the caller is asked through the call's [`Asker`] (MCP elicitation,
//! an `InputRequiredResult`, the native API's `input_required`), and the call
//! runs only on an accepted yes. A caller that cannot answer gets the
//! manifest's `unanswered` policy: refused (the default), or run as before.
//!
//! ```toml
//! [tools.confirm]
//! argument = "command"                       # the input field looked at
//! patterns = ['(^|[;&|(]\s*)rm\s+-\w*[rR]']  # regexes; any match asks
//! message = "This command deletes files recursively."
//! unanswered = "refuse"                      # or "run"
//! ```

use serde::Deserialize;
use serde_json::{Value, json};

use crate::input::{AskError, Asker, Kind, Question};
use crate::tool::CallError;

/// Longest argument value quoted in the question.
const MAX_QUOTED: usize = 2000;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmSpec {
    pub argument: String,
    pub patterns: Vec<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub unanswered: Unanswered,
}

/// What a call that needs a confirmation nobody can give does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unanswered {
    #[default]
    Refuse,
    Run,
}

/// A tool's rule, its patterns compiled.
#[derive(Debug, Clone)]
pub struct Confirm {
    spec: ConfirmSpec,
    patterns: regex::RegexSet,
}

impl Confirm {
    /// Compile `spec` (a clear error for a bad pattern).
    pub fn new(spec: ConfirmSpec) -> Result<Confirm, String> {
        if spec.patterns.is_empty() {
            return Err("confirm.patterns is empty".into());
        }
        let patterns = regex::RegexSetBuilder::new(&spec.patterns)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("confirm.patterns: {e}"))?;
        Ok(Confirm { spec, patterns })
    }

    /// The marked value of `input`, if any pattern matches it.
    fn marked<'a>(&self, input: &'a Value) -> Option<&'a str> {
        let value = input.get(&self.spec.argument)?.as_str()?;
        self.patterns.is_match(value).then_some(value)
    }

    /// Let the call go on: not marked, confirmed, or nobody could answer and
    /// the policy is to run. Else the reason it does not.
    pub async fn check(
        &self,
        tool: &str,
        input: &Value,
        ask: Option<&dyn Asker>,
    ) -> Result<(), CallError> {
        let Some(value) = self.marked(input) else {
            return Ok(());
        };
        let quoted: String = value.chars().take(MAX_QUOTED).collect();
        let why = self.spec.message.clone().unwrap_or_else(|| {
            format!("`{tool}` was asked to run a command marked for confirmation.")
        });
        let question = Question {
            key: "confirm".into(),
            kind: Kind::Form,
            params: json!({
                "message": format!("{why}\n\n{quoted}\n\nRun it?"),
                "requestedSchema": {
                    "type": "object",
                    "properties": {"confirm": {"type": "boolean", "title": "Run it"}},
                    "required": ["confirm"],
                },
            }),
        };
        let unavailable = |why: String| match self.spec.unanswered {
            Unanswered::Run => Ok(()),
            Unanswered::Refuse => Err(CallError::ToolError(format!(
                "not run: this command needs a confirmation ({why})"
            ))),
        };
        let Some(ask) = ask else {
            return unavailable("no input available: nobody can answer".into());
        };
        match ask.ask(vec![question]).await {
            Ok(answers) => {
                let a = answers.first().cloned().unwrap_or_default();
                if a["action"] == "accept" && a["content"]["confirm"] == true {
                    Ok(())
                } else {
                    Err(CallError::ToolError(
                        "not run: the command was not confirmed".into(),
                    ))
                }
            }
            Err(AskError::Unavailable(m)) => unavailable(format!("no input available: {m}")),
            // The caller answers in another request: this call ends here.
            Err(AskError::Pending) => Err(CallError::ToolError("input required".into())),
            Err(AskError::Invalid(m)) => Err(CallError::Internal(m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::BoxFuture;
    use std::sync::Mutex;

    /// Answers every question with `answer`, or nobody answers.
    struct Fixed(Option<Value>, Mutex<Vec<Question>>);
    impl Asker for Fixed {
        fn ask(&self, questions: Vec<Question>) -> BoxFuture<Result<Vec<Value>, AskError>> {
            self.1.lock().unwrap().extend(questions);
            let r = match &self.0 {
                Some(a) => Ok(vec![a.clone()]),
                None => Err(AskError::Unavailable("the client cannot answer".into())),
            };
            Box::pin(std::future::ready(r))
        }
    }

    fn rule(unanswered: &str) -> Confirm {
        let spec: ConfirmSpec = toml::from_str(&format!(
            "argument = \"command\"\npatterns = ['(^|[;&|(]\\s*)rm\\s+-\\w*[rR]']\nunanswered = \"{unanswered}\""
        ))
        .unwrap();
        Confirm::new(spec).unwrap()
    }

    #[tokio::test]
    async fn marked_commands_run_only_when_confirmed() {
        let r = rule("refuse");
        let yes = Fixed(
            Some(json!({"action": "accept", "content": {"confirm": true}})),
            Mutex::default(),
        );
        let no = Fixed(Some(json!({"action": "decline"})), Mutex::default());
        let nobody = Fixed(None, Mutex::default());
        let rm = json!({"command": "cd /workspace && rm -rf build"});
        let ls = json!({"command": "ls -la; echo rm -r is dangerous"});
        assert!(
            r.check("run", &ls, Some(&no)).await.is_ok(),
            "not marked: no question"
        );
        assert!(no.1.lock().unwrap().is_empty());
        assert!(r.check("run", &rm, Some(&yes)).await.is_ok());
        let message = yes.1.lock().unwrap()[0].params["message"].clone();
        assert!(
            message.as_str().unwrap().contains("rm -rf build"),
            "{message}"
        );
        let e = r
            .check("run", &rm, Some(&no))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("not confirmed"), "{e}");
        let e = r
            .check("run", &rm, Some(&nobody))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("no input available"), "{e}");
        let e = r.check("run", &rm, None).await.unwrap_err().to_string();
        assert!(e.contains("no input available"), "{e}");
        // `unanswered = "run"`: those who cannot answer get the old behaviour.
        assert!(rule("run").check("run", &rm, Some(&nobody)).await.is_ok());
        assert!(
            rule("run").check("run", &rm, Some(&no)).await.is_err(),
            "a no is a no"
        );
    }

    #[test]
    fn bad_patterns_are_refused_at_load() {
        let spec = ConfirmSpec {
            argument: "command".into(),
            patterns: vec!["(unclosed".into()],
            message: None,
            unanswered: Unanswered::Refuse,
        };
        assert!(Confirm::new(spec).unwrap_err().contains("confirm.patterns"));
    }
}
