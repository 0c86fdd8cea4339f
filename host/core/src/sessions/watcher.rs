//! The process's one inotify instance over the directories of every workspace
//! a call (or a subscriber) has asked about: which files were written while
//! a session's calls ran ([`super::writes`]), and a count of the workspace's
//! events for whoever waits on them ([`super::changes`]).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

use super::Session;

/// Most files one call is told it wrote.
const MAX_TOLD: usize = 10_000;

/// A call counted as running in its workspace until dropped (also when the
/// call is dropped before its end: a client gone).
pub struct Running {
    pub(super) session: String,
    pub(super) owner: usize,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(Some(watcher)) = WATCHER.get() {
            watcher.end_call(&self.session, self.owner);
        }
    }
}

/// What [`Watcher::start`] found.
pub(super) enum Start {
    /// Watched: events after this one are the call's.
    Told(u64),
    /// Not watched yet: to be watched anew, on a blocking thread.
    Watch,
    /// Its writes cannot be told now: walk the workspace.
    Walk,
}

static WATCHER: OnceLock<Option<Watcher>> = OnceLock::new();

/// The process's watcher, made on first use; none when inotify cannot be had.
pub(super) fn watcher() -> Option<&'static Watcher> {
    WATCHER.get_or_init(Watcher::new).as_ref()
}

/// What a file event means to us: the file was written (made, changed,
/// moved in, its times set).
const FILE_EVENTS: WatchMask = WatchMask::CREATE
    .union(WatchMask::MODIFY)
    .union(WatchMask::CLOSE_WRITE)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::ATTRIB)
    .union(WatchMask::DELETE)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::ONLYDIR)
    .union(WatchMask::DONT_FOLLOW);

pub(super) struct Watcher {
    state: Mutex<State>,
}

struct State {
    inotify: Inotify,
    buffer: Vec<u8>,
    /// Events read so far: a call's mark.
    seq: u64,
    /// Each watched directory: its session and its path in the workspace
    /// (`""` or `"a/b/"`).
    dirs: HashMap<WatchDescriptor, (String, String)>,
    workspaces: HashMap<String, Watched>,
    /// Workspaces watched anew so far: each one's number in its token.
    watches: u64,
}

/// A workspace being watched.
struct Watched {
    /// Which session object it is watched for (a session closed and made
    /// again under its id is another one, with a new directory).
    owner: usize,
    root: PathBuf,
    /// Its calls running now; the files written while none runs are no
    /// call's and are not kept.
    calls: usize,
    /// The session's own: told of every event of the workspace.
    changes: tokio::sync::watch::Sender<u64>,
    /// Files written while calls ran, with the event's number.
    written: HashMap<String, u64>,
    /// Events since this one cannot be told (a directory could not be
    /// watched or was replaced, the kernel's queue overflowed): the calls
    /// running then list what changed since they started.
    lost: Option<u64>,
    /// A directory of it could not be watched (the watch limit): its calls
    /// walk it from now on, without trying again each call.
    walked: bool,
    /// Which watch of the process this is, and the events of its visible
    /// files and folders since: its token ([`Watcher::token`]).
    watch: u64,
    visible: u64,
}

