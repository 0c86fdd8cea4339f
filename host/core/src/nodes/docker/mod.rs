//! The Docker node provider: one or several Docker engines as one pool of
//! nodes (`[docker]`, `[[docker.engines]]`).
//!
//! Files, by responsibility: this file (the provider and its state),
//! `containers` (create, start, remove a container; the service
//! allocation), `build` (images built from a toolkit's folder), `watch`
//! (the monitor's look: engines up or down, leftovers, images), `engine`
//! (one connection), `engines` (the pool: affinity, health, drain),
//! `placement` (where a session's first node goes), `engine_images` (images
//! loaded from an archive), `config` (`[docker]`).

pub mod build;
pub mod config;
pub(crate) mod containers;
pub mod engine;
mod engine_images;
pub mod engines;
pub mod gpu;
mod placement;
pub mod stdio;
mod watch;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

pub use containers::Allocation;
use engines::Engines;

use super::health::{Cause, Health};
use super::manifest::LoadedManifest;
use super::node::Node;
use super::provider::{CreateError, Lifecycle, NodeProvider, PlaceCensus};
use crate::backend::BackendFuture;
use crate::tool::CallError;

/// Label on every node container; its value is the server's scope.
pub const SCOPE_LABEL: &str = "toolhost.scope";
/// Label on every node container; its value is this process's run id:
/// start-up removes the scope's containers of earlier runs only (the
/// server answers, and makes nodes, while that sweep runs).
pub(crate) const RUN_LABEL: &str = "toolhost.run";
pub(crate) const TOOLKIT_LABEL: &str = "toolhost.toolkit";
pub(crate) const SESSION_LABEL: &str = "toolhost.session";

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct DockerProvider {
    /// This provider, for the work it starts in the background.
    me: Weak<DockerProvider>,
    /// The engines nodes run on (one unless `[[docker.engines]]` lists more).
    pub engines: Engines,
    /// The label value naming this server's containers.
    scope: String,
    /// This process's run id ([`RUN_LABEL`]) and the replicas alive.
    run: String,
    replicas: Arc<crate::registry::Replicas>,
    /// When leftovers were last swept (replicas sweep what a gone one left).
    swept: Mutex<Option<std::time::Instant>>,
    life: Arc<Lifecycle>,
    health: Arc<Health>,
    /// Containers whose removal failed (the engine was down): retried by the
    /// monitor until they are gone.
    graveyard: Mutex<HashSet<String>>,
    /// One build at a time per built image tag and engine.
    builds: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl DockerProvider {
    /// A provider on `engines`, its containers labelled with `scope`.
    pub fn new(
        engines: Engines,
        scope: &str,
        replicas: Arc<crate::registry::Replicas>,
        life: Arc<Lifecycle>,
        health: Arc<Health>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| DockerProvider {
            me: me.clone(),
            engines,
            scope: scope.to_owned(),
            run: replicas.id().to_owned(),
            replicas,
            swept: Mutex::new(None),
            life,
            health,
            graveyard: Mutex::default(),
            builds: Mutex::default(),
        })
    }

    pub fn is_closing(&self) -> bool {
        self.life.is_closing()
    }
}

impl NodeProvider for DockerProvider {
    fn kind(&self) -> &'static str {
        "docker"
    }

    fn writes_seen_here(&self) -> bool {
        self.engines.all_local()
    }

    fn prepare(&self, spec: &Arc<LoadedManifest>) {
        self.prebuild(spec);
    }

    fn place<'a>(
        &'a self,
        session: &'a str,
        spec: &'a LoadedManifest,
    ) -> BackendFuture<'a, Result<usize, CallError>> {
        Box::pin(async move {
            let d = &spec.manifest.docker;
            if d.gpu {
                return self
                    .engines
                    .gpu_engine(&spec.name, d.gpu_count)
                    .inspect_err(|e| {
                        if e.kind() == crate::tool::ErrorKind::BackendUnavailable {
                            self.health.failed(&spec.name, Cause::Gpu, &e.to_string())
                        }
                    });
            }
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
                        .failed(&spec.name, Cause::Engine, &e.to_string())
                })
        })
    }

    fn create<'a>(
        &'a self,
        spec: &'a Arc<LoadedManifest>,
        workspace: &'a Path,
        session: &'a str,
        place: usize,
    ) -> BackendFuture<'a, Result<Arc<Node>, CreateError>> {
        Box::pin(self.start_node(spec, workspace, session, place))
    }

    fn release<'a>(&'a self, id: &'a str) -> BackendFuture<'a, ()> {
        Box::pin(self.remove(id))
    }

    fn release_later(&self, id: &str) {
        lock(&self.graveyard).insert(id.to_owned());
    }

    fn lost<'a>(&'a self, node: &'a Node) -> BackendFuture<'a, Option<String>> {
        Box::pin(async move {
            let i = self.engines.home_of(&node.container);
            (!self.engines.answers(i).await)
                .then(|| format!("its Docker engine `{}`", self.engines.member(i).name))
        })
    }

    fn check<'a>(
        &'a self,
        toolkits: &'a [(String, Option<String>)],
        health: &'a Health,
    ) -> BackendFuture<'a, ()> {
        Box::pin(self.look(toolkits, health))
    }

    fn session_closed(&self, session: &str) {
        self.engines.release(session);
    }

    fn pending(&self) -> Vec<String> {
        lock(&self.graveyard).iter().cloned().collect()
    }

    fn keeps_pools(&self) -> bool {
        true
    }

    fn census(&self) -> Vec<PlaceCensus> {
        self.engines
            .views()
            .into_iter()
            .map(|e| PlaceCensus {
                up: e.health == "up",
                drained: e.drained,
                nodes: e.nodes as u64,
                name: e.name,
            })
            .collect()
    }

    fn resources(&self) -> serde_json::Value {
        // The first engine's allocation (the host's, with one engine), and
        // every engine of the pool.
        let mut view = lock(&self.engines.member(0).allocation).view();
        view["engines"] = serde_json::json!(self.engines.views());
        view
    }
}
