//! The manifest of an API toolkit, `<plugins>/<name>/<name>.toml`:
//!
//! ```toml
//! description = "httpbin: an HTTP request and response service"
//!
//! [api]
//! spec = "openapi.json"              # a file of this folder, or an http(s) URL read at load
//! base_url = "http://127.0.0.1:8080" # default: the spec's first server (3.x) or host + basePath (2.0)
//! allow = ["127.0.0.1:8080"]         # outbound hosts (the spec URL, the base URL, redirects)
//! operations = ["get_uuid"]          # select by operationId (or the generated name) ...
//! tags = ["Images"]                  # ... by tag ...
//! paths = ["/status/*"]              # ... or by path (`*` at the end: a prefix); none: all
//! timeout_ms = 30000                 # a call's whole request, redirects included
//! connect_timeout_ms = 5000
//! max_response_kb = 4096             # a larger body fails the call
//! max_redirects = 5
//! max_concurrency = 32
//!
//! [api.auth]                         # optional: injected by the host, never shown
//! kind = "header"                    # header | query | bearer
//! name = "X-Api-Key"                 # the header or query parameter (not for bearer)
//! secret = "HTTPBIN_KEY"             # [secrets] HTTPBIN_KEY in the server config,
//!                                    # else TOOLHOST_SECRET_HTTPBIN_KEY in the environment
//!
//! [[tools]]                          # single endpoints, with or without a spec
//! name = "echo"
//! description = "Echo a JSON document."
//! method = "POST"
//! path = "/anything/{id}"            # joined to base_url; or url = "http://host/..."
//! input_schema = { type = "object", properties = { id = { type = "string" } } }
//! ```
//!
//! A single endpoint's `{placeholders}` take the input's properties of that
//! name; the other properties go in the query (GET, HEAD, DELETE) or as the
//! JSON body (other methods).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    #[serde(default)]
    pub description: Option<String>,
    pub api: ApiSection,
    #[serde(default)]
    pub tools: Vec<Endpoint>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiSection {
    #[serde(default)]
    pub spec: Option<String>,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub operations: Vec<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub paths: Vec<String>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    #[serde(default = "default_max_response_kb")]
    pub max_response_kb: u64,
    #[serde(default = "default_max_redirects")]
    pub max_redirects: usize,
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: u32,
    #[serde(default)]
    pub auth: Option<Auth>,
}

fn default_timeout_ms() -> u64 {
    30_000
}
fn default_connect_timeout_ms() -> u64 {
    5_000
}
fn default_max_response_kb() -> u64 {
    4096
}
fn default_max_redirects() -> usize {
    5
}
fn default_max_concurrency() -> u32 {
    32
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    pub kind: AuthKind,
    #[serde(default)]
    pub name: Option<String>,
    /// The secret's name (never its value).
    pub secret: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthKind {
    Header,
    Query,
    Bearer,
}

/// A single endpoint (seed 004's `api` runtime).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_method")]
    pub method: String,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub input_schema: Option<Value>,
    #[serde(default)]
    pub output_schema: Option<Value>,
}

fn default_method() -> String {
    "GET".into()
}

/// Parse a manifest's text; errors say which field is wrong.
pub fn parse(text: &str) -> Result<Manifest, String> {
    let manifest: Manifest = toml::from_str(text).map_err(|e| e.message().to_owned())?;
    let api = &manifest.api;
    if api.spec.is_none() && manifest.tools.is_empty() {
        return Err("[api] names no spec and there are no [[tools]]: nothing to serve".into());
    }
    if api.timeout_ms == 0 || api.connect_timeout_ms == 0 {
        return Err("[api] timeout_ms and connect_timeout_ms must be over 0".into());
    }
    if api.max_concurrency == 0 {
        return Err("[api] max_concurrency must be over 0".into());
    }
    if let Some(auth) = &api.auth {
        if auth.kind != AuthKind::Bearer && auth.name.as_deref().is_none_or(str::is_empty) {
            return Err(
                "[api.auth] name: the header or query parameter that carries the secret".into(),
            );
        }
        if !is_secret_name(&auth.secret) {
            return Err(format!(
                "[api.auth] secret `{}`: a name of letters, digits and `_`",
                auth.secret
            ));
        }
    }
    for t in &manifest.tools {
        if t.url.is_some() == t.path.is_some() {
            return Err(format!("[[tools]] `{}`: give either url or path", t.name));
        }
    }
    Ok(manifest)
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
    fn fields_are_checked() {
        let ok = parse("[api]\nspec = \"s.json\"\n").unwrap();
        assert_eq!(ok.api.timeout_ms, 30_000);
        for (bad, says) in [
            ("[api]\n", "nothing to serve"),
            ("[api]\nspec = \"s\"\nbogus = 1\n", "bogus"),
            (
                "[api]\nspec = \"s\"\n[api.auth]\nkind = \"header\"\nsecret = \"K\"\n",
                "name",
            ),
            (
                "[api]\nspec = \"s\"\n[api.auth]\nkind = \"bearer\"\nsecret = \"a-b\"\n",
                "secret",
            ),
            (
                "[api]\nspec = \"s\"\n[api.auth]\nkind = \"cookie\"\nsecret = \"K\"\n",
                "cookie",
            ),
            ("[api]\n[[tools]]\nname = \"x\"\n", "either url or path"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

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
}
