//! The node backend: heavy tools (shell, notebook, browser) and services
//! run in container-like nodes, registered in the same catalog and called
//! through the same dispatch as wasm tools. Where nodes come from is a
//! [`provider::NodeProvider`]: Docker engines ([`docker`]) or a Kubernetes
//! cluster through agent-sandbox ([`kubernetes`]), peers chosen by the
//! composition root; nothing here names either.
//!
//! - A toolkit is a folder `<plugins>/<name>/` with `<name>.toml` (see
//!   [`manifest`]) and its in-node driver (see [`node`]).
//! - Nodes are per session and toolkit, created lazily on the session's first
//!   call to the toolkit: a session that only uses wasm tools costs no
//!   node. The session workspace is mounted at /workspace, so wasm file
//!   tools and nodes see the same files.
//! - `hot` toolkits keep `hot_pool` nodes started (on a spare workspace
//!   directory that is renamed into the session's place when handed out),
//!   where the provider leaves pooling to the backend; `cold` ones start on
//!   demand. Idle nodes, nodes of closed sessions and dead nodes are removed
//!   by a monitor; a session whose node died gets a fresh one with a note
//!   that its state was lost; leftovers of a previous run are removed by the
//!   provider.
//! - Nothing to run nodes on: the toolkits are still listed, calls fail with
//!   `backend_unavailable` (503) until it answers again; a node lost with
//!   its engine or pod is answered `node_lost`.
//!
//! Files, by responsibility: `registry` (the backend contract: claim, load,
//! reload and remove toolkit folders), this file (a session's node: find,
//! make room, discard), `provider` (the seam to what runs nodes), `pool`
//! (the hot pool), `reaper` (start-up, the monitor, session close,
//! shutdown), `health` (whether a toolkit's nodes can be created), `node`
//! (the driver over stdio), `service` (a service node over HTTP),
//! `toolkit` (the call path), `confirm` (inputs confirmed before a call),
//! `stdio` (processes in containers, for MCP servers and build
//! environments).

pub mod confirm;
pub mod docker;
pub mod health;
pub mod kubernetes;
pub mod manifest;
pub mod metrics;
mod node;
mod node_error;
mod pool;
pub mod provider;
mod reaper;
mod registry;
mod service;
pub mod stdio;

pub use docker::{Allocation, SCOPE_LABEL};
pub use service::QuickAck;
mod toolkit;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sessions::{Session, Sessions};
use crate::tool::CallError;
use docker::DockerProvider;
use health::Health;
pub use health::ToolkitHealth;
use manifest::LoadedManifest;
pub use node::{Node, NodeError};
use provider::{Lifecycle, NodeProvider};
pub use toolkit::DockerToolkit;

/// Where the driver is mounted in a node.
const DRIVER_PATH: &str = "/opt/toolhost/driver.py";
/// Where a service toolkit's folder is mounted (read-only).
const SERVICE_FOLDER: &str = "/toolkit";
/// How long a driver may take to say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// How often the monitor looks at the nodes.
const MONITOR_EVERY: Duration = Duration::from_secs(2);

type Key = (String, String);

#[derive(Default)]
struct Slot {
    node: Option<Arc<Node>>,
    /// The toolkit version the node was made for: a node of an older one is
    /// replaced when it is idle (the toolkit was hot-reloaded).
    made_for: Option<Arc<LoadedManifest>>,
    /// Why the previous node of this slot went away, told to the next call.
    lost: Option<String>,
}

struct Pooled {
    node: Arc<Node>,
    dir: PathBuf,
    /// The engine it runs on.
    engine: usize,
}

