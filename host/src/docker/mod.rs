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

mod engine;
pub mod health;
pub mod manifest;
mod node;
mod registry;
mod toolkit;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};

use crate::sessions::{Session, Sessions};
use crate::tool::CallError;
pub use health::ToolkitHealth;
use health::{Cause, Health};
use manifest::LoadedManifest;
pub use node::{Node, NodeError};
pub use toolkit::DockerToolkit;

/// Label on every node container; its value is the server's scope.
pub const SCOPE_LABEL: &str = "toolhost.scope";
const TOOLKIT_LABEL: &str = "toolhost.toolkit";
const SESSION_LABEL: &str = "toolhost.session";
/// Where the driver is mounted in a node.
const DRIVER_PATH: &str = "/opt/toolhost/driver.py";
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
}

pub struct DockerBackend {
    /// This backend, for the toolkits it makes (they call back into it).
    me: std::sync::Weak<DockerBackend>,
    engine: engine::Engine,
    scope: String,
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
    /// Whether each toolkit's nodes can be created now.
    health: Health,
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
    pub fn new(data: &Path, sessions: Arc<Sessions>) -> Arc<Self> {
        Arc::new_cyclic(|me| DockerBackend {
            me: me.clone(),
            engine: engine::Engine::default(),
            scope: scope_of(data),
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
            health: Health::default(),
        })
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

    /// Start-up: remove this scope's leftover containers, fill the hot pools,
    /// and watch the nodes. Works (and retries later) without an engine.
    pub fn start(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            if this.engine.get().await.is_ok() {
                this.remove_orphans().await;
            }
            let weak = Arc::downgrade(&this);
            drop(this);
            let mut tick = tokio::time::interval(MONITOR_EVERY);
            loop {
                tick.tick().await;
                let Some(this) = weak.upgrade() else { return };
                this.monitor().await;
            }
        })
    }

    async fn docker(&self) -> Result<bollard::Docker, CallError> {
        self.engine
            .get()
            .await
            .map_err(CallError::BackendUnavailable)
    }

    /// Map an engine error; a lost connection is forgotten so the next call reconnects.
    async fn engine_error(
        &self,
        what: &str,
        e: bollard::errors::Error,
    ) -> (Option<Cause>, CallError) {
        if engine::is_connection_error(&e) {
            self.engine.reset().await;
            return (
                Some(Cause::Engine),
                CallError::BackendUnavailable(format!(
                    "the Docker engine failed while {what}: {e}"
                )),
            );
        }
        (
            Some(Cause::Create),
            CallError::BackendUnavailable(format!("Docker refused {what}: {e}")),
        )
    }

    /// The monitor's look at each toolkit: is the engine up and its image
    /// there? Recorded in the toolkits' health (see [`health`]).
    async fn check_health(&self) {
        let specs: Vec<(String, String)> = lock(&self.specs)
            .values()
            .map(|s| (s.name.clone(), s.manifest.docker.image.clone()))
            .collect();
        let docker = match self.engine.get().await {
            Ok(docker) => docker,
            Err(e) => {
                for (name, _) in &specs {
                    self.health.found(name, Cause::Engine, &e);
                }
                return;
            }
        };
        for (name, image) in specs {
            match docker.inspect_image(&image).await {
                Ok(_) => self.health.engine_and_image_ok(&name),
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => self
                    .health
                    .found(&name, Cause::Image, &missing_image(&image).to_string()),
                Err(e) => {
                    tracing::debug!(toolkit = %name, error = %e, "cannot inspect the node image")
                }
            }
        }
    }

    async fn remove_orphans(&self) {
        let Ok(docker) = self.engine.get().await else {
            return;
        };
        let filters: HashMap<String, Vec<String>> = [(
            "label".to_owned(),
            vec![format!("{SCOPE_LABEL}={}", self.scope)],
        )]
        .into();
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        match docker.list_containers(Some(options)).await {
            Ok(list) => {
                let ids: Vec<String> = list.into_iter().filter_map(|c| c.id).collect();
                for id in &ids {
                    self.remove_container(id).await;
                }
                if !ids.is_empty() {
                    tracing::info!(
                        count = ids.len(),
                        "removed node containers left by a previous run"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot list leftover node containers"),
        }
    }

    /// Remove container `id`; when the engine cannot do it now, remember it
    /// and let the monitor try again.
    async fn remove_container(&self, id: &str) {
        let Ok(docker) = self.engine.get().await else {
            lock(&self.graveyard).insert(id.to_owned());
            return;
        };
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        match docker.remove_container(id, Some(options)).await {
            Ok(()) => {
                lock(&self.graveyard).remove(id);
                self.removed
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {
                lock(&self.graveyard).remove(id);
            }
            Err(e) => {
                tracing::debug!(container = id, error = %e, "could not remove a node container; retrying later");
                lock(&self.graveyard).insert(id.to_owned());
            }
        }
    }

    fn is_closing(&self) -> bool {
        self.closing.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Create and start a node of `spec` with `workspace` at /workspace; the
    /// outcome is recorded in the toolkit's health.
    async fn create_node(
        &self,
        spec: &LoadedManifest,
        workspace: &Path,
        session: &str,
    ) -> Result<Arc<Node>, CallError> {
        match self.start_node(spec, workspace, session).await {
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

    /// [`Self::create_node`]'s work; an error says what stood in the way
    /// (none when the server is shutting down).
    async fn start_node(
        &self,
        spec: &LoadedManifest,
        workspace: &Path,
        session: &str,
    ) -> Result<Arc<Node>, (Option<Cause>, CallError)> {
        use std::sync::atomic::Ordering;
        self.creating.fetch_add(1, Ordering::AcqRel);
        struct Done<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let _done = Done(&self.creating);
        let closing = || {
            (
                None,
                CallError::BackendUnavailable("the server is shutting down".into()),
            )
        };
        if self.is_closing() {
            return Err(closing());
        }
        let docker = self.docker().await.map_err(|e| (Some(Cause::Engine), e))?;
        let d = &spec.manifest.docker;
        let labels: HashMap<String, String> = [
            (SCOPE_LABEL.to_owned(), self.scope.clone()),
            (TOOLKIT_LABEL.to_owned(), spec.name.clone()),
            (SESSION_LABEL.to_owned(), session.to_owned()),
        ]
        .into();
        let memory = i64::from(d.memory_mb) << 20;
        let body = ContainerCreateBody {
            image: Some(d.image.clone()),
            cmd: Some(vec!["sleep".into(), "infinity".into()]),
            labels: Some(labels),
            working_dir: Some("/workspace".into()),
            host_config: Some(HostConfig {
                init: Some(true),
                network_mode: Some(d.network.mode().into()),
                memory: Some(memory),
                memory_swap: Some(memory),
                nano_cpus: Some((d.cpus * 1e9) as i64),
                pids_limit: Some(i64::from(d.pids)),
                cap_drop: Some(vec!["ALL".into()]),
                security_opt: Some(vec!["no-new-privileges".into()]),
                binds: Some(vec![
                    format!("{}:/workspace:rw", workspace.display()),
                    format!("{}:{DRIVER_PATH}:ro", spec.driver.display()),
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let name = format!(
            "toolhost-{}-{}",
            spec.name,
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let created = match docker.create_container(Some(options), body).await {
            Ok(c) => c,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {
                return Err((Some(Cause::Image), missing_image(&d.image)));
            }
            Err(e) => return Err(self.engine_error("creating a node", e).await),
        };
        if let Err(e) = docker.start_container(&created.id, None).await {
            self.remove_container(&created.id).await;
            return Err(self.engine_error("starting a node", e).await);
        }
        let cmd = vec!["python3".into(), "-u".into(), DRIVER_PATH.into()];
        match Node::attach(
            &docker,
            &created.id,
            &spec.name,
            cmd,
            d.user.as_deref(),
            READY_WITHIN,
        )
        .await
        {
            Ok(node) if self.is_closing() => {
                // Shutdown began while this node started: it must not outlive us.
                drop(node);
                self.remove_container(&created.id).await;
                Err(closing())
            }
            Ok(node) => {
                tracing::info!(toolkit = %spec.name, session, container = %name, "node started");
                Ok(Arc::new(node))
            }
            Err(e) => {
                self.remove_container(&created.id).await;
                Err((
                    Some(Cause::Create),
                    CallError::BackendUnavailable(format!(
                        "the {} node's driver did not start: {e}",
                        spec.name
                    )),
                ))
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
            slot.lost = Some(node.stopped_note());
            slot.node = None;
            self.remove_container(&id).await;
        }
        self.make_room(&key, spec).await?;
        let node = match self.take_pooled(spec, session) {
            Some(node) => node,
            None => {
                let workspace = session
                    .workspace()
                    .map_err(|e| CallError::Internal(e.to_string()))?;
                self.create_node(spec, workspace, session.id()).await?
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

    /// A started node from the hot pool, its workspace moved into the
    /// session's place (the bind mount follows the renamed directory).
    fn take_pooled(&self, spec: &LoadedManifest, session: &Session) -> Option<Arc<Node>> {
        loop {
            let pooled = lock(&self.pools).get_mut(&spec.name)?.pop()?;
            let failure = if pooled.node.is_alive() {
                match adopt_workspace(&pooled.dir, session.workspace_path()) {
                    Ok(()) => return Some(pooled.node),
                    Err(e) => Some(e),
                }
            } else {
                None
            };
            // Not usable: its container goes (the monitor removes what is in
            // the graveyard), and so does its spare workspace.
            lock(&self.graveyard).insert(pooled.node.container.clone());
            let _ = std::fs::remove_dir_all(&pooled.dir);
            if let Some(e) = failure {
                tracing::warn!(error = %e, "cannot hand a pooled node its session workspace");
                return None;
            }
        }
    }

    /// Top up the hot pool of `spec` in the background.
    fn refill(self: &Arc<Self>, spec: &Arc<LoadedManifest>) {
        let d = &spec.manifest.docker;
        if d.scheduling != manifest::Scheduling::Hot || d.hot_pool == 0 {
            return;
        }
        if !lock(&self.refilling).insert(spec.name.clone()) {
            return;
        }
        let (this, spec) = (self.clone(), spec.clone());
        tokio::spawn(async move {
            loop {
                let have = lock(&this.pools).get(&spec.name).map_or(0, Vec::len);
                if have >= spec.manifest.docker.hot_pool as usize {
                    break;
                }
                let dir = this
                    .pool_root
                    .join(uuid::Uuid::new_v4().simple().to_string());
                if let Err(e) = std::fs::create_dir_all(&dir) {
                    tracing::warn!(error = %e, "cannot create a pool workspace");
                    break;
                }
                match this.create_node(&spec, &dir, "pool").await {
                    Ok(node) => lock(&this.pools)
                        .entry(spec.name.clone())
                        .or_default()
                        .push(Pooled { node, dir }),
                    Err(e) => {
                        let _ = std::fs::remove_dir_all(&dir);
                        tracing::debug!(toolkit = %spec.name, error = %e, "cannot fill the hot pool now");
                        break;
                    }
                }
            }
            lock(&this.refilling).remove(&spec.name);
        });
    }

    /// Remove nodes of closed sessions, idle nodes and dead nodes; keep the
    /// hot pools full.
    async fn monitor(self: &Arc<Self>) {
        self.check_health().await;
        let slots: Vec<(Key, Arc<tokio::sync::Mutex<Slot>>)> = lock(&self.slots)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for ((session, toolkit), slot) in slots {
            let Ok(mut guard) = slot.try_lock() else {
                continue;
            };
            let current = lock(&self.specs).get(&toolkit).cloned();
            let idle_limit = current
                .as_ref()
                .map(|s| Duration::from_secs(s.manifest.docker.idle_timeout_s));
            let closed = self.sessions.get(&session).is_none();
            // Made for a version of the toolkit that is no longer served (a
            // hot reload or removal) and not running a call: drained.
            let outdated = match (&current, &guard.made_for) {
                (None, _) => true,
                (Some(now), Some(made)) => !Arc::ptr_eq(now, made),
                (Some(_), None) => false,
            };
            if let Some(node) = &guard.node {
                let idle = idle_limit.is_some_and(|l| node.idle_for() > l);
                let outdated = outdated && !node.is_busy();
                if closed || idle || outdated || !node.is_alive() {
                    let why = if closed {
                        "its session closed"
                    } else if idle {
                        "idle"
                    } else if outdated {
                        "its toolkit changed or is gone"
                    } else {
                        "dead"
                    };
                    tracing::info!(toolkit, session, container = %node.container, "removing node ({why})");
                    let id = node.container.clone();
                    if !node.is_alive() && !closed {
                        guard.lost = Some(node.stopped_note());
                    }
                    guard.node = None;
                    self.remove_container(&id).await;
                }
            }
            if guard.node.is_none() && (closed || guard.lost.is_none()) {
                drop(guard);
                lock(&self.slots).remove(&(session, toolkit));
            }
        }
        let dead: Vec<Pooled> = {
            let mut pools = lock(&self.pools);
            let mut dead = Vec::new();
            for pool in pools.values_mut() {
                let (alive, gone): (Vec<Pooled>, Vec<Pooled>) =
                    pool.drain(..).partition(|p| p.node.is_alive());
                *pool = alive;
                dead.extend(gone);
            }
            dead
        };
        for p in dead {
            self.remove_container(&p.node.container).await;
            let _ = std::fs::remove_dir_all(&p.dir);
        }
        let graves: Vec<String> = lock(&self.graveyard).iter().cloned().collect();
        for id in graves {
            self.remove_container(&id).await;
        }
        let specs: Vec<Arc<LoadedManifest>> = lock(&self.specs).values().cloned().collect();
        for spec in specs {
            self.refill(&spec);
        }
    }

    /// Remove every node of `session` (its workspace is the sessions' business).
    pub async fn close_session(&self, session: &str) {
        let keys: Vec<Key> = lock(&self.slots)
            .keys()
            .filter(|(s, _)| s == session)
            .cloned()
            .collect();
        for key in keys {
            let slot = self.slot(&key);
            let node = slot.lock().await.node.take();
            if let Some(node) = node {
                self.remove_container(&node.container).await;
            }
            lock(&self.slots).remove(&key);
        }
    }

    /// Remove every node and pooled node (graceful shutdown).
    pub async fn shutdown(&self) {
        use std::sync::atomic::Ordering;
        self.closing.store(true, Ordering::Release);
        // Nodes being created now remove themselves when they see `closing`.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.creating.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let slots: Vec<Arc<tokio::sync::Mutex<Slot>>> =
            lock(&self.slots).drain().map(|(_, v)| v).collect();
        let mut ids: Vec<String> = Vec::new();
        for slot in slots {
            if let Some(node) = slot.lock().await.node.take() {
                ids.push(node.container.clone());
            }
        }
        let pooled: Vec<Pooled> = lock(&self.pools).drain().flat_map(|(_, v)| v).collect();
        for p in pooled {
            ids.push(p.node.container.clone());
            let _ = std::fs::remove_dir_all(&p.dir);
        }
        ids.extend(lock(&self.graveyard).iter().cloned());
        futures::future::join_all(ids.iter().map(|id| self.remove_container(id))).await;
        if !ids.is_empty() {
            tracing::info!(count = ids.len(), "removed node containers");
        }
    }
}

fn missing_image(image: &str) -> CallError {
    CallError::BackendUnavailable(format!(
        "the node image `{image}` is missing: build it with `make node-image`"
    ))
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

/// Move `pool_dir` into the place of a session workspace `target`: what the
/// session already has there moves into the pool directory first.
fn adopt_workspace(pool_dir: &Path, target: &Path) -> std::io::Result<()> {
    if target.is_dir() {
        for entry in std::fs::read_dir(target)? {
            let entry = entry?;
            std::fs::rename(entry.path(), pool_dir.join(entry.file_name()))?;
        }
        std::fs::remove_dir(target)?;
    } else if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::rename(pool_dir, target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_workspace_takes_the_sessions_place_and_keeps_its_files() {
        let root = tempfile::tempdir().unwrap();
        let pool = root.path().join("pool/a");
        let target = root.path().join("workspaces/s1");
        std::fs::create_dir_all(&pool).unwrap();
        std::fs::create_dir_all(target.join("sub")).unwrap();
        std::fs::write(target.join("sub/f.txt"), "x").unwrap();
        adopt_workspace(&pool, &target).unwrap();
        assert!(!pool.exists());
        assert_eq!(
            std::fs::read_to_string(target.join("sub/f.txt")).unwrap(),
            "x"
        );

        let pool2 = root.path().join("pool/b");
        std::fs::create_dir_all(&pool2).unwrap();
        let fresh = root.path().join("workspaces/s2");
        adopt_workspace(&pool2, &fresh).unwrap();
        assert!(fresh.is_dir());
    }

    #[test]
    fn scopes_differ_by_data_directory() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        assert_ne!(scope_of(a.path()), scope_of(b.path()));
        assert_eq!(scope_of(a.path()), scope_of(a.path()));
    }
}
