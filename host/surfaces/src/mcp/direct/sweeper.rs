//! The idle sweeper of MCP sessions.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::transport::streamable_http_server::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::sync::CancellationToken;

use super::Direct;

/// Close MCP sessions unused for `idle` (rmcp's own idle timeout is off, as
/// directly answered requests do not reach its session worker). A session
/// that never finished its handshake (`initialize` and nothing after: what
/// a flood of them leaves) is closed `unfinished` after it was first seen
/// here.
pub fn spawn_sweeper(
    direct: Arc<Direct>,
    manager: Arc<LocalSessionManager>,
    (idle, unfinished): (Duration, Duration),
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let every = (idle.min(unfinished) / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
    tokio::spawn(async move {
        let mut first_seen: HashMap<rmcp::transport::streamable_http_server::SessionId, u64> =
            HashMap::new();
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = shutdown.cancelled() => return,
            }
            let ids: std::collections::HashSet<_> =
                manager.sessions.read().await.keys().cloned().collect();
            first_seen.retain(|id, _| ids.contains(id));
            let now = direct.now_ms();
            let mut closed = 0usize;
            for id in ids {
                let (last, limit) = match direct.link(&id) {
                    Some(link) => (link.last_used_ms.load(Ordering::Relaxed), idle),
                    None => (*first_seen.entry(id.clone()).or_insert(now), unfinished),
                };
                if now.saturating_sub(last) > limit.as_millis() as u64 {
                    tracing::info!(session = %id, "MCP: closing an idle session");
                    direct.unregister(&id);
                    match manager.close_session(&id).await {
                        Ok(()) => closed += 1,
                        Err(e) => {
                            tracing::warn!(session = %id, error = %e, "MCP: cannot close an idle session")
                        }
                    }
                }
            }
            if closed > 0 {
                // What the sessions held goes back to the system, not only to
                // the allocator (10,000 closed sessions kept 560 MB).
                toolhost_core::system::give_back_memory();
            }
        }
    })
}
