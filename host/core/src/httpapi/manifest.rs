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
//! lenient = false                    # an entry the spec lacks: an error (true: a warning)
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

use serde::Deserialize;

pub use crate::credentials::{Auth, AuthKind, Secrets};
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    #[serde(default)]
    pub description: Option<String>,
    /// What `GET /tools` files its tools under (else the toolkit's name).
    #[serde(default)]
    pub category: Option<String>,
    /// `[health]`: this toolkit's looks ([`crate::health::declared`]).
    #[serde(default)]
    pub health: Option<crate::health::declared::Declared>,
    /// `[fallback]`: a tool -> the tool ids tried when it cannot serve.
    #[serde(default)]
    pub fallback: crate::health::declared::Fallbacks,
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
    /// An entry of `operations` / `tags` / `paths` the spec does not have is
    /// a warning in `GET /plugins` rather than an error.
    #[serde(default)]
    pub lenient: bool,
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
        auth.check("[api.auth]", true)?;
    }
    for t in &manifest.tools {
        if t.url.is_some() == t.path.is_some() {
            return Err(format!("[[tools]] `{}`: give either url or path", t.name));
        }
    }
    Ok(manifest)
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
}
