//! The server's configuration file (TOML). Every key has a default, so no file
//! is needed; `toolhost serve --config FILE` reads one, and command-line flags
//! override it. See `toolhost.example.toml` at the repository root.

use std::net::SocketAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::tool::Limits;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub sessions: SessionsConfig,
    pub xagent: XAgentConfig,
    pub registry: RegistryConfig,
    pub tasks: TasksConfig,
    /// Seed 004's budget for tool requests.
    pub budget: crate::tasks::budget::BudgetConfig,
    /// Limits of plugins whose manifest does not set them.
    pub limits: Limits,
    pub engine: EngineConfig,
    pub plugins: PluginsConfig,
    pub auth: AuthConfig,
    pub docker: DockerConfig,
    /// `[kubernetes]`: present, Docker-kind toolkits get their nodes from a
    /// cluster (agent-sandbox claims) instead of Docker engines.
    pub kubernetes: Option<KubernetesConfig>,
    /// Named secrets API toolkits reference (`[api.auth] secret`); see
    /// [`SecretValues`].
    pub secrets: SecretValues,
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

/// The Docker backend (heavy tools in containers).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DockerConfig {
    /// Register the Docker toolkits of the plugins directory (folders
    /// `<name>/<name>.toml`). Without a reachable engine they are listed and
    /// answer `backend_unavailable` until it is back.
    pub enabled: bool,
    /// Service containers (toolkits with `internal_port`) may be given at
    /// most this share of the host's cores, summed over their `cpus` ...
    pub max_cpu_share: f64,
    /// ... and this share of its memory, summed over their `memory_mb`; a
    /// start beyond either is refused (`overloaded`, seed 004's rule).
    pub max_memory_share: f64,
    /// `[[docker.engines]]`: several Docker engines as one node pool (see
    /// `crate::docker::engines`). Empty: the one engine the docker CLI
    /// would use (`DOCKER_HOST`, else the local socket).
    pub engines: Vec<DockerEngine>,
    /// A `docker save` archive of the node image, loaded into an engine
    /// that lacks an image it holds (engines that cannot pull).
    pub image_archive: Option<std::path::PathBuf>,
}

/// One Docker engine of the node pool.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DockerEngine {
    /// Its name in `GET /plugins`, `/metrics` and the drain route.
    pub name: String,
    /// `unix:///path`, `tcp://host:port` (with `tls_*`) or `ssh://user@host`.
    pub url: String,
    /// Client certificate, its key and the CA of the engine (TCP with TLS).
    pub tls_cert: Option<std::path::PathBuf>,
    pub tls_key: Option<std::path::PathBuf>,
    pub tls_ca: Option<std::path::PathBuf>,
    /// The private key for an `ssh://` engine (else ssh's own defaults).
    pub ssh_key: Option<std::path::PathBuf>,
    /// Where the engine's host sees toolhost's folders when not at the same
    /// paths (a remote engine over a shared filesystem): a local folder to
    /// its path there, e.g. `{ "/srv/toolhost" = "/mnt/toolhost" }`. Bind
    /// mounts (workspaces, drivers, service folders) under a listed folder
    /// are mapped; the others are passed as they are.
    pub paths: std::collections::BTreeMap<std::path::PathBuf, std::path::PathBuf>,
}

impl Default for DockerConfig {
    fn default() -> Self {
        DockerConfig {
            enabled: true,
            max_cpu_share: 1.0,
            max_memory_share: 0.8,
            engines: Vec::new(),
            image_archive: None,
        }
    }
}

/// `[kubernetes]`: the cluster node provider (see
/// `crate::docker::cluster`). The key names are shared with the deployment
/// manifests (`deploy/kubernetes/`); keep `/work/k8s-config-keys.md` and
/// the README in step.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KubernetesConfig {
    /// Namespace of every object toolhost makes, and of the sandbox pods.
    pub namespace: String,
    /// Kubeconfig file; none: the in-cluster service account, else
    /// `$KUBECONFIG` / `~/.kube/config`.
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Context of the kubeconfig (its current one when unset).
    pub context: Option<String>,
    /// Value of the instance label on this server's claims (default:
    /// `$HOSTNAME`, else the data directory's scope).
    pub instance: Option<String>,
    /// PersistentVolumeClaim (ReadWriteMany) of the session workspaces:
    /// mounted at `/workspaces` in every sandbox, and by the toolhost
    /// replicas at `<data>/workspaces`.
    pub workspace_pvc: String,
    /// Pre-started sandboxes per toolkit (`SandboxWarmPool.spec.replicas`).
    pub warm_pool: u32,
    /// How long a first heavy call waits for its claim to be ready, s.
    pub ready_timeout_s: u64,
    /// `runtimeClassName` of the sandbox pods (gVisor, Kata, ...).
    pub runtime_class: Option<String>,
    /// Every sandbox mounts the whole workspaces volume and starts in its
    /// session's directory, so warm sandboxes can be handed out; a shell can
    /// then reach other sessions' files. Off (the default): each sandbox
    /// mounts its session's directory alone at /workspace, started for its
    /// claim (no warm pool).
    pub shared_workspaces: bool,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            namespace: "default".into(),
            kubeconfig: None,
            context: None,
            instance: None,
            workspace_pvc: String::new(),
            warm_pool: 0,
            ready_timeout_s: 120,
            runtime_class: None,
            shared_workspaces: false,
        }
    }
}

