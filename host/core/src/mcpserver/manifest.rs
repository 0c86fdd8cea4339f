//! The manifest of an MCP-server toolkit, `<plugins>/<name>/<name>.toml`:
//!
//! ```toml
//! description = "The MCP reference server's tools"
//!
//! [mcp]
//! url = "http://127.0.0.1:3001/mcp"   # a remote server (streamable HTTP)
//! allow = ["127.0.0.1:3001"]          # outbound hosts (the URL's host must be on it)
//! init_timeout_ms = 10000             # initialize + tools/list, else `failed`
//! timeout_ms = 60000                  # one call (the server is told to cancel past it)
//! max_concurrency = 16
//!
//! A server run from a command instead (stdio), in a node container with
//! the node hardening and no network:
//!
//! ```toml
//! [mcp]
//! command = ["node", "/opt/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio"]
//! mount = "/srv/mcp-servers"          # a host directory (or one of this folder), read-only at /opt/mcp
//! image = "toolhost-node:latest"
//! env = { LOG_LEVEL = "warn" }
//! memory_mb = 512
//! cpus = 1.0
//! per_session = true                  # a server per toolhost session, its workspace at /workspace
//! ```
//!
//! [mcp.auth]                          # optional: sent by the host, never shown
//! kind = "bearer"                     # bearer | header
//! name = "X-Api-Key"                  # the header (not for bearer)
//! secret = "EVERYTHING_TOKEN"         # [secrets] in the config, else TOOLHOST_SECRET_<name>
//! ```

use serde::Deserialize;

pub use crate::credentials::{Auth, AuthKind};

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
    pub mcp: McpSection,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// A remote server (streamable HTTP) ...
    #[serde(default)]
    pub url: Option<String>,
    /// ... or one run from this command in a node container (stdio).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    #[serde(default = "default_image")]
    pub image: String,
    /// Mounted read-only at `/opt/mcp` (relative: to the toolkit's folder).
    #[serde(default)]
    pub mount: Option<std::path::PathBuf>,
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    #[serde(default = "default_memory_mb")]
    pub memory_mb: u32,
    #[serde(default = "default_cpus")]
    pub cpus: f64,
    #[serde(default = "default_pids")]
    pub pids: u32,
    /// A server of its own for each toolhost session (stdio only), with the
    /// session's workspace at `/workspace`, stopped when the session closes.
    #[serde(default)]
    pub per_session: bool,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default = "default_init_timeout_ms")]
    pub init_timeout_ms: u64,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: u32,
    /// Tools served at most (the server's first ones); beyond, a warning.
    #[serde(default = "default_max_tools")]
    pub max_tools: usize,
    #[serde(default)]
    pub auth: Option<Auth>,
}

fn default_image() -> String {
    "toolhost-node:latest".into()
}
fn default_memory_mb() -> u32 {
    512
}
fn default_cpus() -> f64 {
    1.0
}
fn default_pids() -> u32 {
    256
}
fn default_init_timeout_ms() -> u64 {
    10_000
}
fn default_timeout_ms() -> u64 {
    60_000
}
fn default_max_concurrency() -> u32 {
    16
}
fn default_max_tools() -> usize {
    1000
}

/// Parse a manifest's text; errors say which field is wrong.
pub fn parse(text: &str) -> Result<Manifest, String> {
    let manifest: Manifest = toml::from_str(text).map_err(|e| e.message().to_owned())?;
    let m = &manifest.mcp;
    match (&m.url, &m.command) {
        (Some(url), None) => {
            let parsed = reqwest::Url::parse(url).map_err(|e| format!("[mcp] url `{url}`: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(format!("[mcp] url `{url}`: http or https"));
            }
        }
        (None, Some(command)) => {
            if command.is_empty() || command[0].is_empty() {
                return Err("[mcp] command is empty".into());
            }
            let in_range = (16..=65536).contains(&m.memory_mb)
                && m.cpus > 0.0
                && m.cpus <= 64.0
                && m.pids >= 16;
            if !in_range {
                return Err(
                    "[mcp] memory_mb (16..=65536), cpus (0..=64) or pids (16..) is out of range"
                        .into(),
                );
            }
        }
        _ => {
            return Err(
                "[mcp] url (a remote server) or command (a server run in a node), one of them"
                    .into(),
            );
        }
    }
    if m.per_session && m.command.is_none() {
        return Err("[mcp] per_session is for servers run from a command".into());
    }
    if m.init_timeout_ms == 0 || m.timeout_ms == 0 || m.max_concurrency == 0 {
        return Err("[mcp] init_timeout_ms, timeout_ms and max_concurrency must be over 0".into());
    }
    if let Some(auth) = &m.auth {
        auth.check("[mcp.auth]", false)?;
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_checked() {
        let ok = parse("[mcp]\nurl = \"http://127.0.0.1:1/mcp\"\n").unwrap();
        assert_eq!(ok.mcp.timeout_ms, 60_000);
        let stdio = parse("[mcp]\ncommand = [\"node\", \"x.js\"]\n").unwrap();
        assert_eq!(stdio.mcp.image, "toolhost-node:latest");
        for (bad, says) in [
            ("[mcp]\nurl = \"nope\"\n", "url"),
            ("[mcp]\n", "one of them"),
            (
                "[mcp]\nurl = \"http://h/\"\ncommand = [\"x\"]\n",
                "one of them",
            ),
            ("[mcp]\ncommand = []\n", "empty"),
            ("[mcp]\ncommand = [\"x\"]\nmemory_mb = 1\n", "out of range"),
            ("[mcp]\nurl = \"ftp://h/x\"\n", "http or https"),
            ("[mcp]\nurl = \"http://h/\"\ntimeout_ms = 0\n", "over 0"),
            ("[mcp]\nurl = \"http://h/\"\nbogus = 1\n", "bogus"),
            (
                "[mcp]\nurl = \"http://h/\"\n[mcp.auth]\nkind = \"header\"\nsecret = \"S\"\n",
                "name",
            ),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
