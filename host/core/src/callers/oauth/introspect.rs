//! Opaque access tokens, asked about at the authorization server's
//! introspection endpoint (RFC 7662) with toolhost's own client credentials.
//! An answer is believed only if the token is `active`, from the issuer (when
//! the answer says), for this resource (`aud`, which must be there: a token
//! for another resource of the same server must not pass), unexpired, and
//! has a subject. Answers are remembered by the token's digest until the
//! token expires or [`REMEMBER_FOR`] passes, whichever is first, so a client
//! calling in a loop costs one round trip a minute; a refusal is remembered
//! [`REMEMBER_REFUSAL`]. At most [`IN_FLIGHT`] introspections run at once: a
//! client spraying made-up tokens waits on its own requests, not on the
//! authorization server.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{OAuthConfig, Refusal};

/// How long an active token's answer is used without asking again.
pub const REMEMBER_FOR: Duration = Duration::from_secs(60);
/// How long a refused token's answer is used.
pub const REMEMBER_REFUSAL: Duration = Duration::from_secs(10);
/// Introspection requests at once.
pub const IN_FLIGHT: usize = 4;
/// Answers remembered (past it, the memory starts over).
const MAX_REMEMBERED: usize = 10_000;

/// `[auth.oauth.introspection]`: where and as whom opaque tokens are asked
/// about.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionConfig {
    /// The endpoint (the server metadata's `introspection_endpoint`). Its
    /// host is allowed outbound for this, as `jwks_uri`'s is.
    pub endpoint: String,
    /// Toolhost's client at the authorization server.
    pub client_id: String,
    /// Its secret (sent as HTTP Basic, RFC 6749 §2.3.1); or
    /// `client_secret_env`, the environment variable that holds it.
    #[serde(default)]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub client_secret_env: Option<String>,
}

impl IntrospectionConfig {
    pub fn secret(&self) -> Result<String, String> {
        match (&self.client_secret, &self.client_secret_env) {
            (Some(s), None) => Ok(s.clone()),
            (None, Some(var)) => std::env::var(var).map_err(|_| {
                format!("auth.oauth.introspection.client_secret_env: ${var} is not set")
            }),
            _ => {
                Err("auth.oauth.introspection needs one of client_secret, client_secret_env".into())
            }
        }
    }
}

/// What the endpoint answers (the fields used).
#[derive(Deserialize)]
struct Answer {
    active: bool,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    aud: Option<Audience>,
    #[serde(default)]
    exp: Option<u64>,
    #[serde(default)]
    nbf: Option<u64>,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

/// A believed answer: the subject, its client and its scopes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Active {
    pub sub: String,
    pub client: Option<String>,
    pub scopes: Vec<String>,
}

/// A remembered answer and until when it holds.
type Remembered = (Result<Active, Refusal>, Instant);

pub struct Introspector {
    config: IntrospectionConfig,
    secret: String,
    http: reqwest::Client,
    remembered: Mutex<HashMap<[u8; 32], Remembered>>,
    in_flight: tokio::sync::Semaphore,
}

impl Introspector {
    pub fn new(config: IntrospectionConfig) -> Result<Introspector, String> {
        let secret = config.secret()?;
        let http = super::client_for(
            &config.endpoint,
            "POST",
            "[auth.oauth.introspection] endpoint",
        )?;
        Ok(Introspector {
            config,
            secret,
            http,
            remembered: Mutex::new(HashMap::new()),
            in_flight: tokio::sync::Semaphore::new(IN_FLIGHT),
        })
    }

    /// The subject and scopes of `token`, or why it is refused.
    pub async fn introspect(&self, oauth: &OAuthConfig, token: &str) -> Result<Active, Refusal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(answer) = self.recall(&digest) {
            return answer;
        }
        let _permit = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| Refusal::Unavailable("shutting down".into()))?;
        // Another request may have asked while this one waited.
        if let Some(answer) = self.recall(&digest) {
            return answer;
        }
        let answer = self.ask(token).await?;
        let now = unix_now();
        let verdict = judge(oauth, answer, now);
        let lifetime = match &verdict {
            Ok(_) => REMEMBER_FOR,
            Err(_) => REMEMBER_REFUSAL,
        };
        let mut remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        if remembered.len() >= MAX_REMEMBERED {
            remembered.clear();
        }
        remembered.insert(digest, (verdict.clone(), Instant::now() + lifetime));
        verdict
    }

    fn recall(&self, digest: &[u8; 32]) -> Option<Result<Active, Refusal>> {
        let remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        let (answer, until) = remembered.get(digest)?;
        // A remembered active token still expires on time.
        (Instant::now() < *until).then(|| answer.clone())
    }

    async fn ask(&self, token: &str) -> Result<Answer, Refusal> {
        let unavailable = |why: String| {
            tracing::warn!(endpoint = %self.config.endpoint, %why, "token introspection failed");
            Refusal::Unavailable(
                "the authorization server could not be asked about the token".into(),
            )
        };
        let response = self
            .http
            .post(&self.config.endpoint)
            .basic_auth(&self.config.client_id, Some(&self.secret))
            .form(&[("token", token), ("token_type_hint", "access_token")])
            .send()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if !response.status().is_success() {
            return Err(unavailable(format!("answered {}", response.status())));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if bytes.len() > 64 << 10 {
            return Err(unavailable("an answer over 64 KiB".into()));
        }
        serde_json::from_slice(&bytes).map_err(|e| unavailable(format!("not an answer: {e}")))
    }
}

