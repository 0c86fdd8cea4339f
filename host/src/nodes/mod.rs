//! The Docker backend: heavy tools (shell, notebook, browser) run in
//! containers ("nodes") managed through bollard, registered in the same
//! catalog and called through the same dispatch as wasm tools.
//!
//! - A toolkit is a folder `<plugins>/<name>/` with `<name>.toml` (see
//!   [`manifest`]) and its in-container driver (see [`node`]).
//! - Nodes are per session and toolkit, created lazily on the session's first
//!   call to the toolkit: a session that only uses wasm tools costs no
//!   container. The session workspace is bind-mounted at /workspace, so wasm
//!   file tools and nodes see the same files.
//! - `hot` toolkits keep `hot_pool` nodes started (on a spare workspace
//!   directory that is renamed into the session's place when handed out);
//!   `cold` ones start on demand. Idle nodes, nodes of closed sessions and dead
//!   nodes are removed by a monitor; a session whose node died gets a fresh one
//!   with a note that its state was lost. Containers are labelled with this
//!   server's scope (its data directory), and leftovers of a previous run are
//!   removed at start-up.
//! - No engine: the toolkits are still listed, calls fail with
//!   `backend_unavailable` (503) until the engine answers again.
//! - Several engines (`[[docker.engines]]`) serve as one pool: placement by
//!   free capacity, session affinity, health, drain, and a node lost with
//!   its engine answered `node_lost` (see [`engines`]).
//!
//! Files, by responsibility: `registry` (the backend contract: claim, load,
//! reload and remove toolkit folders), this file (a session's node: find,
//! make room, discard), `containers` (create, start, remove), `pool` (the hot
//! pool), `reaper` (start-up, the monitor, session close, shutdown), `health`
//! (whether a toolkit's nodes can be created), `engine` (one connection),
//! `engines` (the pool of engines: placement, affinity, health, drain),
//! `node` (the driver over exec stdio), `toolkit` (the call path).

mod build;
pub mod confirm;
mod containers;
pub mod docker;
pub mod health;
pub mod kubernetes;
pub mod manifest;
mod node;
mod node_error;
mod pool;
mod reaper;
mod registry;
mod service;
pub mod stdio;

pub use containers::Allocation;
pub use service::QuickAck;
mod toolkit;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sessions::{Session, Sessions};
use crate::tool::CallError;
use containers::missing_image;
use health::Health;
pub use health::ToolkitHealth;
use manifest::LoadedManifest;
pub use node::{Node, NodeError};
pub use toolkit::DockerToolkit;

/// Label on every node container; its value is the server's scope.
pub const SCOPE_LABEL: &str = "toolhost.scope";
/// Label on every node container; its value is this process's run id:
/// start-up removes the scope's containers of earlier runs only (the
/// server answers, and makes nodes, while that sweep runs).
const RUN_LABEL: &str = "toolhost.run";
const TOOLKIT_LABEL: &str = "toolhost.toolkit";
const SESSION_LABEL: &str = "toolhost.session";
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

pub struct DockerBackend {
    /// This backend, for the toolkits it makes (they call back into it).
    me: std::sync::Weak<DockerBackend>,
    /// The engines nodes run on (one unless `[[docker.engines]]` lists more).
    engines: docker::engines::Engines,
    scope: String,
    /// This process's run id ([`RUN_LABEL`]).
    run: String,
    pool_root: PathBuf,
    sessions: Arc<Sessions>,
    specs: Mutex<HashMap<String, Arc<LoadedManifest>>>,
    slots: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<Slot>>>>,
    pools: Mutex<HashMap<String, Vec<Pooled>>>,
    refilling: Mutex<HashSet<String>>,
    /// Containers whose removal failed (the engine was down): retried by the
    /// monitor until they are gone.
    graveyard: Mutex<HashSet<String>>,
    /// Set by [`DockerBackend::shutdown`]: no new node may appear after it.
    closing: std::sync::atomic::AtomicBool,
    /// Node creations in progress (shutdown waits for them).
    creating: std::sync::atomic::AtomicUsize,
    /// Containers removed since start (for the metrics).
    removed: std::sync::atomic::AtomicU64,
    /// One build at a time per built image tag.
    builds: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Whether each toolkit's nodes can be created now.
    health: Health,
    /// `[kubernetes]`: nodes are agent-sandbox claims on this cluster
    /// instead of containers on the engines (see [`cluster`]).
    cluster: std::sync::OnceLock<Arc<kubernetes::Cluster>>,
    /// A cluster node's claim -> its pod.
    claims: Mutex<HashMap<String, String>>,
    /// The cluster's leftovers were swept.
    swept: std::sync::atomic::AtomicBool,
}

