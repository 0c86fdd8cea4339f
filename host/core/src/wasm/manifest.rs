//! The plugin manifest, `<name>.toml` beside `<name>.wasm`.
//!
//! ```toml
//! description = "What the plugin is for."
//! source = "oci://registry.example.com/tools/calc:1.0"  # fetched from there
//!                         # when <name>.wasm is missing (`wasm::provenance`)
//! [limits]            # each key optional; unset keys take the server's [limits]
//! fuel = 50_000_000
//! memory_mb = 16
//! timeout_ms = 2000
//! max_concurrency = 64
//! max_queue = 64
//! max_output_kb = 1024
//! [workspace]
//! access = "read-write"   # "none" (default), "read-only" or "read-write"
//! [config]                # values the plugin reads through the `config` import
//! api_key = "..."
//! [http]                  # outbound HTTP (wasi:http): see `wasm::http`
//! allow = ["api.example.com", "*.wikipedia.org", "127.0.0.1:8080"]
//! methods = ["GET", "HEAD"]
//! [[http.auth]]           # a secret the host adds to requests for one host
//! host = "api.example.com"  # exact, with an optional port; must be allowed
//! kind = "header"           # "header" (needs `name`) or "bearer"
//! name = "X-Api-Key"
//! secret = "EXAMPLE_KEY"    # server config [secrets], else TOOLHOST_SECRET_EXAMPLE_KEY
//! [env]
//! pass = ["OPENAI_API_KEY"] # the server's environment variables the plugin sees
//! [assets]                # a folder the plugin reads (read-only) at /assets,
//! dir = ".models/minilm"  # e.g. a model's weights: relative to the plugins
//!                         # directory, or absolute; missing: not mounted
//! ```
//!
//! Everything is denied unless granted here: no environment variables, no
//! network, no filesystem but the session workspace (when granted).
//! Unknown keys are errors, so a typo never silently drops a limit.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::limits::ManifestLimits;
use crate::credentials::{Auth, AuthKind};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// What the plugin is for (shown as the toolkit's description).
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
    /// The registry the component comes from (`wasm::provenance`).
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub limits: ManifestLimits,
    #[serde(default)]
    pub workspace: WorkspaceGrant,
    /// Configuration values visible to the plugin.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    #[serde(default)]
    pub http: HttpGrant,
    #[serde(default)]
    pub env: EnvGrant,
    #[serde(default)]
    pub assets: AssetsGrant,
    /// Prompts and resources served beside the tools (`crate::declared`).
    #[serde(default)]
    pub prompts: Vec<crate::declared::Prompt>,
    #[serde(default)]
    pub resources: Vec<crate::declared::Resource>,
    #[serde(default)]
    pub resource_templates: Vec<crate::declared::ResourceTemplate>,
    /// `[tools.<name>]`: how a tool is served over MCP.
    #[serde(default)]
    pub tools: BTreeMap<String, crate::declared::ToolDecl>,
}

/// A folder of the host the plugin reads at [`GUEST_ASSETS`], read-only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetsGrant {
    /// Relative to the plugins directory, or absolute; no `..`.
    #[serde(default)]
    pub dir: Option<String>,
}

/// Where `[assets] dir` appears inside the sandbox.
pub const GUEST_ASSETS: &str = "/assets";

/// Outbound HTTP: hosts (`host`, `*.domain`, `host:port`, `host:*`) and methods.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpGrant {
    #[serde(default)]
    pub allow: Vec<String>,
    /// Empty: GET and HEAD.
    #[serde(default)]
    pub methods: Vec<String>,
    /// Secrets the host injects into requests for given hosts.
    #[serde(default)]
    pub auth: Vec<HttpAuth>,
}

/// `[[http.auth]]`: the secret the host adds, as a sensitive header, to the
/// plugin's requests for one exact host (and port) once the allow-list let
/// them through. The plugin names the secret, never sees its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpAuth {
    /// The exact host, with an optional port (none: the scheme's default).
    pub host: String,
    pub kind: AuthKind,
    /// The header that carries the secret (not for bearer).
    #[serde(default)]
    pub name: Option<String>,
    /// The secret's name (never its value).
    pub secret: String,
}

