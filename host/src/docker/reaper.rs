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

    /// The monitor's look at each toolkit: is the engine up and its image
    /// there? Recorded in the toolkits' health (see [`health`]).
    pub(super) async fn check_health(&self) {
        // (name, image; none for a built image: the builder reports its
        // failures, and makes it when it is missing).
        let specs: Vec<(String, Option<String>)> = lock(&self.specs)
            .values()
            .map(|s| {
                let d = &s.manifest.docker;
                (s.name.clone(), d.build.is_none().then(|| d.image.clone()))
            })
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
            let Some(image) = image else {
                self.health.engine_and_image_ok(&name);
                continue;
            };
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

    pub(super) async fn remove_orphans(&self) {
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
                // Never this run's own: calls make nodes while this runs.
                let ids: Vec<String> = list
                    .into_iter()
                    .filter(|c| c.labels.as_ref().and_then(|l| l.get(RUN_LABEL)) != Some(&self.run))
                    .filter_map(|c| c.id)
                    .collect();
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