/// Whether an endpoint's answer is a token this resource takes.
fn judge(oauth: &OAuthConfig, answer: Answer, now: u64) -> Result<Active, Refusal> {
    let invalid = |m: &str| Err(Refusal::Invalid(m.to_owned()));
    if !answer.active {
        return invalid("the token is not active");
    }
    if answer
        .token_type
        .as_deref()
        .is_some_and(|t| t.eq_ignore_ascii_case("refresh_token"))
    {
        return invalid("a refresh token is no access token");
    }
    if answer.iss.as_deref().is_some_and(|iss| iss != oauth.issuer) {
        return invalid("the token is from another issuer");
    }
    let for_us = match &answer.aud {
        Some(Audience::One(a)) => *a == oauth.resource,
        Some(Audience::Many(list)) => list.contains(&oauth.resource),
        None => false,
    };
    if !for_us {
        return invalid("the token is not for this resource");
    }
    if answer.exp.is_some_and(|exp| exp + oauth.leeway_s <= now) {
        return invalid("the token has expired");
    }
    if answer.nbf.is_some_and(|nbf| nbf > now + oauth.leeway_s) {
        return invalid("the token is not valid yet");
    }
    let Some(sub) = answer.sub.filter(|s| !s.is_empty()) else {
        return invalid("the token lacks a required claim (sub)");
    };
    let scopes = answer
        .scope
        .as_deref()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    Ok(Active {
        sub,
        client: answer.client_id,
        scopes,
    })
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oauth() -> OAuthConfig {
        serde_json::from_value(serde_json::json!({
            "issuer": "https://id.example", "resource": "https://tools.example/mcp"
        }))
        .unwrap()
    }

    fn answer(v: serde_json::Value) -> Answer {
        serde_json::from_value(v).unwrap()
    }

    const NOW: u64 = 1_000_000;

    #[test]
    fn an_active_token_for_this_resource_passes() {
        let a = answer(serde_json::json!({
            "active": true, "sub": "alice", "scope": "calc files", "iss": "https://id.example",
            "aud": "https://tools.example/mcp", "exp": NOW + 60, "client_id": "c1", "token_type": "Bearer"
        }));
        assert_eq!(
            judge(&oauth(), a, NOW),
            Ok(Active {
                sub: "alice".into(),
                client: Some("c1".into()),
                scopes: vec!["calc".into(), "files".into()]
            })
        );
        let many = answer(serde_json::json!({
            "active": true, "sub": "alice", "aud": ["https://other.example", "https://tools.example/mcp"]
        }));
        assert!(judge(&oauth(), many, NOW).is_ok());
    }

    #[test]
    fn refusals() {
        let base = serde_json::json!({
            "active": true, "sub": "alice", "iss": "https://id.example",
            "aud": "https://tools.example/mcp", "exp": NOW + 60
        });
        let with = |k: &str, v: serde_json::Value| {
            let mut b = base.clone();
            if v.is_null() {
                b.as_object_mut().unwrap().remove(k);
            } else {
                b[k] = v;
            }
            answer(b)
        };
        let why = |a: Answer| match judge(&oauth(), a, NOW) {
            Err(Refusal::Invalid(m)) => m,
            other => panic!("not refused: {other:?}"),
        };
        assert_eq!(
            why(answer(serde_json::json!({"active": false}))),
            "the token is not active"
        );
        assert_eq!(
            why(with("iss", "https://evil.example".into())),
            "the token is from another issuer"
        );
        assert_eq!(
            why(with("aud", "https://other.example/mcp".into())),
            "the token is not for this resource"
        );
        assert_eq!(
            why(with("aud", serde_json::Value::Null)),
            "the token is not for this resource"
        );
        assert_eq!(why(with("exp", (NOW - 31).into())), "the token has expired");
        assert_eq!(
            why(with("nbf", (NOW + 31).into())),
            "the token is not valid yet"
        );
        assert_eq!(
            why(with("sub", serde_json::Value::Null)),
            "the token lacks a required claim (sub)"
        );
        assert_eq!(
            why(with("token_type", "refresh_token".into())),
            "a refresh token is no access token"
        );
        // Within the leeway both ways.
        assert!(judge(&oauth(), with("exp", (NOW - 29).into()), NOW).is_ok());
    }
}