impl KubernetesConfig {
    /// Why these settings cannot work, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        let dns_label = |s: &str| {
            !s.is_empty()
                && s.len() <= 63
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !s.starts_with('-')
                && !s.ends_with('-')
        };
        if !dns_label(&self.namespace) {
            return Err(format!(
                "namespace `{}` is not a valid namespace name (lower-case letters, digits and '-', at most 63)",
                self.namespace
            ));
        }
        if self.workspace_pvc.is_empty() {
            return Err("workspace_pvc is required: the PersistentVolumeClaim (ReadWriteMany) that holds the session workspaces, mounted by the sandboxes and by toolhost at <data>/workspaces".into());
        }
        if !crate::docker::cluster::is_dns_subdomain(&self.workspace_pvc) {
            return Err(format!(
                "workspace_pvc `{}` is not a valid object name",
                self.workspace_pvc
            ));
        }
        if self.ready_timeout_s == 0 {
            return Err("ready_timeout_s must be at least 1".into());
        }
        if self.warm_pool > 0 && !self.shared_workspaces {
            return Err("warm_pool needs shared_workspaces = true: a sandbox that mounts its session's workspace alone is started for its claim, so none can wait in a pool (and shared workspaces let a shell reach other sessions' files: see the README)".into());
        }
        if self.context.is_some() && self.kubeconfig.is_none() {
            return Err("context needs a kubeconfig file".into());
        }
        if let Some(i) = &self.instance
            && !crate::docker::cluster::is_label_value(i)
        {
            return Err(format!(
                "instance `{i}` is not a valid label value (at most 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit)"
            ));
        }
        Ok(())
    }
}

/// The plugins directory: hot loading and the admin API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginsConfig {
    /// Watch the plugins directory and load, reload and unload plugins as
    /// their files change.
    pub watch: bool,
    /// Quiet time after a plugin's last file event before it is loaded, ms.
    pub debounce_ms: u64,
    /// Full rescan of the directory every this many seconds (0: never); a
    /// safety net for file events the kernel dropped.
    pub rescan_interval_s: u64,
    /// Keep compiled components in `<data>/compile-cache`, so restarts and
    /// reloads of known components skip the compiler.
    pub compile_cache: bool,
    /// Largest component `PUT /plugins/{name}` accepts, MiB.
    pub max_upload_mb: u32,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        PluginsConfig {
            watch: true,
            debounce_ms: 25,
            rescan_interval_s: 30,
            compile_cache: true,
            max_upload_mb: 64,
        }
    }
}

/// Access control.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Bearer token of the admin routes (plugin upload and delete). Unset:
    /// those routes are refused. The environment variable
    /// `TOOLHOST_ADMIN_TOKEN` sets it too.
    pub admin_token: Option<String>,
    /// Bearer tokens of callers. When any is set (here or with the
    /// environment variable `TOOLHOST_TOKEN`), every route but `/health`
    /// needs `Authorization: Bearer <token>` (the admin token is accepted too).
    pub tokens: Vec<String>,
    /// Requests per second each token may make, sustained (0: no limit).
    /// Beyond it: 429 with `Retry-After`.
    pub rate_limit_per_s: u32,
    /// Requests a token may make at once above the sustained rate.
    pub rate_limit_burst: u32,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            admin_token: None,
            tokens: Vec::new(),
            rate_limit_per_s: 0,
            rate_limit_burst: 50,
        }
    }
}

impl AuthConfig {
    /// Whether callers must present a token.
    pub fn required(&self) -> bool {
        !self.tokens.is_empty()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on. Loopback by default.
    pub bind: SocketAddr,
    /// Largest request body, KiB.
    pub max_body_kb: u32,
    /// Time for a whole request body to arrive, ms (then 408): slow-loris
    /// bodies cannot hold connections for long.
    pub body_timeout_ms: u64,
    /// Record Prometheus metrics and serve `GET /metrics`.
    pub metrics: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 8001)),
            max_body_kb: 4096,
            body_timeout_ms: 120_000,
            metrics: true,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionsConfig {
    /// A session unused for this long is closed and its workspace deleted.
    pub idle_timeout_s: u64,
    /// How often idle sessions are looked for.
    pub reap_interval_s: u64,
    /// Most sessions open at once. A request that would open one more (a
    /// call without a session header makes a new session) gets 503 with
    /// `Retry-After` until some close or idle out.
    pub max_sessions: usize,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        SessionsConfig {
            idle_timeout_s: 3600,
            reap_interval_s: 60,
            max_sessions: 10_000,
        }
    }
}

/// The tool registry (`<data>/registry.db`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistryConfig {
    /// How often changed call statistics are written, ms: what a crash can
    /// lose at most. Statuses are written before they are acknowledged.
    pub flush_ms: u64,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig { flush_ms: 1000 }
    }
}

