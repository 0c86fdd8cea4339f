//! A session's workspace writes as they happen, for whoever waits on them
//! (an MCP client subscribed to a file): the kernel's events that
//! [`super::writes`] reads for calls, told as they are read; and a token
//! that names the state of its files, for a plugin that keeps what it
//! learned of them (`toolhost:workspace/changes`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Session;
use super::watcher::watcher;
use super::writes::watched;

impl Session {
    /// Told of the workspace's writes as the kernel reports them (its
    /// directories watched from now on, as for a call): the value changes
    /// after each. None when they cannot be told (no workspace yet, no
    /// inotify, a directory that could not be watched, or writes lost while
    /// a call runs): look again later.
    pub async fn watch_changes(self: &Arc<Self>) -> Option<tokio::sync::watch::Receiver<u64>> {
        if !self.has_workspace() {
            return None;
        }
        watched(watcher()?, self, false).await?;
        Some(self.changes.subscribe())
    }

    /// A call of a toolkit whose writes this machine's kernel does not see
    /// (a remote Docker engine, Kubernetes) runs in the session: its
    /// workspace's changes cannot be told from now on.
    pub fn writes_elsewhere(&self) {
        self.untold.store(true, Ordering::Relaxed);
    }

    /// A token naming the state of the workspace's visible files (hidden
    /// ones, a dot name or under one, left out): the same on two asks when
    /// nothing was made, written, removed, renamed or touched in between,
    /// another after a restart. None when that cannot be told: no workspace,
    /// no inotify, a directory not watched, events lost, or writers the
    /// kernel does not tell of ([`Session::writes_elsewhere`], replicas).
    /// Events the kernel holds are read first, so a write that returned
    /// before the ask is counted.
    pub async fn workspace_token(self: &Arc<Self>) -> Option<String> {
        if self.untold.load(Ordering::Relaxed) || !self.has_workspace() {
            return None;
        }
        let watcher = watcher()?;
        watched(watcher, self, false).await?;
        watcher.token(self)
    }
}