impl HttpAuth {
    /// The host and port the secret goes to (port none: the scheme's default).
    pub fn target(&self) -> Result<(String, Option<u16>), String> {
        let entry = self.host.trim().to_ascii_lowercase();
        let bad = |why: &str| format!("http.auth host `{}`: {why}", self.host);
        if entry.contains('/') || entry.contains('*') || entry.is_empty() {
            return Err(bad(
                "write one exact host with an optional port, without a scheme, path or `*`",
            ));
        }
        // `[::1]:8080` / `[::1]` (IPv6) or `host:port` / `host`.
        let (host, port) = match entry.strip_prefix('[') {
            Some(rest) => {
                let (addr, after) = rest.split_once(']').ok_or_else(|| bad("unclosed `[`"))?;
                (format!("[{addr}]"), after.strip_prefix(':'))
            }
            None => match entry.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), Some(p)),
                None => (entry.clone(), None),
            },
        };
        let port = port
            .map(|p| p.parse::<u16>().map_err(|_| bad("bad port")))
            .transpose()?;
        let valid = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.[]:".contains(&b));
        if !valid {
            return Err(bad("not a host name or address"));
        }
        Ok((host, port))
    }

    /// Check the entry: its host, its kind (header or bearer) and names.
    pub fn check(&self) -> Result<(), String> {
        self.target()?;
        self.as_auth()
            .check(&format!("http.auth for `{}`:", self.host), false)
    }

    /// The same as the `auth` table API tools use.
    pub fn as_auth(&self) -> Auth {
        Auth {
            kind: self.kind,
            name: self.name.clone(),
            secret: self.secret.clone(),
        }
    }
}

/// Environment variables of the server passed to the plugin, by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvGrant {
    #[serde(default)]
    pub pass: Vec<String>,
}

/// Access to the session workspace, preopened in the guest at [`GUEST_WORKSPACE`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceGrant {
    #[serde(default)]
    pub access: Access,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    #[default]
    None,
    ReadOnly,
    ReadWrite,
}

/// Where the session workspace appears inside the sandbox.
pub const GUEST_WORKSPACE: &str = "/workspace";

impl Manifest {
    /// Parse manifest text.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let m: Manifest = toml::from_str(text)
            .map_err(|e| e.message().to_owned() + &span_hint(text, e.span()))?;
        m.http.auth.iter().try_for_each(HttpAuth::check)?;
        m.declared().check()?;
        if let Some(dir) = &m.assets.dir {
            let path = std::path::Path::new(dir);
            if dir.is_empty()
                || path
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(format!("[assets] dir `{dir}`: a folder path without `..`"));
            }
        }
        Ok(m)
    }

    /// The prompts and resources it declares.
    pub fn declared(&self) -> crate::declared::Declared {
        crate::declared::Declared {
            prompts: self.prompts.clone(),
            resources: self.resources.clone(),
            resource_templates: self.resource_templates.clone(),
            tools: self.tools.clone(),
        }
    }
}

