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
//! [mcp.auth]                          # optional: sent by the host, never shown
//! kind = "bearer"                     # bearer | header
//! name = "X-Api-Key"                  # the header (not for bearer)
//! secret = "EVERYTHING_TOKEN"         # [secrets] in the config, else TOOLHOST_SECRET_<name>
//! ```

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    #[serde(default)]
    pub description: Option<String>,
    pub mcp: McpSection,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    pub url: String,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default = "default_init_timeout_ms")]
    pub init_timeout_ms: u64,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: u32,
    #[serde(default)]
    pub auth: Option<Auth>,
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    pub kind: AuthKind,
    #[serde(default)]
    pub name: Option<String>,
    pub secret: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthKind {
    Bearer,
    Header,
}

/// Parse a manifest's text; errors say which field is wrong.
pub fn parse(text: &str) -> Result<Manifest, String> {
    let manifest: Manifest = toml::from_str(text).map_err(|e| e.message().to_owned())?;
    let m = &manifest.mcp;
    let url = reqwest::Url::parse(&m.url).map_err(|e| format!("[mcp] url `{}`: {e}", m.url))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("[mcp] url `{}`: http or https", m.url));
    }
    if m.init_timeout_ms == 0 || m.timeout_ms == 0 || m.max_concurrency == 0 {
        return Err("[mcp] init_timeout_ms, timeout_ms and max_concurrency must be over 0".into());
    }
    if let Some(auth) = &m.auth
        && auth.kind == AuthKind::Header
        && auth.name.as_deref().is_none_or(str::is_empty)
    {
        return Err("[mcp.auth] name: the header that carries the secret".into());
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
        for (bad, says) in [
            ("[mcp]\nurl = \"nope\"\n", "url"),
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
