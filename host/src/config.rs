//! The server's configuration file (TOML). Every key has a default, so no file
//! is needed; `toolhost serve --config FILE` reads one, and command-line flags
//! override it. See `toolhost.example.toml` at the repository root.
//!
//! This file only composes: each section is defined, documented and checked
//! by the part it configures (`[docker]` in `docker::config`, `[engine]` in
//! `wasm::config`, ...), and nothing but the composition root (`server`,
//! `main`) reads the whole.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::nodes::docker::config::DockerConfig;
use crate::nodes::kubernetes::config::KubernetesConfig;
use crate::plugins::config::PluginsConfig;
use crate::registry::RegistryConfig;
use crate::sessions::SessionsConfig;
use crate::tasks::config::TasksConfig;
use crate::wasm::config::EngineConfig;
use toolhost_surfaces::auth::AuthConfig;
use toolhost_surfaces::config::{ServerConfig, XAgentConfig};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub sessions: SessionsConfig,
    pub xagent: XAgentConfig,
    pub registry: RegistryConfig,
    pub tasks: TasksConfig,
    /// `[events]`: seed 004's messages (`tool_ready`, `tool_error`,
    /// `health_alert`) to a callback too.
    pub events: crate::events::EventsConfig,
    /// `[health]`: how often tools are looked at, and what degrades them.
    pub health: crate::health::HealthConfig,
    /// Seed 004's budget for tool requests.
    pub budget: crate::tasks::budget::BudgetConfig,
    /// Limits of wasm plugins whose manifest does not set them.
    pub limits: crate::wasm::limits::PluginLimits,
    pub engine: EngineConfig,
    pub plugins: PluginsConfig,
    pub auth: AuthConfig,
    pub docker: DockerConfig,
    /// `[kubernetes]`: present, Docker-kind toolkits get their nodes from a
    /// cluster (agent-sandbox claims) instead of Docker engines.
    pub kubernetes: Option<KubernetesConfig>,
    /// `[mock]`: tools answering what their manifest says (`crate::mock`).
    pub mock: crate::mock::MockConfig,
    /// `[pins]`: when mounted toolkits' tool definitions are pinned
    /// (`crate::pins`).
    pub pins: crate::pins::PinsConfig,
    /// `[oci]`: registry logins (`crate::oci`).
    pub oci: crate::oci::OciConfig,
    /// `[trust]`: who must have signed components, by source
    /// (`crate::trust`).
    pub trust: crate::trust::TrustConfig,
    /// Named secrets API toolkits reference (`[api.auth] secret`); see
    /// [`SecretValues`].
    pub secrets: SecretValues,
    /// `[telemetry]`: traces over OTLP, the log lines' format
    /// (`crate::traces`).
    pub telemetry: crate::traces::TelemetryConfig,
}

/// `[secrets]`: name = value. The values never leave the server: `Debug`
/// and serialisation show only the names.
#[derive(Clone, Default, Deserialize)]
#[serde(transparent)]
pub struct SecretValues(pub std::collections::BTreeMap<String, String>);

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl Serialize for SecretValues {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for name in self.0.keys() {
            map.serialize_entry(name, "[hidden]")?;
        }
        map.end()
    }
}

