//! `[docker]`: the Docker engines of the node pool and the share of the host
//! that service containers may take.

use serde::{Deserialize, Serialize};

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
    /// `crate::nodes::engines`). Empty: the one engine the docker CLI
    /// would use (`DOCKER_HOST`, else the local socket).
    pub engines: Vec<DockerEngine>,
    /// A `docker save` archive of the node image, loaded into an engine
    /// that lacks an image it holds (engines that cannot pull).
    pub image_archive: Option<std::path::PathBuf>,
    /// GPUs each engine with a GPU runtime offers (one when unset;
    /// `[[docker.engines]]` may say its own).
    pub gpus: Option<u32>,
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
    /// GPUs this engine offers, when it has a GPU runtime.
    pub gpus: Option<u32>,
}

impl Default for DockerConfig {
    fn default() -> Self {
        DockerConfig {
            enabled: true,
            max_cpu_share: 1.0,
            max_memory_share: 0.8,
            engines: Vec::new(),
            image_archive: None,
            gpus: None,
        }
    }
}
