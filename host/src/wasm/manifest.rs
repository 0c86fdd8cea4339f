//! The plugin manifest, `<name>.toml` beside `<name>.wasm`.
//!
//! ```toml
//! description = "What the plugin is for."
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
//! [env]
//! pass = ["OPENAI_API_KEY"] # the server's environment variables the plugin sees
//! ```
//!
//! Everything is denied unless granted here: no environment variables, no
//! network, no filesystem but the session workspace (when granted).
//! Unknown keys are errors, so a typo never silently drops a limit.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::tool::Limits;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// What the plugin is for (shown as the toolkit's description).
    #[serde(default)]
    pub description: Option<String>,
    /// What `GET /tools` files its tools under (else the toolkit's name).
    #[serde(default)]
    pub category: Option<String>,
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
}

/// Outbound HTTP: hosts (`host`, `*.domain`, `host:port`, `host:*`) and methods.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpGrant {
    #[serde(default)]
    pub allow: Vec<String>,
    /// Empty: GET and HEAD.
    #[serde(default)]
    pub methods: Vec<String>,
}

/// Environment variables of the server passed to the plugin, by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvGrant {
    #[serde(default)]
    pub pass: Vec<String>,
}

/// Limits a manifest may set; unset ones come from the server's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestLimits {
    pub fuel: Option<u64>,
    pub memory_mb: Option<u32>,
    pub timeout_ms: Option<u64>,
    pub max_concurrency: Option<u32>,
    pub max_queue: Option<u32>,
    pub max_output_kb: Option<u32>,
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
        toml::from_str(text).map_err(|e| e.message().to_owned() + &span_hint(text, e.span()))
    }

    /// The effective limits: these over `defaults`, checked against the engine.
    pub fn limits(&self, defaults: &Limits, max_memory_mb: u32) -> Result<Limits, String> {
        let m = &self.limits;
        let limits = Limits {
            fuel: m.fuel.unwrap_or(defaults.fuel),
            memory_mb: m.memory_mb.unwrap_or(defaults.memory_mb),
            timeout_ms: m.timeout_ms.unwrap_or(defaults.timeout_ms),
            max_concurrency: m.max_concurrency.unwrap_or(defaults.max_concurrency),
            max_queue: m.max_queue.unwrap_or(defaults.max_queue),
            max_output_kb: m.max_output_kb.unwrap_or(defaults.max_output_kb),
        };
        check_limits(&limits, max_memory_mb)?;
        Ok(limits)
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

/// Reject limits no call could run under.
pub fn check_limits(l: &Limits, max_memory_mb: u32) -> Result<(), String> {
    let range = |name: &str, v: u64, lo: u64, hi: u64| {
        if (lo..=hi).contains(&v) {
            Ok(())
        } else {
            Err(format!("{name} = {v} is out of range {lo}..={hi}"))
        }
    };
    range("fuel", l.fuel, 1_000, u64::MAX / 2)?;
    range("memory_mb", l.memory_mb.into(), 1, max_memory_mb.into())
        .map_err(|e| format!("{e} (the server's engine.max_memory_mb)"))?;
    range("timeout_ms", l.timeout_ms, 1, 3_600_000)?;
    range("max_concurrency", l.max_concurrency.into(), 1, 4096)?;
    range("max_queue", l.max_queue.into(), 0, 100_000)?;
    range("max_output_kb", l.max_output_kb.into(), 1, 1 << 20)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let l = m.limits(&Limits::default(), 512).unwrap();
        assert_eq!((l.fuel, l.memory_mb), (5000, 16));
        assert_eq!(l.timeout_ms, Limits::default().timeout_ms);
    }

    #[test]
    fn empty_manifest_denies_everything() {
        let m = Manifest::parse("").unwrap();
        assert_eq!(m.workspace.access, Access::None);
        assert!(m.config.is_empty());
    }

    #[test]
    fn unknown_keys_and_impossible_limits_are_errors() {
        let err = Manifest::parse("[limits]\nfuell = 5").unwrap_err();
        assert!(err.contains("fuell"), "{err}");
        assert!(err.contains("line 2"), "{err}");
        assert!(Manifest::parse("[network]\nallow = [\"*\"]").is_err());
        assert!(Manifest::parse("[workspace]\naccess = \"everything\"").is_err());
        let m = Manifest::parse("[limits]\nmemory_mb = 100000").unwrap();
        let err = m.limits(&Limits::default(), 512).unwrap_err();
        assert!(err.contains("memory_mb = 100000"), "{err}");
        let m = Manifest::parse("[limits]\ntimeout_ms = 0").unwrap();
        assert!(m.limits(&Limits::default(), 512).is_err());
        let m = Manifest::parse("[limits]\nmax_concurrency = 0").unwrap();
        assert!(m.limits(&Limits::default(), 512).is_err());
    }
}
