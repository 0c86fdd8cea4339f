//! What an MCP session (2025-11-25, session mode) is told without asking:
//!
//! - Log records of its toolhost session's calls (plugins' `log` import) as
//!   `notifications/message`, from its `logging/setLevel` on, at that level
//!   and above. The session's log channel is bounded (a listener that falls
//!   behind loses the oldest records), and at most [`MAX_LOGS_PER_SECOND`]
//!   go out a second.
//! - `notifications/resources/updated` for the workspace files it
//!   subscribed to, whoever changed them (a wasm tool, the shell, an upload):
//!   the files are looked at when the kernel tells of a write in the
//!   workspace ([`Wake`]), at most every [`LOOK_GAP`], and every
//!   [`LOOK_ANYWAY`] besides; every [`WATCH_EVERY`] while writes cannot be
//!   told (no workspace yet, no inotify).
#![expect(deprecated, reason = "logging stays in 2025-11-25, which we serve")]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ResourceUpdatedNotificationParam,
};
use rmcp::{Peer, RoleServer};
use serde_json::json;
use tokio::task::JoinHandle;

use super::features;
use crate::state::AppState;
use toolhost_core::sessions::Session;

/// Log notifications sent a second at most; the rest are dropped (counted).
const MAX_LOGS_PER_SECOND: u32 = 100;
/// How often subscribed files are looked at while the workspace's writes
/// cannot be told.
const WATCH_EVERY: Duration = Duration::from_millis(250);
/// Subscribed files are looked at no more often than this (a burst of
/// writes is one look).
const LOOK_GAP: Duration = Duration::from_millis(20);
/// ... and at least this often (writes this machine's kernel does not see).
const LOOK_ANYWAY: Duration = Duration::from_secs(2);
/// Resources one MCP session may subscribe to.
pub const MAX_SUBSCRIPTIONS: usize = 256;

/// Watched workspace files, by URI, with what they were when last looked at.
pub type Watched = Arc<Mutex<HashMap<String, Option<(SystemTime, u64)>>>>;

#[derive(Default)]
pub struct Logging {
    level: Arc<Mutex<Option<LoggingLevel>>>,
    forwarder: Mutex<Option<JoinHandle<()>>>,
    watched: Watched,
    watcher: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Logging {
    fn drop(&mut self) {
        for task in [&self.forwarder, &self.watcher] {
            if let Some(t) = task.lock().unwrap_or_else(|e| e.into_inner()).take() {
                t.abort();
            }
        }
    }
}

/// MCP's severity rank of a level (debug lowest).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// A host log level as MCP's.
fn mcp_level(level: tracing::Level) -> LoggingLevel {
    match level {
        tracing::Level::TRACE | tracing::Level::DEBUG => LoggingLevel::Debug,
        tracing::Level::INFO => LoggingLevel::Info,
        tracing::Level::WARN => LoggingLevel::Warning,
        _ => LoggingLevel::Error,
    }
}

impl Logging {
    /// `logging/setLevel`: from now on, the session's records at `level` and
    /// above go to `peer`.
    pub fn set_level(
        &self,
        level: LoggingLevel,
        session: &Session,
        peer: Peer<RoleServer>,
        state: &AppState,
    ) {
        *self.level.lock().unwrap_or_else(|e| e.into_inner()) = Some(level);
        let mut forwarder = self.forwarder.lock().unwrap_or_else(|e| e.into_inner());
        if forwarder.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        let mut records = session.subscribe_logs();
        let threshold = self.level.clone();
        let shutdown = state.shutdown.clone();
        *forwarder = Some(tokio::spawn(async move {
            let (mut window, mut sent, mut dropped) = (Instant::now(), 0u32, 0u64);
            loop {
                let record = tokio::select! {
                    r = records.recv() => r,
                    () = shutdown.cancelled() => return,
                };
                let record = match record {
                    Ok(r) => r,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        dropped += n;
                        continue;
                    }
                    Err(_) => return,
                };
                let level = mcp_level(record.level);
                let min = *threshold.lock().unwrap_or_else(|e| e.into_inner());
                if min.is_some_and(|min| rank(level) < rank(min)) {
                    continue;
                }
                if window.elapsed() >= Duration::from_secs(1) {
                    (window, sent) = (Instant::now(), 0);
                }
                if sent >= MAX_LOGS_PER_SECOND {
                    dropped += 1;
                    continue;
                }
                sent += 1;
                let mut data = json!({"message": record.message});
                if dropped > 0 {
                    data["dropped_before"] = json!(dropped);
                    dropped = 0;
                }
                let mut note = LoggingMessageNotificationParam::new(level, data);
                note.logger = Some(record.logger);
                if peer.notify_logging_message(note).await.is_err() || peer.is_transport_closed() {
                    return;
                }
            }
        }));
    }

