//! Sessions: an id, a workspace directory, and one lifecycle for every
//! surface: open, touch, release, close, reap.
//!
//! A session is named by its client (header `x-toolhost-session`, the XAgent
//! cookie `node_id`, or `Mcp-Session-Id`) or created on its first call, and
//! belongs to its [`Caller`]: the id a client sends is looked up in its
//! caller's namespace only ([`Caller::session_key`]), so another caller's
//! session answers as one never made, and two callers' workspaces are two
//! directories. A surface finds the id in its protocol and asks here: [`Sessions::hold`]
//! (open or make, and what becomes of a request's own session when the
//! request ends), [`Sessions::resume`] (an existing one only), and
//! [`Sessions::close`] / [`Sessions::close_later`]. Its
//! workspace, `<data>/workspaces/<key>`, is created on first use; wasm file
//! tools see it as a preopened directory and Docker nodes mount it at
//! /workspace. What backends hold for a session (Docker nodes) is released
//! through [`SessionResources`], registered once: closing a session from any
//! surface, or reaping it, releases its resources and deletes its workspace
//! the same way, here.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use crate::callers::{self, Caller};

/// Longest session id accepted from a client.
pub const MAX_SESSION_ID_LEN: usize = 64;

/// True for a session id a client may send: `^[A-Za-z0-9_-]{1,64}$`. The id is a
/// directory name, so nothing else (no `.`, no `/`) is allowed.
pub fn is_valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_SESSION_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("invalid session id: use 1 to 64 letters, digits, `_` or `-`")]
    InvalidId,
    /// `[sessions] max_sessions` are open: no new one until some close.
    #[error(
        "too many sessions ({0} open, the server's limit): close sessions you no longer need, or retry later"
    )]
    TooMany(usize),
    /// The caller has its policy's fill of open sessions.
    #[error(
        "this caller has {0} sessions open, its limit: close sessions it no longer needs, or retry later"
    )]
    CallerTooMany(usize),
    #[error("cannot create the session workspace: {0}")]
    Workspace(#[from] io::Error),
    /// [`Sessions::resume`]: no open session has this id.
    #[error("unknown session `{0}` (closed, released or expired)")]
    Unknown(String),
}

/// What becomes of a session a request opened for itself (it named none)
/// when the request ends ([`Sessions::hold`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unnamed {
    /// Forgotten unless its call made the workspace: the id, sent back to
    /// the caller, stays valid, and such calls never pile up towards
    /// `max_sessions` (the native surface).
    KeepIfUsed,
    /// Closed: nobody can name it again (an MCP request of the stateless
    /// revision without `X-Toolhost-Session`).
    Close,
}

/// A session held for one request. When the request opened it for itself,
/// dropping the hold ends it as its [`Unnamed`] says.
pub struct Held {
    session: Option<Arc<Session>>,
    temporary: Option<(Arc<Sessions>, Unnamed)>,
}

impl Held {
    pub fn session(&self) -> &Arc<Session> {
        self.session.as_ref().expect("held until dropped")
    }

    /// Whether the request opened this session for itself.
    pub fn is_temporary(&self) -> bool {
        self.temporary.is_some()
    }
}

impl std::ops::Deref for Held {
    type Target = Arc<Session>;
    fn deref(&self) -> &Arc<Session> {
        self.session()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let (Some(session), Some((sessions, unnamed))) =
            (self.session.take(), self.temporary.take())
        else {
            return;
        };
        match unnamed {
            Unnamed::KeepIfUsed => sessions.forget_if_untouched(session),
            Unnamed::Close => sessions.close_later(session),
        }
    }
}

/// One session.
pub struct Session {
    /// Unique among all callers' sessions: the workspace's directory name,
    /// and what backends hold resources under ([`Caller::session_key`]).
    id: String,
    /// The id its caller names it by.
    client_id: String,
    /// Set when made, or, for a workspace adopted at start-up, when its
    /// caller first opens it again.
    owner: OnceLock<Caller>,
    workspace: PathBuf,
    created: OnceLock<Result<(), String>>,
    /// Milliseconds since the manager's epoch at the last call.
    last_used: AtomicU64,
    /// ... when the workspace's modification time last said so.
    marked: AtomicU64,
    /// What the session's calls log for its clients (plugin logs, Docker
    /// nodes' notes): bounded, a slow listener loses the oldest records.
    /// Made by the first listener: a record sent before any is heard by
    /// nobody either way, and most sessions (a request's own) never have one.
    logs: OnceLock<tokio::sync::broadcast::Sender<LogRecord>>,
    /// Told of each write to the workspace while it is watched
    /// ([`Session::watch_changes`]).
    changes: tokio::sync::watch::Sender<u64>,
    /// Its workspace may be written where this kernel does not tell
    /// (another replica, a remote node): [`Session::workspace_token`] none.
    untold: std::sync::atomic::AtomicBool,
}

