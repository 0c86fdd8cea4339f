//! The node lifecycle around calls: leftovers removed at start-up, the
//! monitor (engine and image health, idle, dead, outdated and closed
//! sessions' nodes, the graveyard, pool top-ups), a session's nodes removed
//! when it closes, and everything removed at shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bollard::query_parameters::ListContainersOptionsBuilder;

use super::health::Cause;
use super::manifest::LoadedManifest;
use super::{
    DockerBackend, Key, MONITOR_EVERY, Pooled, RUN_LABEL, SCOPE_LABEL, Slot, lock, missing_image,
};

impl DockerBackend {
    /// Start-up: remove this scope's leftover containers, fill the hot pools,
    /// and watch the nodes. Works (and retries later) without an engine.
    pub fn start(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            // (The monitor's first look, at once, removes leftovers from each
            // engine that answers; an engine that comes up later is swept then.)
            let weak = Arc::downgrade(&this);
            drop(this);
            let mut tick = tokio::time::interval(MONITOR_EVERY);
            loop {
                tick.tick().await;
                let Some(this) = weak.upgrade() else { return };
                // A panic in one look must not end the monitoring.
                let look = std::panic::AssertUnwindSafe(this.monitor());
                if futures::FutureExt::catch_unwind(look).await.is_err() {
                    tracing::error!("the Docker monitor panicked; it looks again next time");
                }
            }
        })
    }

    /// The monitor's look at each engine (up, down; leftovers swept from
    /// one that comes up) and each toolkit: is an engine up with its image
    /// there (loaded from the image archive when missing)? Recorded in the
    /// toolkits' health (see [`health`]).
    pub(super) async fn check_health(&self) {
        if let Some(cluster) = self.cluster() {
            // Nodes come from the cluster: its leftovers are swept once,
            // and a toolkit's problems show when a claim fails.
            if !self.swept.swap(true, std::sync::atomic::Ordering::AcqRel) {
                match cluster.remove_orphans().await {
                    Ok(()) => {}
                    Err(e) => {
                        self.swept
                            .store(false, std::sync::atomic::Ordering::Release);
                        tracing::warn!(error = %e, "cannot sweep leftover SandboxClaims");
                    }
                }
            }
            return;
        }
        let (up, came_up) = self.engines.check().await;
        for i in came_up {
            self.remove_orphans(i).await;
        }
        // (name, image; none for a built image: the builder reports its
        // failures, and makes it when it is missing).
        let specs: Vec<(String, Option<String>)> = lock(&self.specs)
            .values()
            .map(|s| {
                let d = &s.manifest.docker;
                (s.name.clone(), d.build.is_none().then(|| d.image.clone()))
            })
            .collect();
        if up.is_empty() {
            let e = self.engines.down_reason();
            for (name, _) in &specs {
                self.health.found(name, Cause::Engine, &e);
            }
            return;
        }
        let mut clients = Vec::new();
        for i in up {
            if self.engines.member(i).is_drained() {
                continue;
            }
            if let Ok(docker) = self.docker(i).await {
                clients.push((i, docker));
            }
        }
        for (name, image) in specs {
            let Some(image) = image else {
                self.health.engine_and_image_ok(&name);
                continue;
            };
            // Present on one usable engine is enough (nodes go there).
            let mut present = false;
            for (i, docker) in &clients {
                match self.engines.ensure_image(*i, docker, &image, true).await {
                    Ok(true) => present = true,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::debug!(toolkit = %name, engine = %self.engines.member(*i).name, error = %e, "cannot make the node image present")
                    }
                }
            }
            if present {
                self.health.engine_and_image_ok(&name);
            } else if !clients.is_empty() {
                self.health
                    .found(&name, Cause::Image, &missing_image(&image).to_string());
            }
        }
    }

    /// Remove this scope's containers of earlier runs from engine `engine`.
    pub(super) async fn remove_orphans(&self, engine: usize) {
        let Ok(docker) = self.docker(engine).await else {
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
                // Never this run's own: calls make nodes while this runs.
                let ids: Vec<String> = list
                    .into_iter()
                    .filter(|c| c.labels.as_ref().and_then(|l| l.get(RUN_LABEL)) != Some(&self.run))
                    .filter_map(|c| c.id)
                    .collect();
                for id in &ids {
                    self.engines.settle(id, engine, 0.0, 0);
                    self.remove_container(id).await;
                }
                if !ids.is_empty() {
                    tracing::info!(
                        count = ids.len(),
                        engine = %self.engines.member(engine).name,
                        "removed node containers left by a previous run"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot list leftover node containers"),
        }
    }

    /// Remove nodes of closed sessions, idle nodes and dead nodes; keep the
    /// hot pools full.
    pub(super) async fn monitor(self: &Arc<Self>) {
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
                lock(&self.slots).remove(&(session.clone(), toolkit));
            }
            if closed {
                self.engines.release(&session);
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
            let _ = tokio::fs::remove_dir_all(&p.dir).await;
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
        self.engines.release(session);
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
            let _ = tokio::fs::remove_dir_all(&p.dir).await;
        }
        ids.extend(lock(&self.graveyard).iter().cloned());
        futures::future::join_all(ids.iter().map(|id| self.remove_container(id))).await;
        if !ids.is_empty() {
            tracing::info!(count = ids.len(), "removed node containers");
        }
    }
}