impl Config {
    /// Read `path`; unknown keys are errors.
    pub fn from_file(path: &Path) -> anyhow::Result<Config> {
        use anyhow::Context;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("failed to read {}", path.display()))?;
        let config: Config = toml::from_str(&text)
            .with_context(|| format!("invalid config file {}", path.display()))?;
        config.check()?;
        Ok(config)
    }

    /// A warning for an exposed server: a non-loopback address and no caller
    /// tokens, so anyone who reaches it can run tools.
    pub fn exposure_warning(&self) -> Option<String> {
        (!self.server.bind.ip().is_loopback() && !self.auth.required()).then(|| {
            format!(
                "!!! listening on {} WITHOUT caller tokens: anyone who can reach it can run \
                 tools and read session workspaces. Set TOOLHOST_TOKEN (or [auth] tokens) !!!",
                self.server.bind
            )
        })
    }

    /// Reject impossible values.
    pub fn check(&self) -> anyhow::Result<()> {
        if let Some(k) = &self.kubernetes {
            k.check()
                .map_err(|m| anyhow::anyhow!("[kubernetes]: {m}"))?;
        }
        self.engine.check().map_err(anyhow::Error::msg)?;
        let e = &self.engine;
        self.limits
            .check(e.max_memory_mb)
            .map_err(|m| anyhow::anyhow!("[limits]: {m}"))?;
        anyhow::ensure!(
            self.server.body_timeout_ms >= 100,
            "server.body_timeout_ms must be at least 100"
        );
        anyhow::ensure!(
            self.plugins.max_upload_mb >= 1,
            "plugins.max_upload_mb must be at least 1"
        );
        self.auth.check().map_err(anyhow::Error::msg)?;
        self.telemetry.check()?;
        crate::trust::Trust::from_config(&self.trust)
            .map_err(|m| anyhow::anyhow!("[trust]: {m}"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubernetes_section_is_checked_at_start_up() {
        let c: Config = toml::from_str(
            "[kubernetes]\nnamespace = \"toolhost\"\nworkspace_pvc = \"toolhost-workspaces\"\nshared_workspaces = true\nwarm_pool = 2\nready_timeout_s = 90\nruntime_class = \"gvisor\"\ninstance = \"toolhost-0\"",
        )
        .unwrap();
        c.check().unwrap();
        let k = c.kubernetes.unwrap();
        assert_eq!((k.warm_pool, k.ready_timeout_s), (2, 90));
        // Absent: no cluster.
        assert!(toml::from_str::<Config>("").unwrap().kubernetes.is_none());
        let refused = |text: &str| {
            let c: Config = toml::from_str(text).unwrap();
            c.check().unwrap_err().to_string()
        };
        let e = refused("[kubernetes]\nnamespace = \"toolhost\"");
        assert!(
            e.contains("[kubernetes]") && e.contains("workspace_pvc is required"),
            "{e}"
        );
        let e = refused("[kubernetes]\nnamespace = \"Tool_Host\"\nworkspace_pvc = \"w\"");
        assert!(e.contains("namespace `Tool_Host`"), "{e}");
        let e = refused("[kubernetes]\nworkspace_pvc = \"w\"\nready_timeout_s = 0");
        assert!(e.contains("ready_timeout_s"), "{e}");
        let e = refused("[kubernetes]\nworkspace_pvc = \"w\"\nwarm_pool = 2");
        assert!(e.contains("warm_pool needs shared_workspaces"), "{e}");
        let e = refused("[kubernetes]\nworkspace_pvc = \"w\"\ncontext = \"kind-kind\"");
        assert!(e.contains("context needs a kubeconfig"), "{e}");
        let e = refused("[kubernetes]\nworkspace_pvc = \"w\"\ninstance = \"a b\"");
        assert!(e.contains("instance `a b`"), "{e}");
        // Unknown keys and wrong types are refused by the parser.
        assert!(
            toml::from_str::<Config>("[kubernetes]\nworkspace_pvc = \"w\"\nwarmpool = 1").is_err()
        );
        assert!(
            toml::from_str::<Config>("[kubernetes]\nworkspace_pvc = \"w\"\nwarm_pool = -1")
                .is_err()
        );
    }

    #[test]
    fn defaults_need_no_file_and_unknown_keys_are_refused() {
        let c: Config = toml::from_str("").unwrap();
        c.check().unwrap();
        assert_eq!(c.server.bind.to_string(), "127.0.0.1:8001");
        assert!(toml::from_str::<Config>("[server]\nbnd = \"x\"").is_err());
        let c: Config = toml::from_str("[limits]\nfuel = 5\nmemory_mb = 8\ntimeout_ms = 10\nmax_concurrency = 1\nmax_queue = 0\nmax_output_kb = 1").unwrap();
        assert_eq!(c.limits.fuel, 5);
        let c: Config = toml::from_str("[engine]\nmax_memory_mb = 8192").unwrap();
        assert!(c.check().is_err());
    }

    #[test]
    fn an_exposed_server_without_tokens_is_warned_about() {
        let mut c = Config::default();
        assert_eq!(c.exposure_warning(), None, "loopback");
        c.server.bind = "0.0.0.0:8001".parse().unwrap();
        assert!(
            c.exposure_warning()
                .unwrap()
                .contains("WITHOUT caller tokens")
        );
        c.auth.tokens.push("a-token-of-16-chars".into());
        c.check().unwrap();
        assert_eq!(c.exposure_warning(), None);
        c.auth.tokens.push("short".into());
        assert!(c.check().is_err());
    }

    #[test]
    fn the_example_file_is_the_defaults() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../toolhost.example.toml");
        let example = Config::from_file(std::path::Path::new(path)).unwrap();
        let defaults = Config::default();
        assert_eq!(
            toml::to_string(&example).unwrap(),
            toml::to_string(&defaults).unwrap()
        );
    }
}
