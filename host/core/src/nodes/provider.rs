//! Where nodes come from: the one seam between the node backend (sessions'
//! nodes, hot pools, the monitor, toolkits' health) and what runs them.
//! Two providers, peers in their own folders: [`super::docker`] (one or
//! several Docker engines) and [`super::kubernetes`] (agent-sandbox claims
//! on a cluster). The backend names neither; the composition root
//! (`server`) picks one.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::health::{Cause, Health};
use super::manifest::LoadedManifest;
use super::node::Node;
use crate::backend::BackendFuture;
use crate::tool::CallError;

/// A failure to make a node, with what stood in the way (none when the
/// server is shutting down): recorded in the toolkit's health.
pub type CreateError = (Option<Cause>, CallError);

/// What the backend and its provider share about the nodes' lifecycle.
#[derive(Default)]
pub struct Lifecycle {
    /// Set at shutdown: no new node may appear after it.
    pub closing: AtomicBool,
    /// Node creations in progress (shutdown waits for them).
    pub creating: AtomicUsize,
    /// Nodes removed since start (for the metrics).
    pub removed: AtomicU64,
}

impl Lifecycle {
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Count a creation in progress until the guard goes.
    pub fn creating(&self) -> Creating<'_> {
        self.creating.fetch_add(1, Ordering::AcqRel);
        Creating(&self.creating)
    }

    pub fn count_removed(&self) {
        self.removed.fetch_add(1, Ordering::Relaxed);
    }
}

/// A node creation in progress ([`Lifecycle::creating`]).
pub struct Creating<'a>(&'a AtomicUsize);

impl Drop for Creating<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The refusal of a server that is shutting down.
pub fn closing() -> CreateError {
    (
        None,
        CallError::BackendUnavailable("the server is shutting down".into()),
    )
}

/// One engine (or cluster) as `/metrics` counts it.
pub struct PlaceCensus {
    pub name: String,
    pub up: bool,
    pub drained: bool,
    pub nodes: u64,
}

/// Where a node backend's nodes come from.
pub trait NodeProvider: Send + Sync + 'static {
    /// `docker`, `kubernetes`.
    fn kind(&self) -> &'static str;

    /// Toolkit `spec` (a new version) is served: prepare what its nodes
    /// need (a built image, the cluster's objects), in the background.
    fn prepare(&self, spec: &Arc<LoadedManifest>);

    /// Where `session`'s node of `spec` goes (an index among the
    /// provider's places; a provider that places its nodes itself says 0).
    fn place<'a>(
        &'a self,
        session: &'a str,
        spec: &'a LoadedManifest,
    ) -> BackendFuture<'a, Result<usize, CallError>>;

    /// Make and start a node of `spec` for `session` at `place`, with
    /// `workspace` at /workspace, its driver attached (or its service
    /// answering).
    fn create<'a>(
        &'a self,
        spec: &'a Arc<LoadedManifest>,
        workspace: &'a Path,
        session: &'a str,
        place: usize,
    ) -> BackendFuture<'a, Result<Arc<Node>, CreateError>>;

    /// Remove node `id` (retried by the monitor when it cannot be now).
    fn release<'a>(&'a self, id: &'a str) -> BackendFuture<'a, ()>;

    /// Remove node `id` later (the monitor's next look).
    fn release_later(&self, id: &str);

    /// Whether what `node` ran on is gone with it, said as "its Docker
    /// engine `a`".
    fn lost<'a>(&'a self, node: &'a Node) -> BackendFuture<'a, Option<String>>;

    /// The monitor's look: places up or down, leftovers of earlier runs
    /// swept, removals retried, and each toolkit's `(name, image)` checked
    /// (an image of `None` is built by the provider itself), recorded in
    /// `health`.
    fn check<'a>(
        &'a self,
        toolkits: &'a [(String, Option<String>)],
        health: &'a Health,
    ) -> BackendFuture<'a, ()>;

    /// Whether its nodes' writes to a workspace reach this machine's
    /// kernel (a local Docker engine's bind mounts), not another machine's.
    fn writes_seen_here(&self) -> bool {
        false
    }

    /// `session` closed: forget where it was placed.
    fn session_closed(&self, session: &str);

    /// Nodes whose removal is still pending (removed at shutdown).
    fn pending(&self) -> Vec<String>;

    /// Whether the backend keeps hot pools of started nodes itself (a
    /// cluster keeps its own warm pools).
    fn keeps_pools(&self) -> bool;

    /// Each place, for `/metrics`.
    fn census(&self) -> Vec<PlaceCensus>;

    /// What the provider holds, for `GET /system`-like views.
    fn resources(&self) -> serde_json::Value;
}
