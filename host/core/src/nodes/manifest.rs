//! The manifest of a Docker toolkit: `<plugins>/<name>/<name>.toml`.
//!
//! ```toml
//! description = "A persistent bash shell per session."
//! [docker]
//! image = "toolhost-node:latest"
//! driver = "driver.py"          # beside the manifest; mounted read-only in the node
//! scheduling = "hot"            # "hot": a pre-started pool; "cold": started on demand
//! hot_pool = 2
//! max_containers = 32           # session nodes at once (LRU eviction beyond)
//! idle_timeout_s = 600          # a session's node unused this long is removed
//! network = "none"              # or "host"
//! memory_mb = 512
//! cpus = 1.0
//! pids = 256
//! call_timeout_s = 600          # hard ceiling of one call, host side
//! [[tools]]
//! name = "run"                  # also the driver op; the tool id is <toolkit>_<name>
//! description = "..."
//! [tools.input_schema]          # JSON Schema of the input, as TOML tables
//! type = "object"
//! ```
//!
//! A service toolkit (seed 004's `docker` runtime) has no driver: the
//! container's own process serves HTTP, and each tool is an endpoint of it.
//! Its folder is mounted read-only at `/toolkit`:
//!
//! ```toml
//! [docker]
//! image = "toolhost-node:latest"
//! command = ["python3", "/toolkit/service.py"]  # the image's own command when unset
//! internal_port = 8080          # what the service listens on, inside the container
//! health_path = "/health"       # 2xx = ready (within start_timeout_s)
//! start_timeout_s = 30
//! env = { LEVEL = "info" }
//! scheduling = "cold"           # hot | cold | stateless (a container per call)
//! [[tools]]
//! name = "compress"
//! endpoint_path = "/compress"   # the input is POSTed there as JSON
//! http_method = "POST"
//! ```
//!
//! Unknown keys are errors, as in wasm manifests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::confirm::{Confirm, ConfirmSpec};
use crate::tool::ToolDescriptor;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolkitManifest {
    #[serde(default)]
    pub description: String,
    /// What `GET /tools` files its tools under (else the toolkit's name).
    #[serde(default)]
    pub category: Option<String>,
    /// `[health]`: this toolkit's looks ([`crate::health::declared`]).
    #[serde(default)]
    pub health: Option<crate::health::declared::Declared>,
    /// `[fallback]`: a tool -> the tool ids tried when it cannot serve.
    #[serde(default)]
    pub fallback: crate::health::declared::Fallbacks,
    pub docker: NodeSpec,
    pub tools: Vec<ToolSpec>,
}

/// How a node of this toolkit is made and scheduled.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// The image; for a built toolkit, set from the folder's content
    /// (`toolhost-build-<name>:<hash>`).
    #[serde(default)]
    pub image: String,
    /// A Dockerfile of the folder to build the image from (the folder is
    /// the build context), instead of `image`.
    #[serde(default)]
    pub build: Option<PathBuf>,
    /// The in-container driver, relative to the manifest's folder (not for
    /// a service).
    #[serde(default)]
    pub driver: Option<PathBuf>,
    /// A service: the port its process serves HTTP on, inside the container.
    #[serde(default)]
    pub internal_port: Option<u16>,
    /// A service's command (the image's own when unset).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    #[serde(default = "default_health_path")]
    pub health_path: String,
    #[serde(default = "default_start_timeout")]
    pub start_timeout_s: u64,
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub scheduling: Scheduling,
    #[serde(default)]
    pub hot_pool: u32,
    /// Most session nodes of this toolkit at once; a new session beyond it
    /// takes the place of the least recently used idle one (whose session gets
    /// a fresh node, with a note, on its next call).
    #[serde(
        default = "default_max_containers",
        alias = "hot_max_containers",
        alias = "hot_tool_max_containers"
    )]
    pub max_containers: u32,
    #[serde(default = "default_idle")]
    pub idle_timeout_s: u64,
    #[serde(default)]
    pub network: Network,
    #[serde(default = "default_memory")]
    pub memory_mb: u32,
    #[serde(default = "default_cpus")]
    pub cpus: f64,
    /// Its nodes get GPUs (seed 004's `use_gpu`, `resource_limits.gpu`):
    /// `gpu_count` of them, -1 for all of an engine's ([`super::docker::gpu`]).
    #[serde(default, alias = "use_gpu")]
    pub gpu: bool,
    #[serde(default = "default_gpu_count")]
    pub gpu_count: i64,
    #[serde(default = "default_pids")]
    pub pids: u32,
    #[serde(default = "default_call_timeout")]
    pub call_timeout_s: u64,
    /// User the driver runs as (`uid:gid`); the image's default when unset.
    #[serde(default)]
    pub user: Option<String>,
}

