//! A session's life after its last call: marking its workspace in use on
//! disk (for instances sharing the workspaces) and reaping idle sessions.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Session, Sessions};

impl Sessions {
    /// Say on disk that `session` is in use: its workspace's modification
    /// time, set at most every quarter of the idle timeout (10 s at most).
    /// Instances sharing the workspaces (replicas over one volume) read it
    /// before deleting a workspace they think idle ([`Sessions::reap_idle`]).
    pub(super) fn mark_used(&self, session: &Session, now: u64) {
        let every = (self.idle.as_millis() as u64 / 4).min(10_000);
        let last = session.marked.load(Ordering::Relaxed);
        if !session.has_workspace() || now.saturating_sub(last) < every {
            return;
        }
        session.marked.store(now, Ordering::Relaxed);
        let marked = std::fs::File::open(&session.workspace)
            .and_then(|dir| dir.set_modified(std::time::SystemTime::now()));
        if let Err(e) = marked {
            tracing::debug!(session = %session.id, error = %e, "cannot mark the workspace in use");
        }
    }

    /// Whether another instance used `session`'s workspace within the idle
    /// timeout ([`Sessions::mark_used`]).
    fn used_elsewhere(&self, session: &Session) -> bool {
        std::fs::metadata(&session.workspace)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < self.idle)
    }

    /// Close every session idle for longer than the idle timeout; returns their ids.
    /// A workspace another instance used within the timeout is left to it
    /// (the session is only forgotten here, its resources released).
    pub async fn reap_idle(&self) -> Vec<String> {
        let now = self.now_ms();
        let idle_ms = self.idle.as_millis() as u64;
        let reaped: Vec<Arc<Session>> = {
            let mut map = self.lock();
            let ids: Vec<String> = map
                .iter()
                // A session in use by a call has more than the map's reference.
                .filter(|(_, s)| now.saturating_sub(s.last_used.load(Ordering::Relaxed)) > idle_ms)
                .filter(|(_, s)| Arc::strong_count(s) == 1)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| map.remove(id)).collect()
        };
        for s in &reaped {
            if self.used_elsewhere(s) {
                tracing::info!(session = %s.id, "idle here but its workspace is in use by another instance: kept");
                self.release(&s.id).await;
                continue;
            }
            if let Err(e) = self.finish_close(s).await {
                tracing::warn!(session = %s.id, error = %e, "could not delete the workspace of a reaped session");
            }
        }
        reaped.iter().map(|s| s.id.clone()).collect()
    }

    /// Reap idle sessions every `every` until the returned task is aborted.
    pub fn spawn_reaper(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let sessions = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(sessions) = sessions.upgrade() else {
                    return;
                };
                let reaped = sessions.reap_idle().await;
                if !reaped.is_empty() {
                    tracing::info!(count = reaped.len(), sessions = ?reaped, "reaped idle sessions");
                }
            }
        })
    }
}
