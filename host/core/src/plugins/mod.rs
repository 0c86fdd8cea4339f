//! The plugins directory, kept in step with the catalog, for every backend.
//!
//! [`PluginManager`] owns the path from an entry of the directory to a served
//! toolkit, whatever its kind: each [`Backend`] claims its entries (a
//! `.wasm` + manifest, a Docker toolkit folder, ...), lists their files and
//! loads them; the manager notices what changed (size and time, then content
//! hashes), has the backend load it off the request path, and swaps it into
//! the catalog in one atomic step. Calls in flight finish on the version they
//! started with; new calls get the new one. An entry that does not load
//! leaves the previous version serving and its error visible in its status.
//!
//! Every change goes through [`PluginManager::reconcile`], whether start-up,
//! the directory watcher ([`watch`]) or the admin API ([`admin`]) made it;
//! changes to one entry are serialised by a lock per entry, different
//! entries load in parallel.

pub mod admin;
pub mod config;
mod entries;
mod status;
pub mod watch;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::backend::{Backend, EntryFile, Loaded};
use crate::catalog::{Catalog, ToolkitEntry};
use crate::tool;
pub use admin::ChangeError;
use entries::{Common, files_of, identity, manifest_common, read_all, stamps};
use status::Stamps;
pub use status::{PluginStatus, Progress, State};