fn default_health_path() -> String {
    "/health".into()
}
fn default_start_timeout() -> u64 {
    30
}
fn default_idle() -> u64 {
    600
}
fn default_max_containers() -> u32 {
    32
}
fn default_memory() -> u32 {
    512
}
fn default_cpus() -> f64 {
    1.0
}
fn default_gpu_count() -> i64 {
    -1
}
fn default_pids() -> u32 {
    256
}
fn default_call_timeout() -> u64 {
    600
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduling {
    /// Started on a session's first call, removed after `idle_timeout_s`.
    #[default]
    Cold,
    /// Like cold, but `hot_pool` nodes are kept started and handed to new sessions.
    Hot,
    /// A fresh container for every call, removed after it (services only).
    Stateless,
}

impl Scheduling {
    pub fn name(self) -> &'static str {
        match self {
            Scheduling::Cold => "cold",
            Scheduling::Hot => "hot",
            Scheduling::Stateless => "stateless",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    #[default]
    None,
    Host,
}

impl Network {
    pub fn mode(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Host => "host",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// The tool that continues this one when its result says
    /// `"finished": false` (e.g. shell `run` -> `read_output`).
    #[serde(default)]
    pub continue_with: Option<String>,
    /// A service's endpoint for this tool (default `/<name>`).
    #[serde(default)]
    pub endpoint_path: Option<String>,
    /// A service endpoint's method (default POST: the input as a JSON body;
    /// GET, HEAD and DELETE send it as the query).
    #[serde(default)]
    pub http_method: Option<String>,
    /// Inputs that need the caller's confirmation first ([`super::confirm`]).
    #[serde(default)]
    pub confirm: Option<ConfirmSpec>,
}

/// A toolkit manifest with its folder and its driver's absolute path (none
/// for a service).
#[derive(Debug, Clone)]
pub struct LoadedManifest {
    pub name: String,
    pub manifest: ToolkitManifest,
    pub folder: PathBuf,
    pub driver: Option<PathBuf>,
    /// The tools' confirmation rules, compiled, by tool name.
    pub confirms: BTreeMap<String, Confirm>,
}

impl LoadedManifest {
    /// A service's port, if this toolkit is one.
    pub fn service_port(&self) -> Option<u16> {
        self.manifest.docker.internal_port
    }

    /// Tool `name`'s endpoint: method and path.
    pub fn endpoint(&self, name: &str) -> Option<(String, String)> {
        let t = self.manifest.tools.iter().find(|t| t.name == name)?;
        Some((
            t.http_method
                .as_deref()
                .unwrap_or("POST")
                .to_ascii_uppercase(),
            t.endpoint_path
                .clone()
                .unwrap_or_else(|| format!("/{name}")),
        ))
    }

    pub fn descriptors(&self) -> Vec<ToolDescriptor> {
        self.manifest
            .tools
            .iter()
            .map(|t| ToolDescriptor {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
                output_schema: t.output_schema.clone(),
                continue_with: t.continue_with.clone(),
                hints: Default::default(),
            })
            .collect()
    }
}

/// Parse and check `text`, the manifest of toolkit `name` in folder `dir`.
pub fn parse(name: &str, dir: &Path, text: &str) -> Result<LoadedManifest, String> {
    let manifest: ToolkitManifest = toml::from_str(text).map_err(|e| e.message().to_owned())?;
    let d = &manifest.docker;
    match (&d.build, d.image.trim().is_empty()) {
        (None, true) => {
            return Err(
                "docker.image (or docker.build, a Dockerfile of the folder) is needed".into(),
            );
        }
        (Some(_), false) => {
            return Err(
                "docker.image and docker.build: name an image or build one, not both".into(),
            );
        }
        (Some(file), true) => {
            let plain = file.components().count() == 1
                && matches!(
                    file.components().next(),
                    Some(std::path::Component::Normal(_))
                );
            if !plain || !dir.join(file).is_file() {
                return Err(format!(
                    "docker.build: {} is not a file of the toolkit's folder",
                    file.display()
                ));
            }
        }
        (None, false) => {}
    }
    if !(16..=65536).contains(&d.memory_mb) {
        return Err(format!(
            "docker.memory_mb = {} is out of range (16..=65536)",
            d.memory_mb
        ));
    }
    if !(d.cpus > 0.0 && d.cpus <= 64.0) {
        return Err(format!("docker.cpus = {} is out of range (0..=64)", d.cpus));
    }
    if !(16..=1_000_000).contains(&d.pids) {
        return Err(format!("docker.pids = {} is out of range (16..)", d.pids));
    }
    if d.call_timeout_s == 0 || d.idle_timeout_s == 0 {
        return Err("docker.call_timeout_s and docker.idle_timeout_s must be positive".into());
    }
    if d.max_containers == 0 {
        return Err("docker.max_containers must be at least 1".into());
    }
    if d.hot_pool > 32 {
        return Err(format!("docker.hot_pool = {} is over 32", d.hot_pool));
    }
    let driver = match (&d.driver, d.internal_port) {
        (Some(_), Some(_)) => {
            return Err("docker.driver and docker.internal_port: a toolkit has a driver or is a service, not both".into());
        }
        (None, None) => {
            return Err(
                "docker.driver (a driver toolkit) or docker.internal_port (a service) is needed"
                    .into(),
            );
        }
        (Some(driver), None) => {
            if driver.is_absolute()
                || driver
                    .components()
                    .any(|c| c == std::path::Component::ParentDir)
            {
                return Err("docker.driver must be a path inside the toolkit's folder".into());
            }
            let driver = dir.join(driver);
            if !driver.is_file() {
                return Err(format!("the driver {} is missing", driver.display()));
            }
            if d.scheduling == Scheduling::Stateless {
                return Err(
                    "docker.scheduling = \"stateless\" is for services (internal_port)".into(),
                );
            }
            if d.gpu_count == 0 || d.gpu_count < -1 {
                return Err("docker.gpu_count must be a number of GPUs, or -1 for all".into());
            }
            Some(driver)
        }
        (None, Some(port)) => {
            if port == 0 {
                return Err("docker.internal_port must be a port (1..=65535)".into());
            }
            if !d.health_path.starts_with('/') {
                return Err("docker.health_path must start with `/`".into());
            }
            if d.start_timeout_s == 0 {
                return Err("docker.start_timeout_s must be positive".into());
            }
            if d.command.as_ref().is_some_and(Vec::is_empty) {
                return Err("docker.command is empty".into());
            }
            None
        }
    };
    for t in &manifest.tools {
        if let Some(path) = &t.endpoint_path
            && !path.starts_with('/')
        {
            return Err(format!(
                "tool `{}`: endpoint_path must start with `/`",
                t.name
            ));
        }
        if let Some(m) = &t.http_method
            && !matches!(
                m.to_ascii_uppercase().as_str(),
                "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD"
            )
        {
            return Err(format!(
                "tool `{}`: http_method `{m}` is not one of GET, POST, PUT, PATCH, DELETE, HEAD",
                t.name
            ));
        }
        if driver.is_some() && (t.endpoint_path.is_some() || t.http_method.is_some()) {
            return Err(format!(
                "tool `{}`: endpoint_path and http_method are for services (internal_port)",
                t.name
            ));
        }
    }
    if manifest.tools.is_empty() {
        return Err("the toolkit lists no [[tools]]".into());
    }
    for t in &manifest.tools {
        if let Some(next) = &t.continue_with
            && !manifest.tools.iter().any(|o| &o.name == next)
        {
            return Err(format!(
                "tool `{}`: continue_with names no tool of this toolkit: `{next}`",
                t.name
            ));
        }
    }
    let mut confirms = BTreeMap::new();
    for t in &manifest.tools {
        if let Some(spec) = &t.confirm {
            let rule = Confirm::new(spec.clone()).map_err(|e| format!("tool `{}`: {e}", t.name))?;
            confirms.insert(t.name.clone(), rule);
        }
    }
    Ok(LoadedManifest {
        name: name.to_owned(),
        manifest,
        folder: dir.to_owned(),
        driver,
        confirms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
description = "Shell."
[docker]
image = "toolhost-node:latest"
driver = "driver.py"
scheduling = "hot"
hot_pool = 2
[[tools]]
name = "run"
description = "Run a command."
[tools.input_schema]
type = "object"
required = ["command"]
[tools.input_schema.properties.command]
type = "string"
"#;

    #[test]
    fn parses_and_checks() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("driver.py"), "").unwrap();
        let m = parse("shell", dir.path(), GOOD).unwrap();
        assert_eq!(m.manifest.docker.scheduling, Scheduling::Hot);
        assert_eq!(m.manifest.docker.network, Network::None);
        assert_eq!(m.manifest.docker.memory_mb, 512);
        let tools = m.descriptors();
        assert_eq!(tools[0].input_schema["required"][0], "command");

        let bad = GOOD.replace("hot_pool = 2", "hot_pool = 2\nmemroy_mb = 5");
        assert!(
            parse("shell", dir.path(), &bad)
                .unwrap_err()
                .contains("unknown field")
        );
        let bad = GOOD.replace("hot_pool = 2", "memory_mb = 1");
        assert!(
            parse("shell", dir.path(), &bad)
                .unwrap_err()
                .contains("out of range")
        );
        let bad = GOOD.replace("driver.py", "../driver.py");
        assert!(parse("shell", dir.path(), &bad).is_err());
        let bad = GOOD.replace("driver.py", "missing.py");
        assert!(
            parse("shell", dir.path(), &bad)
                .unwrap_err()
                .contains("missing")
        );
    }

    #[test]
    fn services_have_a_port_and_endpoints_and_no_driver() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("driver.py"), "").unwrap();
        let service = r#"
[docker]
image = "img"
internal_port = 8080
scheduling = "stateless"
[[tools]]
name = "compress"
description = "c"
endpoint_path = "/v1/compress"
http_method = "put"
input_schema = { type = "object" }
[[tools]]
name = "probe"
description = "p"
input_schema = { type = "object" }
"#;
        let m = parse("svc", dir.path(), service).unwrap();
        assert_eq!(m.service_port(), Some(8080));
        assert!(m.driver.is_none());
        assert_eq!(m.manifest.docker.health_path, "/health");
        assert_eq!(
            m.endpoint("compress"),
            Some(("PUT".into(), "/v1/compress".into()))
        );
        assert_eq!(m.endpoint("probe"), Some(("POST".into(), "/probe".into())));
        for (edit, says) in [
            (
                service.replace(
                    "internal_port = 8080",
                    "internal_port = 8080\ndriver = \"driver.py\"",
                ),
                "not both",
            ),
            (service.replace("internal_port = 8080", ""), "is needed"),
            (
                service.replace("internal_port = 8080", "internal_port = 0"),
                "a port",
            ),
            (
                service.replace("\"/v1/compress\"", "\"v1\""),
                "must start with",
            ),
            (service.replace("\"put\"", "\"BREW\""), "not one of"),
            (
                service.replace(
                    "internal_port = 8080",
                    "internal_port = 1\nhealth_path = \"h\"",
                ),
                "health_path",
            ),
            (
                GOOD.replace("hot_pool = 2", "hot_pool = 2\nscheduling = \"stateless\"")
                    .replace("scheduling = \"hot\"\n", ""),
                "for services",
            ),
        ] {
            let err = parse("svc", dir.path(), &edit).unwrap_err();
            assert!(err.contains(says), "{says}: {err}");
        }
    }
}