pub struct NodeBackend {
    /// This backend, for the toolkits it makes (they call back into it).
    me: std::sync::Weak<NodeBackend>,
    /// Where nodes come from (Docker engines, or a Kubernetes cluster).
    provider: Arc<dyn NodeProvider>,
    /// The same provider when it is Docker's: MCP stdio servers and build
    /// environments run in its containers; `/engines` shows its engines.
    docker: Option<Arc<DockerProvider>>,
    pool_root: PathBuf,
    sessions: Arc<Sessions>,
    specs: Mutex<HashMap<String, Arc<LoadedManifest>>>,
    slots: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<Slot>>>>,
    pools: Mutex<HashMap<String, Vec<Pooled>>>,
    refilling: Mutex<HashSet<String>>,
    /// Closing, creations in progress, removals (shared with the provider).
    life: Arc<Lifecycle>,
    /// Whether each toolkit's nodes can be created now.
    health: Arc<Health>,
    /// Its series in `/metrics`, registered at the first scrape.
    series: std::sync::OnceLock<metrics::NodeSeries>,
    /// The trust policy images are judged by before a toolkit serves
    /// (unset: not checked).
    provenance: std::sync::OnceLock<Arc<crate::oci::Provenance>>,
}

/// Label value naming the server that owns a container: a hash of its data
/// directory, so two servers on one engine never touch each other's nodes.
pub fn scope_of(data: &Path) -> String {
    let path = std::fs::canonicalize(data).unwrap_or_else(|_| data.to_owned());
    crate::wasm::loader::content_hash(path.to_string_lossy().as_bytes())[..16].to_owned()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl NodeBackend {
    /// Whether its nodes' workspace writes reach this machine's kernel.
    pub fn writes_seen_here(&self) -> bool {
        self.provider.writes_seen_here()
    }

    /// The trust policy toolkits' images are judged by (set once, before
    /// toolkits load).
    pub fn set_provenance(&self, provenance: Arc<crate::oci::Provenance>) {
        let _ = self.provenance.set(provenance);
    }

    /// The trust policy's verdict on container image `image` (none when no
    /// policy was set), or why it is refused: for every image a node of
    /// this backend runs (toolkits, services, stdio MCP servers).
    pub async fn judge_image(&self, image: &str) -> Result<Option<crate::trust::Verdict>, String> {
        match self.provenance.get() {
            Some(p) => p.judge_image(image).await.map(Some),
            None => Ok(None),
        }
    }

    /// A backend on the one local engine, with no allocation limit.
    pub fn new(data: &Path, sessions: Arc<Sessions>) -> Arc<Self> {
        let alone = Arc::new(crate::registry::Replicas::alone());
        Self::on_engines(data, sessions, docker::engines::Engines::local(), alone)
    }

    /// A backend on the Docker engines of `config` (`[docker]`), or why
    /// they are not right. Its containers carry `replicas`' id; replicas
    /// sharing a registry share their label scope and remove what a gone
    /// one left.
    pub fn with_config(
        data: &Path,
        sessions: Arc<Sessions>,
        config: &docker::config::DockerConfig,
        replicas: Arc<crate::registry::Replicas>,
    ) -> Result<Arc<Self>, String> {
        Ok(Self::on_engines(
            data,
            sessions,
            docker::engines::Engines::new(config)?,
            replicas,
        ))
    }

    fn on_engines(
        data: &Path,
        sessions: Arc<Sessions>,
        engines: docker::engines::Engines,
        replicas: Arc<crate::registry::Replicas>,
    ) -> Arc<Self> {
        let (life, health) = (Arc::new(Lifecycle::default()), Arc::new(Health::default()));
        let scope = match replicas.shared_scope() {
            Some(shared) => shared.to_owned(),
            None => scope_of(data),
        };
        let docker = DockerProvider::new(engines, &scope, replicas, life.clone(), health.clone());
        Self::on(data, sessions, docker.clone(), Some(docker), life, health)
    }

    /// A backend whose nodes are agent-sandbox claims on `cluster`
    /// (`[kubernetes]`), connected with [`scope_of`] `data`.
    pub fn with_cluster(
        data: &Path,
        sessions: Arc<Sessions>,
        cluster: kubernetes::Cluster,
    ) -> Arc<Self> {
        let (life, health) = (Arc::new(Lifecycle::default()), Arc::new(Health::default()));
        let provider = Arc::new(kubernetes::provider::KubernetesProvider::new(
            cluster,
            life.clone(),
        ));
        Self::on(data, sessions, provider, None, life, health)
    }

    fn on(
        data: &Path,
        sessions: Arc<Sessions>,
        provider: Arc<dyn NodeProvider>,
        docker: Option<Arc<DockerProvider>>,
        life: Arc<Lifecycle>,
        health: Arc<Health>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| NodeBackend {
            me: me.clone(),
            provider,
            docker,
            pool_root: data.join("node-pool"),
            sessions,
            specs: Mutex::default(),
            slots: Mutex::default(),
            pools: Mutex::default(),
            refilling: Mutex::default(),
            life,
            health,
            series: std::sync::OnceLock::new(),
            provenance: std::sync::OnceLock::new(),
        })
    }

    /// The Docker provider, when nodes come from Docker engines.
    pub fn docker(&self) -> Option<&Arc<DockerProvider>> {
        self.docker.as_ref()
    }

    /// Whether each registered toolkit can make nodes now, sorted by name.
    pub fn health(&self) -> Vec<ToolkitHealth> {
        let mut names: Vec<String> = lock(&self.specs).keys().cloned().collect();
        names.sort();
        names.iter().map(|n| self.health.of(n)).collect()
    }

    /// How many nodes serve sessions, wait in the pools, and were removed.
    pub fn census(&self) -> metrics::NodeCensus {
        let running = lock(&self.slots)
            .values()
            // A slot locked by a call in flight has its node.
            .filter(|slot| slot.try_lock().map_or(true, |s| s.node.is_some()))
            .count() as u64;
        let pooled = lock(&self.pools).values().map(|p| p.len() as u64).sum();
        metrics::NodeCensus {
            running,
            pooled,
            removed: self.life.removed.load(std::sync::atomic::Ordering::Relaxed),
            engines: self
                .provider
                .census()
                .into_iter()
                .map(|e| metrics::EngineCensus {
                    up: e.up,
                    drained: e.drained,
                    nodes: e.nodes,
                    engine: e.name,
                })
                .collect(),
            toolkits: self
                .health()
                .into_iter()
                .map(|h| metrics::ToolkitCensus {
                    available: h.problem.is_none(),
                    toolkit: h.toolkit,
                    create_failures: h.create_failures,
                })
                .collect(),
        }
    }

    /// The same backend with the allocation limits of `allocation` (on
    /// its first engine).
    pub fn with_allocation(self: Arc<Self>, allocation: Allocation) -> Arc<Self> {
        if let Some(docker) = &self.docker {
            *lock(&docker.engines.member(0).allocation) = allocation;
        }
        self
    }

    /// Each Docker engine: health, drain, capacity, nodes and sessions on it.
    pub fn engines(&self) -> Vec<docker::engines::EngineView> {
        self.docker
            .as_ref()
            .map_or_else(Vec::new, |d| d.engines.views())
    }

    /// Drain Docker engine `name` (no new session goes there; those on it
    /// carry on), or undo it; `None` when there is no such engine.
    pub fn drain(&self, name: &str, drained: bool) -> Option<docker::engines::EngineView> {
        self.docker.as_ref()?.engines.drain(name, drained)
    }

    /// Containers of toolkit `name` running now: session nodes (a slot
    /// locked by a call has its node) and the hot pool.
    pub(super) fn running_nodes(&self, name: &str) -> usize {
        let sessions = lock(&self.slots)
            .iter()
            .filter(|((_, toolkit), _)| toolkit == name)
            .filter(|(_, slot)| slot.try_lock().map_or(true, |s| s.node.is_some()))
            .count();
        sessions + lock(&self.pools).get(name).map_or(0, Vec::len)
    }

    /// The nodes of version `spec` of its toolkit not in a call now (idle
    /// session nodes, the hot pool), for a look.
    pub(super) fn idle_nodes(&self, spec: &Arc<LoadedManifest>) -> Vec<Arc<Node>> {
        let name = &spec.name;
        let mut nodes: Vec<Arc<Node>> = lock(&self.slots)
            .iter()
            .filter(|((_, toolkit), _)| toolkit == name)
            .filter_map(|(_, slot)| {
                let slot = slot.try_lock().ok()?;
                let current = slot.made_for.as_ref().is_some_and(|m| Arc::ptr_eq(m, spec));
                slot.node.clone().filter(|_| current)
            })
            .collect();
        if let Some(pool) = lock(&self.pools).get(name) {
            nodes.extend(pool.iter().map(|p| p.node.clone()));
        }
        nodes
    }

    /// Remove the idle session nodes of toolkit `name`: the next call of
    /// each session starts a fresh one.
    pub(super) async fn discard_idle(&self, name: &str) {
        let slots: Vec<_> = lock(&self.slots)
            .iter()
            .filter(|((_, toolkit), _)| toolkit == name)
            .map(|(_, slot)| slot.clone())
            .collect();
        for slot in slots {
            let Ok(mut slot) = slot.try_lock() else {
                continue;
            };
            if let Some(node) = slot.node.take() {
                slot.lost = Some(format!("the {name} toolkit was degraded and restarted"));
                self.remove_container(&node.container).await;
            }
        }
    }

    fn slot(&self, key: &Key) -> Arc<tokio::sync::Mutex<Slot>> {
        lock(&self.slots).entry(key.clone()).or_default().clone()
    }

    /// The node of `session` for toolkit `spec`, created (or taken from the
    /// hot pool) if it has none; plus a note when an earlier node was lost.
    async fn node_for(
        self: &Arc<Self>,
        session: &Session,
        spec: &Arc<LoadedManifest>,
    ) -> Result<(Arc<Node>, Option<String>), CallError> {
        let key = (session.id().to_owned(), spec.name.clone());
        let slot = self.slot(&key);
        let mut slot = slot.lock().await;
        // A node made for the toolkit's previous version (hot-reloaded) is
        // replaced once it is idle.
        let stale = slot
            .made_for
            .as_ref()
            .is_some_and(|m| !Arc::ptr_eq(m, spec))
            && slot.node.as_ref().is_some_and(|n| !n.is_busy());
        if stale && let Some(node) = slot.node.take() {
            tracing::info!(toolkit = %spec.name, container = %node.container, "replacing a node of the toolkit's previous version");
            slot.lost = Some(format!(
                "the {} toolkit was updated, so its node was replaced",
                spec.name
            ));
            self.remove_container(&node.container).await;
        }
        if let Some(node) = &slot.node
            && node.is_alive()
        {
            return Ok((node.clone(), None));
        }
        if let Some(node) = &slot.node {
            let id = node.container.clone();
            // Dead with its engine? Then the engine is marked down (its
            // other nodes severed) and this session placed afresh below.
            let note = match self.lost_engine(node).await {
                Some(place) => format!("the previous {} node was lost with {place}", spec.name),
                None => node.stopped_note(),
            };
            slot.lost = Some(note.clone());
            slot.node = None;
            self.remove_container(&id).await;
            // A service is restarted once; dead again, it is degraded.
            if spec.service_port().is_some() {
                self.health.died(&spec.name, &note);
            }
        }
        if let Some(reason) = self.health.is_degraded(&spec.name) {
            return Err(CallError::BackendUnavailable(format!(
                "the {} service is {reason}",
                spec.name
            )));
        }
        self.make_room(&key, spec).await?;
        let engine = self.engine_for(session.id(), spec).await?;
        // Recorded on the call's `node.acquire` span.
        let acquire = tracing::Span::current();
        let node = match self.take_pooled(spec, session, engine).await {
            Some(node) => {
                acquire.record("toolhost.node.source", "pool");
                node
            }
            None => {
                acquire.record("toolhost.node.source", "created");
                let workspace = session
                    .prepare_workspace()
                    .await
                    .map_err(|e| CallError::Internal(e.to_string()))?;
                self.create_node(spec, workspace, session.id(), engine)
                    .await?
            }
        };
        self.refill(spec);
        slot.node = Some(node.clone());
        slot.made_for = Some(spec.clone());
        let note = slot.lost.take().map(|why| {
            format!("note: {why}; this call ran on a fresh node, so earlier state (working directory, variables, processes) is gone; files in /workspace are kept")
        });
        Ok((node, note))
    }

    /// Keep the toolkit's session nodes under `max_containers`: evict the
    /// least recently used idle node of another session when at the cap.
    async fn make_room(&self, key: &Key, spec: &LoadedManifest) -> Result<(), CallError> {
        let cap = spec.manifest.docker.max_containers as usize;
        let others: Vec<(Key, Arc<tokio::sync::Mutex<Slot>>)> = lock(&self.slots)
            .iter()
            .filter(|(k, _)| k.1 == spec.name && *k != key)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut idle = Vec::new();
        let mut busy = 0;
        for (k, slot) in &others {
            match slot.try_lock() {
                Ok(guard) => match &guard.node {
                    Some(node) if node.is_busy() => busy += 1,
                    Some(node) => idle.push((node.idle_for(), k.clone(), slot.clone())),
                    None => {}
                },
                Err(_) => busy += 1,
            }
        }
        if idle.len() + busy < cap {
            return Ok(());
        }
        idle.sort_by_key(|(for_, _, _)| std::cmp::Reverse(*for_));
        let Some((_, (session, _), slot)) = idle.into_iter().next() else {
            return Err(CallError::Overloaded(format!(
                "all {cap} {} nodes are busy; retry later",
                spec.name
            )));
        };
        let mut guard = slot.lock().await;
        if let Some(node) = guard.node.take() {
            tracing::info!(toolkit = %spec.name, session, container = %node.container, cap, "evicting the least recently used node");
            guard.lost = Some(format!(
                "the previous {} node was removed to make room (at most {cap} at once; it was the least recently used)",
                spec.name
            ));
            self.remove_container(&node.container).await;
        }
        Ok(())
    }

    /// Where `session`'s node of `spec` goes (the provider's place).
    pub(super) async fn engine_for(
        &self,
        session: &str,
        spec: &LoadedManifest,
    ) -> Result<usize, CallError> {
        self.provider.place(session, spec).await
    }

    /// Whether what `node` ran on is gone with it: then which (its Docker
    /// engine, marked down with its other nodes severed; or its Kubernetes
    /// pod), as "its Docker engine `a`".
    pub(super) async fn lost_engine(&self, node: &Node) -> Option<String> {
        self.provider.lost(node).await
    }

    /// Create and start a node of `spec` with `workspace` at /workspace at
    /// the provider's `place`; the outcome is recorded in the toolkit's
    /// health.
    pub(super) async fn create_node(
        &self,
        spec: &Arc<LoadedManifest>,
        workspace: &Path,
        session: &str,
        place: usize,
    ) -> Result<Arc<Node>, CallError> {
        match self.provider.create(spec, workspace, session, place).await {
            Ok(node) => {
                self.health.created(&spec.name);
                Ok(node)
            }
            Err((cause, e)) => {
                if let Some(cause) = cause {
                    self.health.failed(&spec.name, cause, &e.to_string());
                }
                Err(e)
            }
        }
    }

    /// Remove node `id` (the provider retries later when it cannot now).
    pub(super) async fn remove_container(&self, id: &str) {
        self.provider.release(id).await
    }

    /// Forget `session`'s node of `toolkit` after it failed mid-call.
    async fn discard(&self, session: &str, toolkit: &str, node: &Arc<Node>, why: String) {
        let key = (session.to_owned(), toolkit.to_owned());
        let slot = self.slot(&key);
        let mut slot = slot.lock().await;
        // Only that node: a newer one may have replaced it meanwhile.
        if slot.node.as_ref().is_some_and(|n| Arc::ptr_eq(n, node)) {
            slot.node = None;
            slot.lost = Some(why);
        }
        drop(slot);
        self.remove_container(&node.container).await;
    }
}

impl crate::sessions::SessionResources for NodeBackend {
    fn release_session(
        &self,
        id: &str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        let id = id.to_owned();
        Box::pin(async move { self.close_session(&id).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_differ_by_data_directory() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        assert_ne!(scope_of(a.path()), scope_of(b.path()));
        assert_eq!(scope_of(a.path()), scope_of(a.path()));
    }
}
