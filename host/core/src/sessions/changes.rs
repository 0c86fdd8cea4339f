//! A session's workspace writes as they happen, for whoever waits on them
//! (an MCP client subscribed to a file): the kernel's events that
//! [`super::writes`] reads for calls, told as they are read.

use std::sync::Arc;

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
}