/// A log record of one of a session's calls, for the session's clients
/// (MCP `notifications/message`).
#[derive(Debug, Clone)]
pub struct LogRecord {
    pub level: tracing::Level,
    /// Who wrote it: `<plugin>/<tool>`, or a Docker toolkit.
    pub logger: String,
    pub message: String,
}

/// A regular file of a session's workspace ([`Session::files`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceFile {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    pub size: u64,
    pub modified: Option<SystemTime>,
}

impl WorkspaceFile {
    /// File `path` as `meta` describes it (size 0, no time, without).
    fn of(path: String, meta: Option<&std::fs::Metadata>) -> Self {
        WorkspaceFile {
            path,
            size: meta.map_or(0, |m| m.len()),
            modified: meta.and_then(|m| m.modified().ok()),
        }
    }
}

/// Log records a session keeps for a listener that is behind.
const LOG_BUFFER: usize = 64;

impl Session {
    /// The session's key: unique among all callers' sessions (what
    /// backends, logs and the workspace's directory use).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The id its caller names it by (what a surface sends back).
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The caller it belongs to (the anonymous caller's policy for a
    /// workspace adopted at start-up that nobody has opened since).
    pub fn owner(&self) -> &Caller {
        static NOBODY: LazyLock<Caller> = LazyLock::new(Caller::anonymous);
        self.owner.get().unwrap_or(&NOBODY)
    }

    /// The namespace of its caller (none: the anonymous caller's).
    fn space(&self) -> Option<&str> {
        callers::split_key(&self.id).0
    }

    /// The workspace directory, created on first use.
    pub fn workspace(&self) -> Result<&Path, SessionError> {
        let created = self
            .created
            .get_or_init(|| std::fs::create_dir_all(&self.workspace).map_err(|e| e.to_string()));
        match created {
            Ok(()) => Ok(&self.workspace),
            Err(e) => Err(SessionError::Workspace(io::Error::other(e.clone()))),
        }
    }

    /// The workspace directory, created on first use without blocking the
    /// async worker (what a call path uses; [`Session::workspace`] is for
    /// blocking threads).
    pub async fn prepare_workspace(&self) -> Result<&Path, SessionError> {
        if self.created.get().is_none() {
            let made = tokio::fs::create_dir_all(&self.workspace)
                .await
                .map_err(|e| e.to_string());
            // Two first calls may race: creating is idempotent, and the
            // first outcome recorded stands.
            let _ = self.created.set(made);
        }
        self.workspace()
    }

    /// Whether the workspace directory was made (by a call, an upload, or a
    /// previous run).
    pub fn has_workspace(&self) -> bool {
        matches!(self.created.get(), Some(Ok(())))
    }

    /// The workspace path, whether or not it exists yet.
    pub fn workspace_path(&self) -> &Path {
        &self.workspace
    }

    /// The workspace's regular files (no symlink followed), sorted by path,
    /// at most `max` (the walk stops there); none when the workspace does not
    /// exist yet. Blocking: call it where blocking is allowed.
    pub fn files(&self, max: usize) -> Vec<WorkspaceFile> {
        let mut out = Vec::new();
        let mut stack = vec![(self.workspace.clone(), String::new())];
        while let Some((dir, prefix)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if out.len() >= max {
                    break;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = format!("{prefix}{name}");
                if kind.is_dir() {
                    stack.push((entry.path(), format!("{path}/")));
                } else if kind.is_file() {
                    out.push(WorkspaceFile::of(path, entry.metadata().ok().as_ref()));
                }
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// Pass `record` to the session's log listeners, if any; never waits.
    pub fn log(&self, record: LogRecord) {
        if let Some(logs) = self.logs.get() {
            let _ = logs.send(record);
        }
    }

    /// Whether anyone listens to the session's log records now (a record
    /// nobody would hear need not be made).
    pub fn logs_heard(&self) -> bool {
        self.logs.get().is_some_and(|l| l.receiver_count() > 0)
    }

    /// Listen to the session's log records from now on.
    pub fn subscribe_logs(&self) -> tokio::sync::broadcast::Receiver<LogRecord> {
        self.logs
            .get_or_init(|| tokio::sync::broadcast::channel(LOG_BUFFER).0)
            .subscribe()
    }
}

/// What a backend holds for sessions (Docker nodes), released when a
/// session is released or closed.
pub trait SessionResources: Send + Sync {
    /// Release what session `id` holds; its workspace is not this call's.
    fn release_session(&self, id: &str) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// All sessions of a server.
pub struct Sessions {
    root: PathBuf,
    epoch: Instant,
    idle: Duration,
    map: Mutex<HashMap<String, Arc<Session>>>,
    /// Most sessions open at once (new ones are refused beyond).
    max: usize,
    resources: RwLock<Vec<Weak<dyn SessionResources>>>,
    /// Other replicas may serve these sessions (a shared registry).
    replicas: bool,
}

impl Sessions {
    /// Sessions whose workspaces live under `<data>/workspaces`. Workspaces left
    /// by a previous run are adopted as idle sessions, so they are reaped in turn.
    pub fn new(data: &Path, idle: Duration) -> io::Result<Self> {
        let root = data.join("workspaces");
        std::fs::create_dir_all(&root)?;
        let sessions = Sessions {
            root,
            epoch: Instant::now(),
            idle,
            map: Mutex::new(HashMap::new()),
            max: usize::MAX,
            resources: RwLock::default(),
            replicas: false,
        };
        for entry in std::fs::read_dir(&sessions.root)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(key) = name.to_str() else { continue };
            let (space, id) = callers::split_key(key);
            if !is_valid_session_id(id) || space.is_some_and(|s| !callers::is_valid_name(s)) {
                continue;
            }
            // Its caller is known by the namespace alone until it opens
            // the session again.
            let session = sessions.make(key.to_owned(), id, OnceLock::new());
            let _ = session.created.set(Ok(()));
            sessions.lock().insert(key.to_owned(), session);
        }
        Ok(sessions)
    }

    /// At most `max` sessions open at once.
    /// Where the workspaces live (`<data>/workspaces`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn with_max(mut self, max: usize) -> Self {
        self.max = max.max(1);
        self
    }

    /// Other replicas serve these sessions too: what they write to a
    /// workspace is not told here.
    pub fn with_replicas(mut self, replicas: bool) -> Self {
        self.replicas = replicas;
        self
    }

    /// Release `resources` of every session when it is released or closed
    /// (held weakly: a backend that is gone is skipped).
    pub fn add_resources(&self, resources: Weak<dyn SessionResources>) {
        self.resources
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(resources);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Session `id` (its key), named `client_id` by its caller, `owner`.
    fn make(&self, id: String, client_id: &str, owner: OnceLock<Caller>) -> Arc<Session> {
        Arc::new(Session {
            workspace: self.root.join(&id),
            id,
            client_id: client_id.to_owned(),
            owner,
            created: OnceLock::new(),
            last_used: AtomicU64::new(self.now_ms()),
            marked: AtomicU64::new(0),
            logs: OnceLock::new(),
            changes: tokio::sync::watch::Sender::new(0),
            untold: self.replicas.into(),
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// `caller`'s session `id` (created if new), or a new session of
    /// `caller` when `id` is none (its id: 128 random bits). Marks it used.
    /// Returns whether it was created.
    pub fn open(
        &self,
        caller: &Caller,
        id: Option<&str>,
    ) -> Result<(Arc<Session>, bool), SessionError> {
        let client_id = match id {
            Some(id) if is_valid_session_id(id) => id.to_owned(),
            Some(_) => return Err(SessionError::InvalidId),
            None => new_id(),
        };
        let key = caller.session_key(&client_id);
        let mut map = self.lock();
        if !map.contains_key(&key) {
            if map.len() >= self.max {
                return Err(SessionError::TooMany(map.len()));
            }
            let own = caller.policy().max_sessions;
            if own > 0 {
                let space = caller.space();
                let open = map.values().filter(|s| s.space() == space).count();
                if open >= own {
                    return Err(SessionError::CallerTooMany(open));
                }
            }
        }
        let mut created = false;
        let session = map
            .entry(key)
            .or_insert_with_key(|key| {
                created = true;
                self.make(key.clone(), &client_id, OnceLock::from(caller.clone()))
            })
            .clone();
        drop(map);
        if session.owner.get().is_none() {
            // Adopted at start-up: its caller is back.
            let _ = session.owner.set(caller.clone());
        }
        let now = self.now_ms();
        session.last_used.store(now, Ordering::Relaxed);
        self.mark_used(&session, now);
        Ok((session, created))
    }

    /// The session of one request: `id`'s (opened, so made if new and
    /// marked used), else one of its own that ends with the request as
    /// `unnamed` says. Every surface's requests open sessions here.
    pub fn hold(
        self: &Arc<Self>,
        caller: &Caller,
        id: Option<&str>,
        unnamed: Unnamed,
    ) -> Result<Held, SessionError> {
        let (session, _) = self.open(caller, id)?;
        Ok(Held {
            session: Some(session),
            temporary: id.is_none().then(|| (self.clone(), unnamed)),
        })
    }

    /// `caller`'s open session `id`, marked used; never makes one (XAgent's
    /// cookie names a session `/get_cookie` made). Another caller's session
    /// is unknown here, as one never made.
    pub fn resume(&self, caller: &Caller, id: &str) -> Result<Arc<Session>, SessionError> {
        if !is_valid_session_id(id) {
            return Err(SessionError::InvalidId);
        }
        let session = self
            .get(&caller.session_key(id))
            .ok_or_else(|| SessionError::Unknown(id.to_owned()))?;
        let now = self.now_ms();
        session.last_used.store(now, Ordering::Relaxed);
        self.mark_used(&session, now);
        Ok(session)
    }

    /// Close `session` in the background (from a `Drop`, or where nobody
    /// waits for it); a failure is logged.
    pub fn close_later(self: &Arc<Self>, session: Arc<Session>) {
        let id = session.id.clone();
        drop(session);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(session = %id, "no runtime to close the session: left to the reaper");
            return;
        };
        let sessions = self.clone();
        runtime.spawn(async move {
            match sessions.close(&id).await {
                Ok(_) => tracing::debug!(session = %id, "a request's own session closed"),
                Err(e) => {
                    tracing::warn!(session = %id, error = %e, "could not delete the workspace of a request's own session")
                }
            }
        });
    }

    /// Forget `session`, which a request opened for itself (it sent no
    /// session id), if it holds nothing: no workspace made, no other user.
    /// Its id stays valid (a later request with it opens it again, as empty
    /// as it was), and such calls never pile up towards `max_sessions`.
    fn forget_if_untouched(&self, session: Arc<Session>) {
        if session.created.get().is_some() {
            return;
        }
        let mut map = self.lock();
        let ours = map
            .get(&session.id)
            .is_some_and(|s| Arc::ptr_eq(s, &session));
        // The map's reference and ours: nobody else is using it.
        if ours && Arc::strong_count(&session) == 2 {
            map.remove(&session.id);
        }
    }

    /// The session whose key ([`Session::id`]) is `id`, if it exists.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.lock().get(id).cloned()
    }

    /// How long a session may stay unused before it is closed.
    pub fn idle_timeout(&self) -> Duration {
        self.idle
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Every open session of `caller` (of every caller when none), with how
    /// long each has been unused, most recently used first (`GET /sessions`,
    /// the console).
    pub fn list(&self, caller: Option<&Caller>) -> Vec<(Arc<Session>, Duration)> {
        let now = self.now_ms();
        let mut out: Vec<(Arc<Session>, Duration)> = self
            .lock()
            .values()
            .filter(|s| caller.is_none_or(|c| s.space() == c.space()))
            .map(|s| {
                let idle = now.saturating_sub(s.last_used.load(Ordering::Relaxed));
                (s.clone(), Duration::from_millis(idle))
            })
            .collect();
        out.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.id.cmp(&b.0.id)));
        out
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Release what backends hold for session `id` (its Docker nodes); the
    /// session and its workspace stay (XAgent's `/close_session`).
    pub async fn release(&self, id: &str) {
        let resources: Vec<Arc<dyn SessionResources>> = self
            .resources
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for r in resources {
            r.release_session(id).await;
        }
    }

    /// Close the session whose key is `id`: it is gone from now on, what backends hold for it
    /// is released, and its workspace deleted. The one close of every surface
    /// (native `DELETE /sessions/{id}`, XAgent's `/release_session`, the end
    /// of an MCP session) and of the reaper. False when there was none.
    pub async fn close(&self, id: &str) -> io::Result<bool> {
        let Some(session) = self.lock().remove(id) else {
            return Ok(false);
        };
        self.finish_close(&session).await?;
        Ok(true)
    }

    async fn finish_close(&self, session: &Session) -> io::Result<()> {
        self.release(&session.id).await;
        let workspace = session.workspace.clone();
        match tokio::task::spawn_blocking(move || remove_dir_if_exists(&workspace)).await {
            Ok(removed) => removed,
            // The runtime is shutting down and takes no more blocking work:
            // removed here rather than left behind.
            Err(e) if e.is_cancelled() => remove_dir_if_exists(&session.workspace),
            Err(e) => Err(io::Error::other(e)),
        }
    }
}

/// A server-made session id: 128 random bits, in hex, from the thread's
/// CSPRNG (ids are secrets a caller may come back with, and one is made for
/// every request that names none: no system call each).
fn new_id() -> String {
    let bytes: [u8; 16] = rand::Rng::random(&mut rand::rng());
    crate::text::hex(&bytes)
}

fn remove_dir_if_exists(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

mod changes;
mod config;
pub use config::SessionsConfig;
mod reap;
mod watcher;
mod writes;
pub use writes::{Before, MAX_WALKED_FILES};
#[cfg(test)]
mod tests;
