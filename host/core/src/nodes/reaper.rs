//! The node lifecycle around calls: leftovers removed at start-up, the
//! monitor (engine and image health, idle, dead, outdated and closed
//! sessions' nodes, the graveyard, pool top-ups), a session's nodes removed
//! when it closes, and everything removed at shutdown.

use std::sync::Arc;
use std::time::Duration;

use super::manifest::LoadedManifest;
use super::{Key, MONITOR_EVERY, NodeBackend, Pooled, Slot, lock};

impl NodeBackend {
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

    /// The monitor's look at where nodes come from (the provider's) and at
    /// each toolkit: can its nodes be made? Recorded in the toolkits'
    /// health (see [`health`]).
    pub(super) async fn check_health(&self) {
        // (name, image; none for a built image: the provider builds it,
        // and reports its failures).
        let toolkits: Vec<(String, Option<String>)> = lock(&self.specs)
            .values()
            .map(|s| {
                let d = &s.manifest.docker;
                (s.name.clone(), d.build.is_none().then(|| d.image.clone()))
            })
            .collect();
        self.provider.check(&toolkits, &self.health).await;
        // A GPU toolkit is unavailable while no engine with GPUs answers.
        if let Some(docker) = &self.docker {
            let gpu: Vec<String> = lock(&self.specs)
                .values()
                .filter(|s| s.manifest.docker.gpu)
                .map(|s| s.name.clone())
                .collect();
            let any = docker.engines.any_gpu();
            for name in gpu {
                match any {
                    true => self.health.gpu_ok(&name),
                    false => self.health.found(
                        &name,
                        super::health::Cause::Gpu,
                        &super::docker::gpu::no_gpu(&name),
                    ),
                }
            }
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
                self.provider.session_closed(&session);
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
        self.provider.session_closed(session);
    }

    /// Remove every node and pooled node (graceful shutdown).
    pub async fn shutdown(&self) {
        use std::sync::atomic::Ordering;
        self.life.closing.store(true, Ordering::Release);
        // Nodes being created now remove themselves when they see `closing`.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.life.creating.load(Ordering::Acquire) > 0
            && tokio::time::Instant::now() < deadline
        {
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
        ids.extend(self.provider.pending());
        futures::future::join_all(ids.iter().map(|id| self.remove_container(id))).await;
        if !ids.is_empty() {
            tracing::info!(count = ids.len(), "removed node containers");
        }
    }
}