fn span_hint(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!(" (line {line})")
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm::limits::PluginLimits;

    #[test]
    fn full_manifest() {
        let m = Manifest::parse(
            r#"
            description = "d"
            [limits]
            fuel = 5000
            memory_mb = 16
            [workspace]
            access = "read-only"
            [config]
            key = "v"
            "#,
        )
        .unwrap();
        assert_eq!(m.workspace.access, Access::ReadOnly);
        assert_eq!(m.config["key"], "v");
        let l = m.limits.over(&PluginLimits::default(), 512).unwrap();
        assert_eq!((l.fuel, l.memory_mb), (5000, 16));
        assert_eq!(l.timeout_ms, PluginLimits::default().timeout_ms);
    }

    #[test]
    fn empty_manifest_denies_everything() {
        let m = Manifest::parse("").unwrap();
        assert_eq!(m.workspace.access, Access::None);
        assert!(m.config.is_empty());
    }

    #[test]
    fn assets_are_a_folder_without_parent_steps() {
        let m = Manifest::parse("[assets]\ndir = \".models/minilm\"").unwrap();
        assert_eq!(m.assets.dir.as_deref(), Some(".models/minilm"));
        for bad in [
            "dir = \"../elsewhere\"",
            "dir = \"a/../../b\"",
            "dir = \"\"",
            "path = \"x\"",
        ] {
            assert!(
                Manifest::parse(&format!("[assets]\n{bad}")).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn unknown_keys_and_impossible_limits_are_errors() {
        let err = Manifest::parse("[limits]\nfuell = 5").unwrap_err();
        assert!(err.contains("fuell"), "{err}");
        assert!(err.contains("line 2"), "{err}");
        assert!(Manifest::parse("[network]\nallow = [\"*\"]").is_err());
        assert!(Manifest::parse("[workspace]\naccess = \"everything\"").is_err());
        let m = Manifest::parse("[limits]\nmemory_mb = 100000").unwrap();
        let err = m.limits.over(&PluginLimits::default(), 512).unwrap_err();
        assert!(err.contains("memory_mb = 100000"), "{err}");
        let m = Manifest::parse("[limits]\ntimeout_ms = 0").unwrap();
        assert!(m.limits.over(&PluginLimits::default(), 512).is_err());
        let m = Manifest::parse("[limits]\nmax_concurrency = 0").unwrap();
        assert!(m.limits.over(&PluginLimits::default(), 512).is_err());
    }

    #[test]
    fn http_auth_entries_name_a_host_a_kind_and_a_secret() {
        let m = Manifest::parse(
            r#"
            [http]
            allow = ["api.search.brave.com", "127.0.0.1:8080"]
            [[http.auth]]
            host = "api.search.brave.com"
            kind = "header"
            name = "X-Subscription-Token"
            secret = "BRAVE_API_KEY"
            [[http.auth]]
            host = "127.0.0.1:8080"
            kind = "bearer"
            secret = "LOCAL"
            "#,
        )
        .unwrap();
        let [brave, local] = &m.http.auth[..] else {
            panic!("two entries: {:?}", m.http.auth)
        };
        assert_eq!(
            brave.target().unwrap(),
            ("api.search.brave.com".into(), None)
        );
        assert_eq!(brave.kind, AuthKind::Header);
        assert_eq!(local.target().unwrap(), ("127.0.0.1".into(), Some(8080)));
        let six = HttpAuth {
            host: "[::1]:9".into(),
            ..local.clone()
        };
        assert_eq!(six.target().unwrap(), ("[::1]".into(), Some(9)));

        let entry = |body: &str| Manifest::parse(&format!("[[http.auth]]\n{body}"));
        let cases = [
            // An unknown kind, and a query secret (no query injection here).
            (
                r#"host="a.com"
kind="cookie"
secret="K""#,
                "cookie",
            ),
            (
                r#"host="a.com"
kind="query"
name="k"
secret="K""#,
                "kind",
            ),
            // A header without a name, or with an empty one.
            (
                r#"host="a.com"
kind="header"
secret="K""#,
                "name",
            ),
            (
                r#"host="a.com"
kind="header"
name=""
secret="K""#,
                "name",
            ),
            // Secret names: letters, digits, `_`; a missing one.
            (
                r#"host="a.com"
kind="bearer"
secret="a-b""#,
                "secret",
            ),
            (
                r#"host="a.com"
kind="bearer""#,
                "secret",
            ),
            // Hosts: exact, no scheme, path or wildcard; a real port.
            (
                r#"host="https://a.com"
kind="bearer"
secret="K""#,
                "https://a.com",
            ),
            (
                r#"host="*.a.com"
kind="bearer"
secret="K""#,
                "*.a.com",
            ),
            (
                r#"host="a.com:http"
kind="bearer"
secret="K""#,
                "bad port",
            ),
            (
                r#"host=""
kind="bearer"
secret="K""#,
                "http.auth host",
            ),
            (
                r#"host="a.com"
kind="bearer"
secret="K"
value="leaked""#,
                "value",
            ),
        ];
        for (body, expected) in cases {
            let err = entry(body).unwrap_err();
            assert!(err.contains(expected), "{body}: {err}");
        }
    }
}
