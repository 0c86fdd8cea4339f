//! `[auth]`: the admin token, the callers and their policies.

use serde::{Deserialize, Serialize};
use toolhost_core::callers::oauth::OAuthConfig;
use toolhost_core::callers::{self, Caller, Policy};

use super::Token;

/// Access control.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Bearer token of the admin routes (plugin upload and delete). Unset:
    /// those routes are refused. The environment variable
    /// `TOOLHOST_ADMIN_TOKEN` sets it too.
    pub admin_token: Option<String>,
    /// Bearer tokens of callers without a name or policy of their own (each
    /// is the caller `token-<n>`, counted from 1). When any token or caller
    /// is set (here, with `[[auth.callers]]`, or with the environment variable
    /// `TOOLHOST_TOKEN`), every route but `/health` needs
    /// `Authorization: Bearer <token>` (the admin token is accepted too, as
    /// the caller `admin`).
    pub tokens: Vec<String>,
    /// Named callers, each with its token and policy.
    pub callers: Vec<CallerConfig>,
    /// OAuth 2.1 access tokens (JWT) of one authorization server as callers
    /// too (MCP's authorization spec): `[auth.oauth]`.
    pub oauth: Option<OAuthConfig>,
    /// Requests per second each caller may make, sustained (0: no limit),
    /// unless its own entry says otherwise. Beyond it: 429 with `Retry-After`.
    pub rate_limit_per_s: u32,
    /// Requests a caller may make at once above the sustained rate.
    pub rate_limit_burst: u32,
}

/// `[[auth.callers]]`: one caller. The session ids it sends are its own
/// (another caller's session is unknown to it); its policy says which tools
/// it sees and calls, and how much it may hold at once.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CallerConfig {
    /// `^[a-z0-9][a-z0-9_-]{0,63}$`; logs, metrics and the audit log name it.
    pub name: String,
    /// The SHA-256 of its bearer token, in hex (`printf %s "$TOKEN" |
    /// sha256sum`): the configuration then holds no secret.
    pub token_sha256: Option<String>,
    /// Its bearer token itself (one of `token` and `token_sha256`).
    pub token: Option<String>,
    /// Tools it may list and call: `<plugin>_<tool>` ids, `*` matching any
    /// run of characters (`calc_*`). Empty or unset: every tool.
    pub tools: Vec<String>,
    /// Whether it may use the admin routes (as the admin token does).
    pub admin: bool,
    /// Sessions it may have open at once (0: only `[sessions] max_sessions`).
    pub max_sessions: usize,
    /// Tool calls it may have running at once (0: no limit of its own);
    /// beyond, 429 `overloaded`.
    pub max_concurrent_calls: usize,
    /// Its sustained request rate, instead of `[auth] rate_limit_per_s`.
    pub rate_limit_per_s: Option<u32>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            admin_token: None,
            tokens: Vec::new(),
            callers: Vec::new(),
            oauth: None,
            rate_limit_per_s: 0,
            rate_limit_burst: 50,
        }
    }
}

/// The admin token's caller name.
pub const ADMIN: &str = "admin";

/// One caller the server knows: its token's digest, who it is, its rate.
pub(super) struct Known {
    pub token: Token,
    pub caller: Caller,
    pub rate_per_s: u32,
}

impl AuthConfig {
    /// Whether callers must present a token.
    pub fn required(&self) -> bool {
        !self.tokens.is_empty() || !self.callers.is_empty() || self.oauth.is_some()
    }

    /// Why these settings cannot work, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.admin_token.as_ref().is_some_and(|t| t.len() < 16) {
            return Err("auth.admin_token must be at least 16 characters".into());
        }
        let weak = |t: &String| t.len() < 16 || t.chars().any(char::is_whitespace);
        if self.tokens.iter().any(weak) {
            return Err("every auth token must be at least 16 characters, without spaces".into());
        }
        if self.rate_limit_per_s != 0 && self.rate_limit_burst < 1 {
            return Err(
                "auth.rate_limit_burst must be at least 1 when auth.rate_limit_per_s is set".into(),
            );
        }
        if let Some(oauth) = &self.oauth {
            oauth.check()?;
        }
        let mut names = std::collections::HashSet::new();
        for c in &self.callers {
            let at = format!("auth.callers `{}`", c.name);
            if !callers::is_valid_name(&c.name) {
                return Err(format!(
                    "{at}: a caller name is 1 to 64 lowercase letters, digits, `_` or `-`, starting with a letter or digit"
                ));
            }
            if c.name == ADMIN || c.name == "anonymous" || c.name.starts_with("token-") {
                return Err(format!(
                    "{at}: `admin`, `anonymous` and `token-<n>` name the admin token, a server without tokens and [auth] tokens"
                ));
            }
            if !names.insert(c.name.as_str()) {
                return Err(format!("{at}: two callers have this name"));
            }
            match (&c.token, &c.token_sha256) {
                (Some(t), None) if weak(t) => {
                    return Err(format!(
                        "{at}: its token must be at least 16 characters, without spaces"
                    ));
                }
                (None, Some(d)) if Token::from_hex(d).is_none() => {
                    return Err(format!(
                        "{at}: token_sha256 must be 64 hex digits (printf %s \"$TOKEN\" | sha256sum)"
                    ));
                }
                (Some(_), None) | (None, Some(_)) => {}
                _ => return Err(format!("{at}: give one of `token` and `token_sha256`")),
            }
            if let Some(bad) = c.tools.iter().find(|p| p.is_empty()) {
                return Err(format!("{at}: tool pattern {bad:?} is empty"));
            }
        }
        Ok(())
    }

    /// Every caller a token identifies: `[[auth.callers]]`, then `tokens`
    /// (`token-<n>`), then the admin token (`admin`, an admin).
    pub(super) fn known(&self) -> Vec<Known> {
        let mut out = Vec::new();
        for c in &self.callers {
            let token = match (&c.token, &c.token_sha256) {
                (Some(t), _) => Token::new(t),
                (None, Some(d)) => Token::from_hex(d).expect("checked"),
                (None, None) => continue,
            };
            let policy = Policy {
                tools: c.tools.clone(),
                admin: c.admin,
                max_sessions: c.max_sessions,
                max_concurrent_calls: c.max_concurrent_calls,
            };
            out.push(Known {
                token,
                caller: Caller::named(&c.name, policy),
                rate_per_s: c.rate_limit_per_s.unwrap_or(self.rate_limit_per_s),
            });
        }
        for (i, t) in self.tokens.iter().enumerate() {
            out.push(Known {
                token: Token::new(t),
                caller: Caller::named(&format!("token-{}", i + 1), Policy::default()),
                rate_per_s: self.rate_limit_per_s,
            });
        }
        if let Some(t) = &self.admin_token {
            let policy = Policy {
                admin: true,
                ..Policy::default()
            };
            out.push(Known {
                token: Token::new(t),
                caller: Caller::named(ADMIN, policy),
                rate_per_s: self.rate_limit_per_s,
            });
        }
        out
    }
}