/// Tool requests and their builds (`POST /tools/request`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TasksConfig {
    /// Wall clock and CPU time of one build, seconds.
    pub build_timeout_s: u64,
    /// Hosts a task's `callback_url` may point at (`host`, `host:port`,
    /// `*.domain`); empty: callbacks are refused at submit.
    pub callback_allow: Vec<String>,
    /// Hosts a `github_deploy` may clone from over https; `file` allows
    /// file:// URLs (local repositories). Empty: git deploys are refused.
    pub git_allow: Vec<String>,
}

impl Default for TasksConfig {
    fn default() -> Self {
        TasksConfig {
            build_timeout_s: 600,
            callback_allow: Vec::new(),
            git_allow: Vec::new(),
        }
    }
}

/// The XAgent ToolServer surface.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct XAgentConfig {
    /// How long `/execute_tool` waits for a call, ms. A call still running
    /// then is answered 450 with its latest progress and a continuation
    /// (`next_calling`) that waits as long again; the call goes on meanwhile.
    pub patience_ms: u64,
}

impl Default for XAgentConfig {
    fn default() -> Self {
        XAgentConfig {
            patience_ms: 30_000,
        }
    }
}

/// The wasm engine: one per server, shared by every plugin.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Ceiling for any plugin's `memory_mb`; also the pool's slot size.
    pub max_memory_mb: u32,
    /// Component instances alive at once across all plugins (pool size).
    /// Each reserves one linear-memory slot of virtual address space.
    pub pool_instances: u32,
    /// Core instances (and memories) per component instance, on average; the
    /// pool holds `pool_instances * core_instances_per_component` of them.
    pub core_instances_per_component: u32,
    /// Virtual reservation per linear memory, MiB. 4096 (the default) lets
    /// wasmtime elide bounds checks using guard pages; lower it to shrink the
    /// pool's address-space reservation at some speed cost.
    pub memory_reservation_mb: u64,
    /// Pool slots decommitted together (batching madvise calls).
    pub decommit_batch_size: u32,
    /// Bytes of each linear memory (KiB) reset in place when an instance is
    /// freed, instead of being returned to the kernel: no madvise, no page
    /// faults on the next call. With `pagemap_scan` only pages actually touched
    /// are reset.
    pub memory_keep_resident_kb: u32,
    /// Likewise for tables, KiB.
    pub table_keep_resident_kb: u32,
    /// Use Linux's PAGEMAP_SCAN (kernel 6.7+) to find the pages to reset;
    /// ignored where unsupported.
    pub pagemap_scan: bool,
    /// Warm pool slots kept for reuse.
    pub max_unused_warm_slots: u32,
    /// Epoch tick: the granularity of timeouts, and how often a long call
    /// yields to other tasks.
    pub epoch_tick_ms: u64,
    /// Wasm stack per call, KiB.
    pub max_wasm_stack_kb: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_memory_mb: 512,
            pool_instances: 256,
            core_instances_per_component: 8,
            memory_reservation_mb: 4096,
            decommit_batch_size: 16,
            memory_keep_resident_kb: 1024,
            table_keep_resident_kb: 64,
            pagemap_scan: true,
            max_unused_warm_slots: 100,
            epoch_tick_ms: 5,
            max_wasm_stack_kb: 1024,
        }
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
        let e = &self.engine;
        anyhow::ensure!(
            e.pool_instances >= 1,
            "engine.pool_instances must be at least 1"
        );
        anyhow::ensure!(
            e.core_instances_per_component >= 1,
            "engine.core_instances_per_component must be at least 1"
        );
        anyhow::ensure!(
            e.epoch_tick_ms >= 1,
            "engine.epoch_tick_ms must be at least 1"
        );
        anyhow::ensure!(
            e.max_memory_mb >= 1,
            "engine.max_memory_mb must be at least 1"
        );
        anyhow::ensure!(
            u64::from(e.max_memory_mb) <= e.memory_reservation_mb,
            "engine.max_memory_mb ({}) cannot exceed engine.memory_reservation_mb ({})",
            e.max_memory_mb,
            e.memory_reservation_mb
        );
        crate::wasm::manifest::check_limits(&self.limits, e.max_memory_mb)
            .map_err(|m| anyhow::anyhow!("[limits]: {m}"))?;
        anyhow::ensure!(
            self.server.body_timeout_ms >= 100,
            "server.body_timeout_ms must be at least 100"
        );
        anyhow::ensure!(
            self.plugins.max_upload_mb >= 1,
            "plugins.max_upload_mb must be at least 1"
        );
        if let Some(token) = &self.auth.admin_token {
            anyhow::ensure!(
                token.len() >= 16,
                "auth.admin_token must be at least 16 characters"
            );
        }
        for token in &self.auth.tokens {
            anyhow::ensure!(
                token.len() >= 16 && !token.chars().any(char::is_whitespace),
                "every auth token must be at least 16 characters, without spaces"
            );
        }
        anyhow::ensure!(
            self.auth.rate_limit_per_s == 0 || self.auth.rate_limit_burst >= 1,
            "auth.rate_limit_burst must be at least 1 when auth.rate_limit_per_s is set"
        );
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