/// Label value naming the server that owns a container: a hash of its data
/// directory, so two servers on one engine never touch each other's nodes.
fn scope_of(data: &Path) -> String {
    let path = std::fs::canonicalize(data).unwrap_or_else(|_| data.to_owned());
    crate::wasm::loader::content_hash(path.to_string_lossy().as_bytes())[..16].to_owned()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl DockerBackend {
    /// A backend on the one local engine, with no allocation limit.
    pub fn new(data: &Path, sessions: Arc<Sessions>) -> Arc<Self> {
        Self::on(data, sessions, docker::engines::Engines::local())
    }

    /// A backend on the engines of `config` (`[docker]`), or why they are
    /// not right.
    pub fn with_config(
        data: &Path,
        sessions: Arc<Sessions>,
        config: &docker::config::DockerConfig,
    ) -> Result<Arc<Self>, String> {
        Ok(Self::on(
            data,
            sessions,
            docker::engines::Engines::new(config)?,
        ))
    }

    fn on(data: &Path, sessions: Arc<Sessions>, engines: docker::engines::Engines) -> Arc<Self> {
        Arc::new_cyclic(|me| DockerBackend {
            me: me.clone(),
            engines,
            scope: scope_of(data),
            run: uuid::Uuid::new_v4().simple().to_string(),
            pool_root: data.join("node-pool"),
            sessions,
            specs: Mutex::default(),
            slots: Mutex::default(),
            pools: Mutex::default(),
            refilling: Mutex::default(),
            graveyard: Mutex::default(),
            closing: Default::default(),
            creating: Default::default(),
            removed: Default::default(),
            builds: Mutex::default(),
            health: Health::default(),
            cluster: std::sync::OnceLock::new(),
            claims: Mutex::default(),
            swept: Default::default(),
        })
    }

    /// Take nodes from `cluster` from now on (set once, at start-up, before
    /// the first call).
    pub fn use_cluster(&self, cluster: Arc<kubernetes::Cluster>) {
        let _ = self.cluster.set(cluster);
    }

    /// The label value naming this server's nodes.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The cluster nodes come from, if any.
    pub(super) fn cluster(&self) -> Option<&Arc<kubernetes::Cluster>> {
        self.cluster.get()
    }

    /// Whether each registered toolkit can make nodes now, sorted by name.
    pub fn health(&self) -> Vec<ToolkitHealth> {
        let mut names: Vec<String> = lock(&self.specs).keys().cloned().collect();
        names.sort();
        names.iter().map(|n| self.health.of(n)).collect()
    }

    /// How many nodes serve sessions, wait in the pools, and were removed.
    pub fn census(&self) -> crate::metrics::NodeCensus {
        let running = lock(&self.slots)
            .values()
            // A slot locked by a call in flight has its node.
            .filter(|slot| slot.try_lock().map_or(true, |s| s.node.is_some()))
            .count() as u64;
        let pooled = lock(&self.pools).values().map(|p| p.len() as u64).sum();
        crate::metrics::NodeCensus {
            running,
            pooled,
            removed: self.removed.load(std::sync::atomic::Ordering::Relaxed),
            engines: self
                .engines()
                .into_iter()
                .map(|e| crate::metrics::EngineCensus {
                    up: e.health == "up",
                    drained: e.drained,
                    nodes: e.nodes as u64,
                    engine: e.name,
                })
                .collect(),
            toolkits: self
                .health()
                .into_iter()
                .map(|h| crate::metrics::ToolkitCensus {
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
        *lock(&self.engines.member(0).allocation) = allocation;
        self
    }

    /// Each engine: health, drain, capacity, nodes and sessions on it.
    pub fn engines(&self) -> Vec<docker::engines::EngineView> {
        self.engines.views()
    }

    /// Drain engine `name` (no new session goes there; those on it carry
    /// on), or undo it; `None` when there is no such engine.
    pub fn drain(&self, name: &str, drained: bool) -> Option<docker::engines::EngineView> {
        self.engines.drain(name, drained)
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
        let node = match self.take_pooled(spec, session, engine).await {
            Some(node) => node,
            None => {
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

    /// The engine `session`'s node of `spec` goes to; a failure is
    /// recorded in the toolkit's health.
    pub(super) async fn engine_for(
        &self,
        session: &str,
        spec: &LoadedManifest,
    ) -> Result<usize, CallError> {
        // The cluster places its sandboxes itself.
        if self.cluster().is_some() {
            return Ok(0);
        }
        let d = &spec.manifest.docker;
        let image = d.build.is_none().then_some(d.image.as_str());
        self.engines
            .engine_for(
                session,
                image,
                d.cpus,
                u64::from(d.memory_mb),
                spec.service_port().is_some(),
            )
            .await
            .inspect_err(|e| {
                self.health
                    .failed(&spec.name, health::Cause::Engine, &e.to_string())
            })
    }

    /// Whether what `node` ran on is gone with it: then which (its Docker
    /// engine, marked down with its other nodes severed; or its Kubernetes
    /// pod), as "its Docker engine `a`".
    pub(super) async fn lost_engine(&self, node: &Node) -> Option<String> {
        if let Some(cluster) = self.cluster() {
            let pod = lock(&self.claims).get(&node.container).cloned()?;
            return cluster
                .lost(&pod)
                .await
                .map(|why| format!("its Kubernetes sandbox ({why})"));
        }
        let i = self.engines.home_of(&node.container);
        (!self.engines.answers(i).await)
            .then(|| format!("its Docker engine `{}`", self.engines.member(i).name))
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

impl crate::sessions::SessionResources for DockerBackend {
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
