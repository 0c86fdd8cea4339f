//! Hot loading: watch the plugins directory and reconcile what changed.
//!
//! inotify (through `notify`) reports each write, close, rename and delete,
//! in the directory and in its folders (Docker toolkits are folders). Each
//! event is mapped to the entry it belongs to (the backends' `claim` of the
//! directory's child it is in), events are grouped per entry, and an entry is
//! reconciled once its files have been quiet for the debounce interval, so a `cp` that writes in many
//! chunks, or a manifest and a component renamed into place one after the
//! other, load once, complete. A file closed after writing or renamed into
//! place is complete: its entry waits only the settle time for a companion
//! file (a manifest moved in beside it), not the whole debounce. A half-written file that happens to be read
//! anyway just fails to load ("not yet valid") and is loaded again when the
//! write's last events arrive. A periodic rescan catches anything the kernel
//! dropped (an inotify queue overflow).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::PluginManager;

/// What the notify thread tells the reconcile loop.
enum Signal {
    /// Files changed; `complete` when the event says a file is whole.
    Paths { paths: Vec<PathBuf>, complete: bool },
    /// Events may have been lost: look at everything.
    Rescan,
}

/// The running watcher; dropping it stops watching.
pub struct DirWatcher {
    _watcher: notify::RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for DirWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// When the reconcile loop acts.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Quiet time after an entry's last file event.
    pub debounce: Duration,
    /// ... after an event saying a file of it is whole (at most `debounce`).
    pub settle: Duration,
    /// Every entry looked at again this often (zero: never).
    pub rescan: Duration,
}

/// Watch `manager`'s directory; reconcile a plugin `timing.debounce` after
/// its last event (`timing.settle` after one saying a file is whole), and
/// every plugin every `timing.rescan`.
pub fn spawn(manager: Arc<PluginManager>, timing: Timing) -> notify::Result<DirWatcher> {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind, RenameMode};
        let signal = match event {
            Ok(e) if e.need_rescan() => Signal::Rescan,
            // Reading a plugin's files (the server's own loads) changes
            // nothing; a file closed after writing does.
            Ok(e) if matches!(e.kind, EventKind::Access(a) if a != AccessKind::Close(AccessMode::Write)) =>
            {
                return;
            }
            Ok(e) => Signal::Paths {
                complete: matches!(
                    e.kind,
                    EventKind::Access(AccessKind::Close(AccessMode::Write))
                        | EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both))
                ),
                paths: e.paths,
            },
            Err(e) => {
                tracing::warn!(error = %e, "plugins directory watch error; rescanning");
                Signal::Rescan
            }
        };
        let _ = tx.send(signal);
    })?;
    watcher.watch(manager.dir(), RecursiveMode::Recursive)?;
    let task = tokio::spawn(run(manager, rx, timing));
    Ok(DirWatcher {
        _watcher: watcher,
        task,
    })
}

async fn run(
    manager: Arc<PluginManager>,
    mut rx: mpsc::UnboundedReceiver<Signal>,
    Timing {
        debounce,
        settle,
        rescan,
    }: Timing,
) {
    // Plugin name -> when to reconcile it (pushed back by every new event).
    let mut pending: HashMap<String, Instant> = HashMap::new();
    let far = Duration::from_secs(24 * 3600);
    let mut next_rescan = Instant::now() + if rescan.is_zero() { far } else { rescan };
    loop {
        let next_due = pending.values().min().copied();
        let wake = next_due.map_or(next_rescan, |d| d.min(next_rescan));
        tokio::select! {
            signal = rx.recv() => match signal {
                None => return,
                Some(Signal::Paths { paths, complete }) => {
                    if complete {
                        paths.iter().for_each(|p| manager.arrived(p));
                    }
                    let wait = if complete { debounce.min(settle) } else { debounce };
                    let due = Instant::now() + wait;
                    for name in paths.iter().flat_map(|p| manager.entries_of(p)) {
                        pending.insert(name, due);
                    }
                }
                Some(Signal::Rescan) => next_rescan = Instant::now(),
            },
            _ = tokio::time::sleep_until(wake) => {
                let now = Instant::now();
                let due: Vec<String> = pending
                    .iter()
                    .filter(|(_, at)| **at <= now)
                    .map(|(n, _)| n.clone())
                    .collect();
                for name in due {
                    pending.remove(&name);
                    let manager = manager.clone();
                    tokio::spawn(async move { manager.reconcile(&name).await });
                }
                if next_rescan <= now {
                    next_rescan = now + if rescan.is_zero() { far } else { rescan };
                    let manager = manager.clone();
                    tokio::spawn(async move { manager.reconcile_all().await });
                }
            }
        }
    }
}

impl PluginManager {
    /// Reconcile every entry on disk or loaded (a full rescan).
    pub async fn reconcile_all(self: &Arc<Self>) {
        let me = self.clone();
        let mut names = tokio::task::spawn_blocking(move || me.names_on_disk())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        names.extend(self.list().into_iter().map(|s| s.name));
        names.sort();
        names.dedup();
        futures::future::join_all(names.iter().map(|n| self.reconcile(n))).await;
    }

    /// Names of the entries a changed `path` (anywhere under the directory)
    /// belongs to: the claims of the directory's child it is in.
    pub fn entries_of(&self, path: &std::path::Path) -> Vec<String> {
        let Ok(rest) = path.strip_prefix(self.dir()) else {
            return Vec::new();
        };
        let Some(first) = rest.components().next() else {
            return Vec::new();
        };
        let child = self.dir().join(first);
        let mut names: Vec<String> = self.claims(&child).into_iter().map(|k| k.0).collect();
        names.dedup();
        names
    }
}
