//! What a call wrote to its session's workspace, learned from the writes
//! themselves: one inotify instance for the process watches the directories
//! of every workspace a call has asked about, and a call's files are those
//! the kernel told of while it ran. A call's cost no longer grows with the
//! workspace (two walks of up to 10,000 files did: 3 µs per file per call).
//!
//! Only writes made on this machine's kernel are told (wasm tools, nodes of
//! a local Docker engine, whose bind mounts are the same directories): a
//! toolkit whose writes happen elsewhere (a remote engine, Kubernetes pods
//! on a network volume) says so ([`crate::backend::Toolkit::writes_seen_here`]),
//! and its calls walk the workspace before and after as before. So does a
//! call when inotify cannot serve (no instance, the watch limit reached).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::watcher::{Running, Start, Watcher, hidden, owner_of, watcher};
use super::{Session, WorkspaceFile};

/// Workspace files looked at to tell what a call wrote by walking; a larger
/// workspace gets no written files (the walk would not see every file).
pub const MAX_WALKED_FILES: usize = 10_000;

/// What a call's end compares with ([`Session::watch_writes`]).
pub enum Before {
    /// Events after `since` are the call's, which started at `started`.
    Told {
        since: u64,
        started: SystemTime,
        call: Running,
    },
    /// The workspace as it was (none: too many files to tell).
    Walked(Option<Vec<WorkspaceFile>>),
}

impl Session {
    /// Start noting what a call writes: from the kernel's events when the
    /// toolkit's writes are `seen_here` and inotify serves, else by a walk.
    pub async fn watch_writes(self: &Arc<Self>, seen_here: bool) -> Before {
        // A session that never made its workspace has no file: nothing to
        // walk or watch (a call that makes it is walked after).
        if !self.has_workspace() {
            return Before::Walked(Some(Vec::new()));
        }
        if seen_here
            && let Some(watcher) = watcher()
            && let Some(since) = watched(watcher, self, true).await
        {
            return Before::Told {
                since,
                started: SystemTime::now(),
                call: Running {
                    session: self.id.clone(),
                    owner: owner_of(self),
                },
            };
        }
        Before::Walked(walk(self).await)
    }

    /// The workspace files created or changed since `before`, sorted by
    /// path, those under hidden directories (a tool's index) left out.
    pub async fn writes_since(self: &Arc<Self>, before: Before) -> Vec<WorkspaceFile> {
        match before {
            Before::Walked(before) => written_since(before, walk(self).await),
            Before::Told {
                since,
                started,
                call,
            } => {
                let Some(watcher) = watcher() else {
                    return Vec::new();
                };
                let told = watcher.finish(self, since);
                drop(call);
                let Some((root, paths)) = told else {
                    return changed_after(self, started).await;
                };
                // A few files are looked at here; many on a blocking thread.
                if paths.len() <= FEW {
                    return described(&root, paths);
                }
                tokio::task::spawn_blocking(move || described(&root, paths))
                    .await
                    .unwrap_or_default()
            }
        }
    }
}

/// `session`'s workspace watched (a call of it counted when `call`): the
/// events read so far; none when its writes cannot be told now. A workspace
/// watched already costs a lock and a read that does not wait; watching one
/// anew walks its directories, on a blocking thread.
pub(super) async fn watched(
    watcher: &'static Watcher,
    session: &Arc<Session>,
    call: bool,
) -> Option<u64> {
    match watcher.start(session, false, call) {
        Start::Told(since) => Some(since),
        Start::Walk => None,
        Start::Watch => {
            let session = session.clone();
            match tokio::task::spawn_blocking(move || watcher.start(&session, true, call)).await {
                Ok(Start::Told(since)) => Some(since),
                _ => None,
            }
        }
    }
}

/// The workspace's files changed since `started` (a little before: the
/// kernel stamps files with a coarse clock), for a call whose writes could
/// not all be told (its workspace's directory replaced while it ran, the
/// kernel's queue overflowed); files moved in keep their older times.
async fn changed_after(session: &Arc<Session>, started: SystemTime) -> Vec<WorkspaceFile> {
    let since = started - Duration::from_millis(10);
    walk(session)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|f| !hidden(&f.path) && f.modified.is_some_and(|m| m >= since))
        .collect()
}

/// Written files looked at on the request's own thread.
const FEW: usize = 16;

/// The files at `paths` under `root` that are there as regular files.
fn described(root: &Path, paths: Vec<String>) -> Vec<WorkspaceFile> {
    paths
        .into_iter()
        .filter_map(|path| {
            let meta = std::fs::symlink_metadata(root.join(&path)).ok()?;
            meta.is_file().then(|| WorkspaceFile::of(path, Some(&meta)))
        })
        .collect()
}

/// The session's workspace files, walked on a blocking thread; `None` when
/// there are too many to tell what a call wrote.
async fn walk(session: &Arc<Session>) -> Option<Vec<WorkspaceFile>> {
    if !session.has_workspace() {
        return Some(Vec::new());
    }
    let session = session.clone();
    let files = tokio::task::spawn_blocking(move || session.files(MAX_WALKED_FILES + 1))
        .await
        .ok()?;
    (files.len() <= MAX_WALKED_FILES).then_some(files)
}

/// Files of `after` that are new or changed since `before` (both sorted by
/// path), hidden directories' and files' left out.
pub(super) fn written_since(
    before: Option<Vec<WorkspaceFile>>,
    after: Option<Vec<WorkspaceFile>>,
) -> Vec<WorkspaceFile> {
    let (Some(before), Some(after)) = (before, after) else {
        return Vec::new();
    };
    after
        .into_iter()
        .filter(|f| !hidden(&f.path))
        .filter(|f| {
            before
                .binary_search_by(|b| b.path.as_str().cmp(&f.path))
                .map_or(true, |i| before[i] != *f)
        })
        .collect()
}

#[cfg(test)]
#[path = "writes_tests.rs"]
mod tests;