/// An entry: its name and the backend that claims it.
type Key = (String, &'static str);

/// The plugins directory and its loaded entries.
pub struct PluginManager {
    dir: PathBuf,
    /// In the order entries are loaded at start-up (a name taken by an
    /// earlier backend cannot be taken by a later one).
    backends: Vec<Arc<dyn Backend>>,
    /// The backends' folder kinds, in their order ([`folder_owner`]).
    kinds: Arc<[&'static str]>,
    catalog: Arc<Catalog>,
    status: Arc<Mutex<BTreeMap<Key, PluginStatus>>>,
    locks: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// Milliseconds to two decimals.
fn rounded_ms(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 100_000.0).round() / 100.0
}

fn short(version: Option<&str>) -> &str {
    version.map_or("none", |v| &v[..v.len().min(12)])
}

impl PluginManager {
    pub fn new(dir: &Path, backends: Vec<Arc<dyn Backend>>, catalog: Arc<Catalog>) -> Arc<Self> {
        let kinds = backends.iter().filter_map(|b| b.folder_kind()).collect();
        let manager = Arc::new(PluginManager {
            dir: dir.to_owned(),
            kinds,
            backends,
            catalog,
            status: Arc::default(),
            locks: Mutex::new(HashMap::new()),
        });
        for backend in &manager.backends {
            let (weak, kind) = (Arc::downgrade(&manager), backend.name());
            backend.attach(crate::backend::Refresh::new(move |name: &str| {
                if let Some(manager) = weak.upgrade() {
                    let name = name.to_owned();
                    tokio::spawn(async move { manager.refresh(&name, kind).await });
                }
            }));
        }
        manager
    }

    /// Load entry `name` of backend `kind` again although its files did not
    /// change: what the backend serves from them did (an MCP server's tool
    /// list). Calls in flight finish on the old version, as for any swap.
    pub async fn refresh(&self, name: &str, kind: &'static str) {
        let key: Key = (name.to_owned(), kind);
        let lock = self.entry_lock(&key);
        let _guard = lock.lock().await;
        if self.get_key(&key).is_none() {
            return;
        }
        // Forget what was loaded, so the reconcile loads it again.
        self.update(&key, |s| s.files = None);
        self.reconcile_locked(&key).await;
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// File `path` under the directory was just written whole or moved into
    /// place: each backend may start on it ([`Backend::arrived`]).
    pub fn arrived(&self, path: &Path) {
        for backend in &self.backends {
            backend.arrived(path);
        }
    }

    fn backend(&self, name: &str) -> Option<&Arc<dyn Backend>> {
        self.backends.iter().find(|b| b.name() == name)
    }

    /// Bring every backend's gauges in `metrics` up to date.
    pub fn observe(&self, metrics: &crate::metrics::Metrics) {
        for backend in &self.backends {
            backend.observe(metrics);
        }
    }

    /// Each backend's allocations of the host, by backend name.
    pub fn resources(&self) -> serde_json::Map<String, serde_json::Value> {
        self.backends
            .iter()
            .filter_map(|b| Some((b.name().to_owned(), b.resources()?)))
            .collect()
    }

    /// Every entry's status, sorted by name (then backend).
    pub fn list(&self) -> Vec<PluginStatus> {
        let statuses: Vec<PluginStatus> = self.lock_status().values().cloned().collect();
        statuses.iter().map(|s| self.shown(s)).collect()
    }

    /// The status of entry `name` (the first backend's, if several claim
    /// the name).
    pub fn get(&self, name: &str) -> Option<PluginStatus> {
        let found = self
            .lock_status()
            .values()
            .find(|s| s.name == name)
            .cloned();
        found.map(|s| self.shown(&s))
    }

    fn get_key(&self, key: &Key) -> Option<PluginStatus> {
        self.lock_status().get(key).cloned()
    }

    fn shown(&self, s: &PluginStatus) -> PluginStatus {
        let problem = (s.state == State::Ready)
            .then(|| self.backend(s.backend)?.problem(&s.name))
            .flatten();
        s.shown(problem)
    }

    fn lock_status(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, PluginStatus>> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, key: &Key, f: impl FnOnce(&mut PluginStatus)) {
        let mut map = self.lock_status();
        f(map
            .entry(key.clone())
            .or_insert_with(|| PluginStatus::new(&key.0, key.1)));
    }

    fn entry_lock(&self, key: &Key) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        locks.entry(key.clone()).or_default().clone()
    }

    /// Record the phase of entry `key`'s load.
    fn phase(&self, key: &Key, phase: &'static str) {
        tracing::debug!(plugin = key.0, backend = key.1, phase, "load phase");
        self.update(key, |s| {
            if let Some(p) = &mut s.progress {
                p.phase = phase;
            }
        });
    }

    /// Mark entry `key` (of `bytes`) as compiling: listed at once, and, with
    /// no version serving yet, its tools pending in the catalog (a call
    /// waits for them).
    fn begin(&self, key: &Key, bytes: Option<u64>) {
        let mut serving = false;
        self.update(key, |s| {
            s.state = State::Compiling;
            s.since = Some(Instant::now());
            s.progress = Some(Progress {
                phase: "queued",
                elapsed_ms: 0,
                bytes,
            });
            serving = s.version.is_some();
        });
        if !serving {
            self.catalog.set_pending(&key.0, true);
        }
    }

    /// The load of entry `key` ended (its state says how, or it is gone).
    fn end(&self, key: &Key) {
        if let Some(s) = self.lock_status().get_mut(key) {
            s.progress = None;
            s.since = None;
        }
        self.catalog.set_pending(&key.0, false);
    }

    /// List every entry of the directory as compiling (its tools pending in
    /// the catalog, so a call waits for them), before anything loads: done
    /// before the server answers, so `/health/ready` and the catalog never
    /// see an empty directory that is not. Returns the entries in load order
    /// for [`PluginManager::load_marked`].
    pub fn mark_all(&self) -> std::io::Result<Vec<Key>> {
        let mut keys: Vec<(usize, u64, Key)> = self
            .entries_on_disk()?
            .into_iter()
            .map(|key| {
                let backend = self.backends.iter().position(|b| b.name() == key.1);
                let size = self.size_of(&key);
                (backend.unwrap_or(0), size, key)
            })
            .collect();
        keys.sort();
        for (_, size, key) in &keys {
            self.begin(key, Some(*size));
        }
        Ok(keys.into_iter().map(|(_, _, key)| key).collect())
    }

    /// Load the entries [`PluginManager::mark_all`] listed: each backend's in
    /// turn (so a name an earlier backend holds stays its), in parallel
    /// within a backend (compiles are bounded by the backend), smallest
    /// first, so small tools are served soonest. Then backends prune what no
    /// entry uses.
    ///
    /// Entries of different kinds with one name: the one there first (its
    /// files' newest change is the oldest) loads, whatever the backends'
    /// order; the others are then refused with both names, before anything
    /// of theirs is loaded.
    pub async fn load_marked(self: &Arc<Self>, keys: Vec<Key>) {
        let later = self.latecomers(&keys);
        for backend in &self.backends {
            let mine = keys
                .iter()
                .filter(|key| key.1 == backend.name() && !later.contains(key));
            futures::future::join_all(mine.map(|key| self.reconcile_entry(key))).await;
        }
        for key in &later {
            self.reconcile_entry(key).await;
        }
        self.scanned();
    }

    /// Load every entry of the directory ([`PluginManager::mark_all`], then
    /// [`PluginManager::load_marked`]).
    pub async fn load_all(self: &Arc<Self>) -> std::io::Result<()> {
        let keys = self.mark_all()?;
        self.load_marked(keys).await;
        Ok(())
    }

    /// Tell each backend which versions its entries serve (it may prune).
    pub fn scanned(&self) {
        for backend in &self.backends {
            let versions: HashSet<String> = self
                .lock_status()
                .values()
                .filter(|s| s.backend == backend.name())
                .filter_map(|s| s.version.clone())
                .collect();
            backend.scanned(&versions);
        }
    }

    /// Bring every entry named `name` in line with the directory.
    pub async fn reconcile(&self, name: &str) {
        // Which backends find files of `name` (looked up off the worker).
        let (backends, dir, owned) = (self.backends.clone(), self.dir.clone(), name.to_owned());
        let kinds = self.kinds.clone();
        let on_disk: Vec<&'static str> = tokio::task::spawn_blocking(move || {
            backends
                .iter()
                .filter(|b| !files_of(&***b, &kinds, &dir, &owned).is_empty())
                .map(|b| b.name())
                .collect()
        })
        .await
        .unwrap_or_default();
        for backend in self.backends.clone() {
            let key: Key = (name.to_owned(), backend.name());
            if self.get_key(&key).is_some() || on_disk.contains(&key.1) {
                self.reconcile_entry(&key).await;
            }
        }
    }

    /// Bring entry `key` in line with the directory: load what changed,
    /// unload what is gone, leave alone what is the same.
    async fn reconcile_entry(&self, key: &Key) {
        let lock = self.entry_lock(key);
        let _guard = lock.lock().await;
        self.reconcile_locked(key).await;
        // Whatever happened (loaded, failed, unchanged, gone), the load
        // marked by `begin` (start-up, or `install`) is over.
        self.end(key);
    }

    async fn reconcile_locked(&self, key: &Key) {
        let Some(backend) = self.backend(key.1).cloned() else {
            return;
        };
        // The directory is read, and the files hashed, on a blocking thread:
        // a large `.wasm` must not stall an async worker.
        let (dir, name, lister) = (self.dir.clone(), key.0.clone(), backend.clone());
        let kinds = self.kinds.clone();
        let on_disk = tokio::task::spawn_blocking(move || {
            let paths = files_of(&*lister, &kinds, &dir, &name);
            let stamps = stamps(&paths);
            (paths, stamps)
        })
        .await;
        let Ok((paths, stamps)) = on_disk else {
            return;
        };
        if paths.is_empty() {
            self.unload(key, "its files are gone");
            return;
        }
        let untouched = self
            .get_key(key)
            .is_some_and(|s| s.files.is_some() && s.stamps.as_ref() == Some(&stamps));
        if untouched {
            return;
        }
        let started = std::time::Instant::now();
        let read = tokio::task::spawn_blocking(move || {
            read_all(&paths).map(|files| {
                let identity = identity(&files);
                (files, identity)
            })
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        tracing::debug!(
            plugin = key.0,
            backend = key.1,
            ms = started.elapsed().as_secs_f64() * 1e3,
            "files read and hashed"
        );
        let (files, identity) = match read {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(plugin = key.0, backend = key.1, error = %e, "cannot read plugin files");
                self.update(key, |s| {
                    s.state = State::Failed;
                    s.error = Some(format!("cannot read its files: {e}"));
                    s.files = None;
                    s.stamps = None;
                });
                return;
            }
        };
        let unchanged = self
            .get_key(key)
            .is_some_and(|s| s.files.as_deref() == Some(identity.as_str()));
        if unchanged {
            self.update(key, |s| s.stamps = Some(stamps));
            return;
        }
        if let Err(e) = self.install(key, &backend, files, identity, stamps).await {
            // Also how a file still being written ends: not yet valid. The
            // write's own events bring it back here once it is complete.
            tracing::debug!(plugin = key.0, error = %e, "reload failed");
        }
    }

    /// Load `files` as entry `key` and swap it in. On failure the previous
    /// version keeps serving and the status records the error.
    async fn install(
        &self,
        key: &Key,
        backend: &Arc<dyn Backend>,
        files: Vec<EntryFile>,
        identity: String,
        stamps: Stamps,
    ) -> Result<PluginStatus, ChangeError> {
        let old = self.get_key(key).and_then(|s| s.version);
        let bytes: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
        if self.get_key(key).is_none_or(|s| s.progress.is_none()) {
            self.begin(key, Some(bytes));
        }
        self.update(key, |s| {
            s.files = Some(identity);
            s.stamps = Some(stamps);
            if let Some(p) = &mut s.progress {
                p.bytes = Some(bytes);
            }
        });
        let report = |phase| self.phase(key, phase);
        let common = manifest_common(&key.0, &files);
        // A name another kind of entry holds is refused before anything of
        // this one is loaded (no node or server is started for it).
        if let Some(other) = self.catalog.holder_of(&key.0).filter(|o| *o != key.1) {
            let result = Err(ChangeError::Load {
                name: key.0.clone(),
                message: format!(
                    "the name `{name}` is taken by the {other} entry `{name}`, which was there first; \
                     this {kind} entry is not loaded (rename one of them)",
                    name = key.0,
                    kind = key.1,
                ),
            });
            return self.finish_install(key, old, result);
        }
        let result = match backend.load(&key.0, files, &report).await {
            Ok(loaded) => self.register(key, backend, loaded, common),
            Err(message) => Err(ChangeError::Load {
                name: key.0.clone(),
                message,
            }),
        };
        self.finish_install(key, old, result)
    }

    /// Log and record how loading entry `key` (replacing version `old`) ended.
    fn finish_install(
        &self,
        key: &Key,
        old: Option<String>,
        result: Result<PluginStatus, ChangeError>,
    ) -> Result<PluginStatus, ChangeError> {
        match &result {
            Ok(status) => tracing::info!(
                plugin = key.0,
                backend = key.1,
                from = short(old.as_deref()),
                to = short(status.version.as_deref()),
                compile_ms = status.compile_ms,
                source = status.source,
                tools = ?status.tools,
                "plugin loaded"
            ),
            Err(e) => {
                tracing::warn!(plugin = key.0, backend = key.1, serving = short(old.as_deref()), error = %e, "plugin not loaded; the previous version (if any) keeps serving");
                self.update(key, |s| {
                    s.state = State::Failed;
                    s.error = Some(e.to_string());
                });
            }
        }
        result
    }

    /// Swap `loaded` into the catalog as entry `key`.
    fn register(
        &self,
        key: &Key,
        backend: &Arc<dyn Backend>,
        loaded: Loaded,
        common: Common,
    ) -> Result<PluginStatus, ChangeError> {
        let name = &key.0;
        let ids: Vec<String> = loaded
            .tools
            .iter()
            .map(|t| tool::tool_id(name, &t.name))
            .collect();
        let version = loaded.version.clone();
        let compile = loaded.compile;
        let better = loaded.better;
        let mut warnings = loaded.warnings;
        warnings.extend(entries::check_fallbacks(
            &self.catalog,
            name,
            &loaded.tools,
            &common.fallback,
        )?);
        let provenance = loaded.provenance;
        let replaced = self.get_key(key).is_some_and(|s| s.version.is_some());
        let mut entry = ToolkitEntry::new(
            backend.clone(),
            name.clone(),
            loaded.description,
            loaded.version,
            loaded.limits,
            loaded.toolkit,
        );
        entry.category = common.category;
        entry.health = common.health;
        entry.fallback = common.fallback;
        self.catalog
            .register(entry, loaded.tools)
            .map_err(|e| ChangeError::Register {
                name: name.clone(),
                message: e.to_string(),
            })?;
        if replaced {
            backend.unloaded(name, true);
            crate::system::give_back_memory();
        }
        let mut done = None;
        self.update(key, |s| {
            s.state = State::Ready;
            s.version = Some(version.clone());
            s.loaded_at = Some(now_ms());
            s.tools = ids;
            s.error = None;
            s.warnings = warnings;
            s.provenance = provenance;
            s.compile_ms = compile.map(|(t, _)| rounded_ms(t));
            s.source = compile.map(|(_, source)| source);
            done = Some(s.clone());
        });
        if let Some(better) = better {
            self.follow_better(key, version, better);
        }
        Ok(done.expect("status updated"))
    }

    /// When the calls of entry `key` at `version` move to a better build
    /// (Cranelift's behind Winch's), its status shows that build's compile
    /// time and source.
    fn follow_better(
        &self,
        key: &Key,
        version: String,
        better: tokio::sync::oneshot::Receiver<(std::time::Duration, &'static str)>,
    ) {
        let (status, key) = (self.status.clone(), key.clone());
        tokio::spawn(async move {
            let Ok((took, source)) = better.await else {
                return;
            };
            let mut map = status.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = map.get_mut(&key)
                && s.version.as_deref() == Some(version.as_str())
            {
                s.compile_ms = Some(rounded_ms(took));
                s.source = Some(source);
            }
        });
    }

    /// Entry `key` is gone: its tools leave the catalog (only if its backend
    /// registered them) and its backend releases what it holds.
    fn unload(&self, key: &Key, why: &str) {
        let removed = self.catalog.remove_backend(&key.0, key.1);
        let old = self.lock_status().remove(key);
        if removed && let Some(backend) = self.backend(key.1) {
            backend.unloaded(&key.0, false);
        }
        if removed {
            crate::system::give_back_memory();
        }
        if removed || old.is_some() {
            let version = old.and_then(|s| s.version);
            tracing::info!(
                plugin = key.0,
                backend = key.1,
                from = short(version.as_deref()),
                to = "none",
                "plugin unloaded: {why}"
            );
        }
    }

    /// Release every backend's resources (graceful shutdown).
    pub async fn shutdown(&self) {
        for backend in &self.backends {
            backend.shutdown().await;
        }
    }
}
