//! Credentials of tools that call out (API tools, remote MCP servers, wasm
//! plugins' outbound HTTP): how a manifest names a secret (`[api.auth]`,
//! `[mcp.auth]`, `[[http.auth]]`) and where its value comes from. Values are
//! injected by the host and never shown.

use std::collections::BTreeMap;

use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

/// A manifest's `auth` table: the kind, the header or query parameter, and
/// the secret's *name*.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    pub kind: AuthKind,
    /// The header or query parameter that carries it (not for bearer).
    #[serde(default)]
    pub name: Option<String>,
    /// The secret's name (never its value).
    pub secret: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthKind {
    Header,
    Query,
    Bearer,
}

impl Auth {
    /// Check the table `field` (e.g. `[api.auth]`); `query` says whether the
    /// secret may travel in the query.
    pub fn check(&self, field: &str, query: bool) -> Result<(), String> {
        if self.kind == AuthKind::Query && !query {
            return Err(format!("{field} kind: header or bearer"));
        }
        if self.kind != AuthKind::Bearer && self.name.as_deref().is_none_or(str::is_empty) {
            return Err(format!(
                "{field} name: the header or query parameter that carries the secret"
            ));
        }
        if !is_secret_name(&self.secret) {
            return Err(format!(
                "{field} secret `{}`: a name of letters, digits and `_`",
                self.secret
            ));
        }
        Ok(())
    }

    /// The header that carries `secret` (bearer: `Authorization: Bearer`),
    /// marked sensitive so it is never printed; none for a query secret.
    pub fn header(&self, secret: &str) -> Result<Option<(HeaderName, HeaderValue)>, String> {
        let (name, value) = match self.kind {
            AuthKind::Query => return Ok(None),
            AuthKind::Bearer => (AUTHORIZATION, format!("Bearer {secret}")),
            AuthKind::Header => {
                let name = self.name.as_deref().unwrap_or_default();
                let name = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("the auth header name `{name}` is not valid"))?;
                (name, secret.to_owned())
            }
        };
        let mut value = HeaderValue::from_str(&value)
            .map_err(|_| "the secret is not valid in an HTTP header".to_owned())?;
        value.set_sensitive(true);
        Ok(Some((name, value)))
    }
}

fn is_secret_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Named secrets: the server config's `[secrets]`, then the environment's
/// `TOOLHOST_SECRET_<name>`. Values are never printed (no `Debug`).
#[derive(Clone, Default)]
pub struct Secrets(BTreeMap<String, String>);

impl Secrets {
    pub fn new(configured: BTreeMap<String, String>) -> Self {
        Secrets(configured)
    }

    /// The value of secret `name`, or why there is none.
    pub fn get(&self, name: &str) -> Result<String, String> {
        if let Some(v) = self.0.get(name) {
            return Ok(v.clone());
        }
        std::env::var(format!("TOOLHOST_SECRET_{name}")).map_err(|_| {
            format!(
                "secret `{name}` is not set: add it to the server config's [secrets] or set TOOLHOST_SECRET_{name}"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_come_from_config_then_environment() {
        let s = Secrets::new(BTreeMap::from([("A".into(), "from-config".into())]));
        assert_eq!(s.get("A").unwrap(), "from-config");
        let missing = s.get("NOT_SET_ANYWHERE_42").unwrap_err();
        assert!(
            missing.contains("TOOLHOST_SECRET_NOT_SET_ANYWHERE_42"),
            "{missing}"
        );
    }

    #[test]
    fn secrets_travel_in_sensitive_headers_or_the_query() {
        let auth = |kind, name: Option<&str>| Auth {
            kind,
            name: name.map(str::to_owned),
            secret: "K".into(),
        };
        let (name, value) = auth(AuthKind::Bearer, None).header("s3").unwrap().unwrap();
        assert_eq!(
            (name.as_str(), value.to_str().unwrap()),
            ("authorization", "Bearer s3")
        );
        assert!(value.is_sensitive());
        let (name, value) = auth(AuthKind::Header, Some("X-Key"))
            .header("s3")
            .unwrap()
            .unwrap();
        assert_eq!((name.as_str(), value.to_str().unwrap()), ("x-key", "s3"));
        assert!(
            auth(AuthKind::Query, Some("k"))
                .header("s3")
                .unwrap()
                .is_none()
        );
        assert!(
            auth(AuthKind::Header, Some("a b"))
                .header("s3")
                .unwrap_err()
                .contains("a b")
        );
        assert!(
            auth(AuthKind::Bearer, None)
                .header("bad\nvalue")
                .unwrap_err()
                .contains("not valid")
        );
    }

    #[test]
    fn auth_tables_are_checked() {
        let auth = |kind, name: Option<&str>, secret: &str| Auth {
            kind,
            name: name.map(str::to_owned),
            secret: secret.into(),
        };
        assert!(
            auth(AuthKind::Bearer, None, "K")
                .check("[x]", false)
                .is_ok()
        );
        assert!(
            auth(AuthKind::Header, None, "K")
                .check("[x]", true)
                .unwrap_err()
                .contains("name")
        );
        assert!(
            auth(AuthKind::Query, Some("k"), "K")
                .check("[x]", false)
                .unwrap_err()
                .contains("kind")
        );
        assert!(
            auth(AuthKind::Query, Some("k"), "K")
                .check("[x]", true)
                .is_ok()
        );
        assert!(
            auth(AuthKind::Bearer, None, "a-b")
                .check("[x]", true)
                .unwrap_err()
                .contains("secret")
        );
    }
}