impl Watcher {
    fn new() -> Option<Watcher> {
        let inotify = match Inotify::init() {
            Ok(inotify) => inotify,
            Err(e) => {
                tracing::warn!(error = %e, "no inotify: the files a call writes are found by walking its workspace");
                return None;
            }
        };
        let fd = inotify.as_raw_fd();
        std::thread::Builder::new()
            .name("toolhost-writes".into())
            .spawn(move || drain_forever(fd))
            .ok()?;
        Some(Watcher {
            state: Mutex::new(State {
                inotify,
                buffer: vec![0; 64 << 10],
                seq: 0,
                dirs: HashMap::new(),
                workspaces: HashMap::new(),
                watches: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Session `session`'s calls running and files kept for them.
    #[cfg(test)]
    pub(super) fn counts(&self, session: &str) -> (usize, usize) {
        let state = self.lock();
        let watched = &state.workspaces[session];
        (watched.calls, watched.written.len())
    }

    /// A call of `session` starts (counted when `call`, else only watched):
    /// the events read so far, its workspace watched (made so on its first
    /// call when `anew`; else none for a workspace not watched yet); none
    /// when it cannot be.
    pub(super) fn start(&self, session: &Session, anew: bool, call: bool) -> Start {
        let mut state = self.lock();
        state.drain();
        let owner = owner_of(session);
        // Watched anew: first call, another session object under the id, or
        // writes lost while no call of it runs.
        let stale = state
            .workspaces
            .get(session.id())
            .is_none_or(|w| w.owner != owner || (w.lost.is_some() && w.calls == 0 && !w.walked));
        if stale && !anew {
            return Start::Watch;
        }
        if stale {
            state.unwatch(session.id());
            state.watches += 1;
            let watch = state.watches;
            let root = session.workspace_path().to_path_buf();
            state.workspaces.insert(
                session.id().to_owned(),
                Watched {
                    owner,
                    root: root.clone(),
                    calls: 0,
                    changes: session.changes.clone(),
                    written: HashMap::new(),
                    lost: None,
                    walked: false,
                    watch,
                    visible: 0,
                },
            );
            state.watch_tree(session.id(), &root, "");
        }
        let seq = state.seq;
        match state.workspaces.get_mut(session.id()) {
            Some(watched) if watched.lost.is_none() => {
                watched.calls += usize::from(call);
                Start::Told(seq)
            }
            _ => Start::Walk,
        }
    }

    /// The token of `session`'s workspace, watched already: this process's
    /// mark, which watch, and its visible events; none while its writes
    /// cannot all be told.
    pub(super) fn token(&self, session: &Session) -> Option<String> {
        // This process's mark: random, like a session id.
        static PROCESS: OnceLock<String> = OnceLock::new();
        let process = PROCESS.get_or_init(super::new_id);
        let mut state = self.lock();
        state.drain();
        let watched = state.workspaces.get(session.id())?;
        (watched.owner == owner_of(session) && watched.lost.is_none() && !watched.walked)
            .then(|| format!("{process}-{}-{}", watched.watch, watched.visible))
    }

    /// The call of `session` that started at `since` ends: its workspace,
    /// and the paths of the files written since, sorted; none when some of
    /// its writes could not be told.
    pub(super) fn finish(&self, session: &Session, since: u64) -> Option<(PathBuf, Vec<String>)> {
        let mut state = self.lock();
        state.drain();
        let watched = state.workspaces.get_mut(session.id())?;
        let lost = watched.lost.is_some_and(|at| at > since);
        let mut paths: Vec<String> = watched
            .written
            .iter()
            .filter(|(path, seq)| **seq > since && !hidden(path))
            .map(|(path, _)| path.clone())
            .take(MAX_TOLD)
            .collect();
        let root = watched.root.clone();
        drop(state);
        if lost {
            return None;
        }
        paths.sort();
        Some((root, paths))
    }

    /// A call of session `session` (object `owner`) ended: what was written
    /// while none runs is kept no longer.
    fn end_call(&self, session: &str, owner: usize) {
        let mut state = self.lock();
        if let Some(watched) = state.workspaces.get_mut(session)
            && watched.owner == owner
        {
            watched.calls = watched.calls.saturating_sub(1);
            if watched.calls == 0 {
                watched.written.clear();
            }
        }
    }

    /// Session object `session` is gone: its watches removed.
    fn forget(&self, session: &Session) {
        let mut state = self.lock();
        if state
            .workspaces
            .get(session.id())
            .is_some_and(|w| w.owner == owner_of(session))
        {
            state.unwatch(session.id());
        }
    }
}

/// Which session object: its address, unique while it lives.
pub(super) fn owner_of(session: &Session) -> usize {
    std::ptr::from_ref(session) as usize
}

impl State {
    /// Stop watching `session`'s workspace.
    fn unwatch(&mut self, session: &str) {
        if self.workspaces.remove(session).is_none() {
            return;
        }
        let wds: Vec<WatchDescriptor> = self
            .dirs
            .iter()
            .filter(|(_, (s, _))| s == session)
            .map(|(wd, _)| wd.clone())
            .collect();
        let mut watches = self.inotify.watches();
        for wd in wds {
            self.dirs.remove(&wd);
            // Gone with its directory already: nothing to remove.
            let _ = watches.remove(wd);
        }
    }

    /// Read every event the kernel holds now.
    fn drain(&mut self) {
        let mut buffer = std::mem::take(&mut self.buffer);
        loop {
            let events: Vec<(WatchDescriptor, EventMask, Option<String>)> =
                match self.inotify.read_events(&mut buffer) {
                    Ok(events) => events
                        .map(|e| (e.wd, e.mask, e.name.map(name_of)))
                        .collect(),
                    // WouldBlock: nothing more now.
                    Err(_) => break,
                };
            for (wd, mask, name) in events {
                self.seq += 1;
                self.take(wd, mask, name);
            }
        }
        self.buffer = buffer;
    }

    /// One event.
    fn take(&mut self, wd: WatchDescriptor, mask: EventMask, name: Option<String>) {
        let seq = self.seq;
        if mask.contains(EventMask::Q_OVERFLOW) {
            for watched in self.workspaces.values_mut() {
                watched.lost = Some(seq);
                watched.visible += 1;
                watched.changes.send_modify(told);
            }
            tracing::warn!(
                "the kernel's queue of workspace writes overflowed: calls running now list no written files"
            );
            return;
        }
        if mask.contains(EventMask::IGNORED) {
            // The workspace's own directory gone (closed, or replaced: a
            // hot-pool node's folder moved into its place): the writes of
            // calls running now cannot all be told, and the next call
            // watches it anew.
            if let Some((session, prefix)) = self.dirs.remove(&wd)
                && let Some(watched) = self.workspaces.get_mut(&session)
            {
                if prefix.is_empty() {
                    watched.lost = Some(seq);
                }
                watched.visible += 1;
                watched.changes.send_modify(told);
            }
            return;
        }
        let Some((session, dir)) = self.dirs.get(&wd) else {
            return;
        };
        if let Some(watched) = self.workspaces.get_mut(session) {
            watched.changes.send_modify(told);
            // An index a tool keeps under a hidden folder changes no token.
            let path = match &name {
                Some(name) => format!("{dir}{name}"),
                None => dir.trim_end_matches('/').to_owned(),
            };
            if !hidden(&path) {
                watched.visible += 1;
            }
        }
        let Some(name) = name else {
            return;
        };
        let (session, path) = (session.clone(), format!("{dir}{name}"));
        if mask.contains(EventMask::ISDIR) {
            // A directory made or moved in: watched, and what it holds
            // already counts as written.
            if mask.intersects(EventMask::CREATE | EventMask::MOVED_TO)
                && let Some(root) = self.workspaces.get(&session).map(|w| w.root.clone())
            {
                let files = self.watch_tree(&session, &root.join(&path), &format!("{path}/"));
                for file in files {
                    self.note(&session, file, seq);
                }
            }
            return;
        }
        if mask.intersects(EventMask::DELETE | EventMask::MOVED_FROM) {
            if let Some(watched) = self.workspaces.get_mut(&session) {
                watched.written.remove(&path);
            }
            return;
        }
        self.note(&session, path, seq);
    }

    /// File `path` of `session` was written at event `seq`.
    fn note(&mut self, session: &str, path: String, seq: u64) {
        if let Some(watched) = self.workspaces.get_mut(session)
            && watched.calls > 0
        {
            watched.written.insert(path, seq);
        }
    }

    /// Watch directory `dir` (at `prefix` in `session`'s workspace) and
    /// every directory under it; returns the files found there. A
    /// directory that cannot be watched makes the workspace's writes lost.
    fn watch_tree(&mut self, session: &str, dir: &Path, prefix: &str) -> Vec<String> {
        let mut files = Vec::new();
        let mut stack = vec![(dir.to_path_buf(), prefix.to_owned())];
        while let Some((dir, prefix)) = stack.pop() {
            match self.inotify.watches().add(&dir, FILE_EVENTS) {
                // Moved within the workspace: the same descriptor, a new path.
                Ok(wd) => {
                    self.dirs.insert(wd, (session.to_owned(), prefix.clone()));
                }
                Err(e) => {
                    // Gone already (made and removed by the call): nothing to watch.
                    if e.kind() == std::io::ErrorKind::NotFound {
                        continue;
                    }
                    tracing::warn!(session, dir = %dir.display(), error = %e, "cannot watch a workspace directory: its calls' written files are found by walking");
                    if let Some(watched) = self.workspaces.get_mut(session) {
                        watched.lost = Some(self.seq);
                        watched.walked = true;
                    }
                    continue;
                }
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = format!("{prefix}{}", name_of(&entry.file_name()));
                if kind.is_dir() {
                    stack.push((entry.path(), format!("{path}/")));
                } else if kind.is_file() && files.len() < MAX_TOLD {
                    files.push(path);
                }
            }
        }
        files
    }
}

/// One more event told to a workspace's watchers.
fn told(n: &mut u64) {
    *n = n.wrapping_add(1);
}

/// Whether any part of `path` is hidden (a dot name): a tool's index, whose
/// writes are no call's written files and change no workspace token.
pub(super) fn hidden(path: &str) -> bool {
    path.split('/').any(|part| part.starts_with('.'))
}

fn name_of(name: &OsStr) -> String {
    name.to_string_lossy().into_owned()
}

/// The watcher's thread: read events as they come, so that the kernel's
/// queue does not overflow between calls.
fn drain_forever(fd: i32) {
    loop {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; the descriptor lives as long as the
        // process's watcher (a static).
        let ready = unsafe { libc::poll(&mut poll, 1, -1) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                tracing::warn!(error = %e, "the workspace writes' watcher stopped");
                return;
            }
            continue;
        }
        if let Some(Some(watcher)) = WATCHER.get() {
            watcher.lock().drain();
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Only a session a call watched is known to the watcher, and only
        // once the watcher was made.
        if let Some(Some(watcher)) = WATCHER.get() {
            watcher.forget(self);
        }
    }
}