    /// `resources/subscribe`: `uri` is watched (a workspace file) or, for a
    /// declared resource that never changes, only remembered.
    pub fn subscribe(
        &self,
        uri: String,
        session: Arc<Session>,
        peer: Peer<RoleServer>,
        state: &AppState,
    ) {
        {
            let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
            if watched.len() >= MAX_SUBSCRIPTIONS && !watched.contains_key(&uri) {
                return;
            }
            let seen = stat(&session, &uri);
            watched.insert(uri, seen);
        }
        let mut watcher = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        if watcher.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        let watched = self.watched.clone();
        let shutdown = state.shutdown.clone();
        *watcher = Some(tokio::spawn(async move {
            let mut wake = Wake::default();
            loop {
                tokio::select! {
                    () = wake.next(&session) => {}
                    () = shutdown.cancelled() => return,
                }
                for uri in changed(&session, &watched) {
                    let note = ResourceUpdatedNotificationParam::new(uri);
                    if peer.notify_resource_updated(note).await.is_err()
                        || peer.is_transport_closed()
                    {
                        return;
                    }
                }
            }
        }));
    }

    pub fn unsubscribe(&self, uri: &str) {
        self.watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uri);
    }
}

/// When a session's subscribed files are to be looked at again: after a
/// write the kernel tells of in its workspace, else after [`WATCH_EVERY`].
#[derive(Default)]
pub struct Wake {
    changes: Option<tokio::sync::watch::Receiver<u64>>,
    last: Option<Instant>,
}

impl Wake {
    /// Wait until the files may have changed.
    pub async fn next(&mut self, session: &Arc<Session>) {
        if let Some(last) = self.last {
            tokio::time::sleep_until((last + LOOK_GAP).into()).await;
        }
        // Watched again if the workspace was replaced; the receiver kept
        // holds what came since the last look.
        match (session.watch_changes().await, self.changes.as_mut()) {
            (Some(_), Some(changes)) => {
                tokio::select! {
                    told = changes.changed() => if told.is_err() { self.changes = None },
                    () = tokio::time::sleep(LOOK_ANYWAY) => {}
                }
            }
            // Told from now on: look once at what came before.
            (Some(changes), None) => self.changes = Some(changes),
            (None, _) => {
                self.changes = None;
                tokio::time::sleep(WATCH_EVERY).await;
            }
        }
        self.last = Some(Instant::now());
    }
}

/// The URIs of `watched` whose file changed (or appeared, or went) since it
/// was last looked at; what they are now is remembered.
pub fn changed(session: &Session, watched: &Watched) -> Vec<String> {
    let uris: Vec<String> = watched
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .keys()
        .cloned()
        .collect();
    let mut out = Vec::new();
    for uri in uris {
        let now = stat(session, &uri);
        let mut w = watched.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(before) = w.get_mut(&uri)
            && *before != now
        {
            *before = now;
            out.push(uri);
        }
    }
    out
}

/// `uris` (at most [`MAX_SUBSCRIPTIONS`]) to be watched, as they are now.
pub fn watch(session: &Session, uris: &[String]) -> Watched {
    let seen = uris
        .iter()
        .take(MAX_SUBSCRIPTIONS)
        .map(|uri| (uri.clone(), stat(session, uri)))
        .collect();
    Arc::new(Mutex::new(seen))
}

/// A workspace file's modification time and size, found as a read finds it
/// (nothing outside the workspace, through a symlink or not, is looked
/// at): none when it is missing, or the URI is not a workspace file's.
fn stat(session: &Session, uri: &str) -> Option<(SystemTime, u64)> {
    let path = features::workspace_path(uri)?;
    crate::workspace::stat(session.workspace_path(), path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_rank_in_mcp_order() {
        assert!(rank(mcp_level(tracing::Level::DEBUG)) < rank(LoggingLevel::Info));
        assert!(rank(mcp_level(tracing::Level::WARN)) >= rank(LoggingLevel::Notice));
        assert!(rank(mcp_level(tracing::Level::ERROR)) < rank(LoggingLevel::Critical));
    }
}
