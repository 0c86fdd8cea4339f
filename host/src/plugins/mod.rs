//! The plugins directory, kept in step with the catalog.
//!
//! [`PluginManager`] owns the path from a file to a served toolkit: read
//! `<name>.wasm` (+ `<name>.toml`), validate and compile it off the request
//! path (the wasm backend's compile pool and cache), then swap it into the
//! catalog in one atomic step. Calls in flight finish on the version they
//! started with; new calls get the new one. A file that does not load leaves
//! the previous version serving and its error visible in the plugin's status.
//!
//! Every change goes through [`PluginManager::reconcile`], whether the
//! directory watcher ([`watch`]) saw it or the admin API made it
//! ([`PluginManager::upload`], [`PluginManager::delete`]); changes to one plugin
//! are serialised by a per-name lock, different plugins load in parallel.

pub mod watch;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::catalog::Catalog;
use crate::tool;
use crate::wasm::loader::read_manifest;
use crate::wasm::{LoadError, LoadedPlugin, WasmBackend};

/// Where a plugin stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// A version is being read and compiled (a previous one may be
    /// serving); `progress` says how far it is.
    Compiling,
    /// The current files are loaded and serving.
    Ready,
    /// The current files did not load; `error` says why. A previous version,
    /// if any, is still serving (`version`).
    Failed,
    /// Loaded, but its backend cannot run it now (a Docker toolkit whose
    /// nodes cannot be created: no engine, no image, a refused setting);
    /// `error` says why. Its calls answer `backend_unavailable` (503).
    Unavailable,
}

/// What `GET /plugins` shows of a plugin.
#[derive(Debug, Clone, Serialize)]
pub struct PluginStatus {
    pub name: String,
    pub backend: &'static str,
    pub state: State,
    /// Content hash of the component serving now, if one is.
    pub version: Option<String>,
    /// When the serving version was loaded (Unix time, ms).
    pub loaded_at: Option<u64>,
    /// Tool ids of the serving version.
    pub tools: Vec<String>,
    /// Why the last load failed.
    pub error: Option<String>,
    /// Compile (or cache load) time of the serving version, ms.
    pub compile_ms: Option<f64>,
    /// `compiled` or `cache`.
    pub source: Option<&'static str>,
    /// While compiling: the phase, the time so far and the component's size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// When the current load began (for `progress.elapsed_ms`).
    #[serde(skip)]
    since: Option<std::time::Instant>,
    /// Identity of the files last attempted (component + manifest hashes), so
    /// an event that changed nothing does not reload.
    #[serde(skip)]
    files: Option<String>,
    /// Size and modification time of those files, taken before they were
    /// read: while they are the same, the files are not read and hashed
    /// again (the periodic rescan looks at every plugin).
    #[serde(skip)]
    stamps: Option<Stamps>,
}

/// Size and modification time of `<name>.wasm` and `<name>.toml`.
type Stamps = [Option<(u64, SystemTime)>; 2];

impl PluginStatus {
    /// The status of a toolkit of another backend than wasm: `ready`, or
    /// `unavailable` with the reason when `problem` is set.
    pub fn of_backend(
        name: &str,
        backend: &'static str,
        version: Option<String>,
        tools: Vec<String>,
        problem: Option<String>,
    ) -> Self {
        PluginStatus {
            backend,
            state: if problem.is_some() {
                State::Unavailable
            } else {
                State::Ready
            },
            version,
            tools,
            error: problem,
            ..PluginStatus::new(name)
        }
    }

    fn new(name: &str) -> Self {
        PluginStatus {
            name: name.to_owned(),
            backend: "wasm",
            state: State::Compiling,
            version: None,
            loaded_at: None,
            tools: Vec::new(),
            error: None,
            compile_ms: None,
            source: None,
            progress: None,
            since: None,
            files: None,
            stamps: None,
        }
    }
}

/// How far a compiling plugin is.
#[derive(Debug, Clone, Serialize)]
pub struct Progress {
    /// `queued` (on disk, waiting for a compile slot or to be read),
    /// `compiling`, `cached` (loading the compile cache's entry), or
    /// `describing` (asking the plugin for its tools).
    pub phase: &'static str,
    /// Since the load began.
    pub elapsed_ms: u64,
    /// The component's size.
    pub bytes: Option<u64>,
}

/// Why an admin change was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error(
        "invalid plugin name `{0}`: use lowercase letters, digits and `-`, starting with a letter (no path separators)"
    )]
    InvalidName(String),
    #[error("no plugin `{0}`")]
    NotFound(String),
    #[error("the manifest is not UTF-8 text")]
    ManifestNotText,
    #[error("plugin `{name}` was not loaded: {source}")]
    Load { name: String, source: LoadError },
    #[error("plugin `{name}` was not registered: {message}")]
    Register { name: String, message: String },
    #[error("cannot write the plugins directory: {0}")]
    Io(#[from] std::io::Error),
}

/// The plugins directory and its loaded plugins.
pub struct PluginManager {
    dir: PathBuf,
    wasm: Arc<WasmBackend>,
    catalog: Arc<Catalog>,
    status: Mutex<BTreeMap<String, PluginStatus>>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// The two files of a plugin as read from the directory.
struct Files {
    wasm: Vec<u8>,
    manifest: Option<String>,
    identity: String,
    stamps: Stamps,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

fn short(version: Option<&str>) -> &str {
    version.map_or("none", |v| &v[..v.len().min(12)])
}

impl PluginManager {
    pub fn new(dir: &Path, wasm: Arc<WasmBackend>, catalog: Arc<Catalog>) -> Arc<Self> {
        Arc::new(PluginManager {
            dir: dir.to_owned(),
            wasm,
            catalog,
            status: Mutex::new(BTreeMap::new()),
            locks: Mutex::new(HashMap::new()),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every plugin's status, sorted by name.
    pub fn list(&self) -> Vec<PluginStatus> {
        self.lock_status().values().map(with_elapsed).collect()
    }

    /// One plugin's status.
    pub fn get(&self, name: &str) -> Option<PluginStatus> {
        self.lock_status().get(name).map(with_elapsed)
    }

    /// Names of the plugins compiling now.
    pub fn compiling(&self) -> Vec<String> {
        self.lock_status()
            .values()
            .filter(|s| s.state == State::Compiling)
            .map(|s| s.name.clone())
            .collect()
    }

    /// Record the phase of plugin `name`'s load.
    fn phase(&self, name: &str, phase: &'static str) {
        self.update(name, |s| {
            if let Some(p) = &mut s.progress {
                p.phase = phase;
            }
        });
    }

    /// Mark plugin `name` as compiling (its files of `bytes` are about to be
    /// read): listed at once, and, with no version serving yet, its tools
    /// pending in the catalog (a call waits for them).
    fn begin(&self, name: &str, bytes: Option<u64>) {
        let mut serving = false;
        self.update(name, |s| {
            s.state = State::Compiling;
            s.since = Some(std::time::Instant::now());
            s.progress = Some(Progress {
                phase: "queued",
                elapsed_ms: 0,
                bytes,
            });
            serving = s.version.is_some();
        });
        if !serving {
            self.catalog.set_pending(name, true);
        }
    }

    /// The load of plugin `name` ended (its state says how, or it is gone).
    fn end(&self, name: &str) {
        if let Some(s) = self.lock_status().get_mut(name) {
            s.progress = None;
            s.since = None;
        }
        self.catalog.set_pending(name, false);
    }

    fn lock_status(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, PluginStatus>> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, name: &str, f: impl FnOnce(&mut PluginStatus)) {
        let mut map = self.lock_status();
        f(map
            .entry(name.to_owned())
            .or_insert_with(|| PluginStatus::new(name)));
    }

    fn name_lock(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        locks.entry(name.to_owned()).or_default().clone()
    }

    /// Plugin names present in the directory (from `*.wasm` files).
    pub fn names_on_disk(&self) -> std::io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let path = entry?.path();
            if let Some(name) = plugin_name_of(&path)
                && path.extension().is_some_and(|e| e == "wasm")
            {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// Load every plugin of the directory, in parallel (compiles are bounded
    /// by the backend), smallest component first, so small tools are served
    /// soonest; then delete compile-cache entries nothing uses. Every plugin
    /// is listed as compiling before the first compile starts.
    pub async fn load_all(self: &Arc<Self>) -> std::io::Result<()> {
        let mut names: Vec<(u64, String)> = self
            .names_on_disk()?
            .into_iter()
            .map(|n| {
                let size =
                    std::fs::metadata(self.dir.join(format!("{n}.wasm"))).map_or(0, |m| m.len());
                (size, n)
            })
            .collect();
        names.sort();
        for (size, name) in &names {
            self.begin(name, Some(*size));
        }
        futures::future::join_all(names.iter().map(|(_, n)| self.reconcile(n))).await;
        self.prune_cache();
        Ok(())
    }

    /// Bring plugin `name` in line with the directory: load what changed,
    /// unload what is gone, leave alone what is the same.
    pub async fn reconcile(&self, name: &str) {
        let lock = self.name_lock(name);
        let _guard = lock.lock().await;
        self.reconcile_locked(name).await;
        // Whatever happened (loaded, failed, unchanged, gone), the load
        // marked by `begin` (start-up, or `install`) is over.
        self.end(name);
    }

    async fn reconcile_locked(&self, name: &str) {
        let wasm_path = self.dir.join(format!("{name}.wasm"));
        let stamps = self.stamps(name);
        let untouched = self
            .get(name)
            .is_some_and(|s| s.files.is_some() && s.stamps == Some(stamps) && stamps[0].is_some());
        if untouched {
            return;
        }
        let files = match self.read_files(name, stamps) {
            Ok(Some(files)) => files,
            Ok(None) => {
                self.unload(name, "its file is gone");
                return;
            }
            Err(e) => {
                tracing::warn!(plugin = name, file = %wasm_path.display(), error = %e, "cannot read plugin files");
                self.update(name, |s| {
                    s.state = State::Failed;
                    s.error = Some(format!("cannot read {}: {e}", wasm_path.display()));
                    s.files = None;
                    s.stamps = None;
                });
                return;
            }
        };
        let unchanged = self
            .get(name)
            .is_some_and(|s| s.files.as_deref() == Some(files.identity.as_str()));
        if unchanged {
            return;
        }
        if let Err(e) = self.install(name, files).await {
            // Also how a file still being written ends: not yet valid. The
            // write's own events bring it back here once it is complete.
            tracing::debug!(plugin = name, error = %e, "reload failed");
        }
    }

    /// Size and modification time of the plugin's two files (none for a file
    /// that is not there).
    fn stamps(&self, name: &str) -> Stamps {
        ["wasm", "toml"].map(|ext| {
            let meta = std::fs::metadata(self.dir.join(format!("{name}.{ext}"))).ok()?;
            Some((meta.len(), meta.modified().ok()?))
        })
    }

    /// Read `<name>.wasm` and `<name>.toml` (whose `stamps` were taken just
    /// before); none when there is no component.
    fn read_files(&self, name: &str, stamps: Stamps) -> std::io::Result<Option<Files>> {
        let wasm = match std::fs::read(self.dir.join(format!("{name}.wasm"))) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let manifest = read_manifest(&self.dir.join(format!("{name}.toml")))?;
        let identity = identity(&wasm, manifest.as_deref());
        Ok(Some(Files {
            wasm,
            manifest,
            identity,
            stamps,
        }))
    }

    /// Validate, compile and swap in `files` as plugin `name`. On failure the
    /// previous version keeps serving and the status records the error.
    async fn install(&self, name: &str, files: Files) -> Result<PluginStatus, ChangeError> {
        let old = self.get(name).and_then(|s| s.version);
        if self.get(name).is_none_or(|s| s.progress.is_none()) {
            self.begin(name, Some(files.wasm.len() as u64));
        }
        self.update(name, |s| {
            s.files = Some(files.identity.clone());
            s.stamps = Some(files.stamps);
            if let Some(p) = &mut s.progress {
                p.bytes = Some(files.wasm.len() as u64);
            }
        });
        let report = |phase| self.phase(name, phase);
        let result = match self
            .wasm
            .load_reporting(name, files.wasm, files.manifest.as_deref(), &report)
            .await
        {
            Ok(plugin) => self.register(name, plugin),
            Err(source) => Err(ChangeError::Load {
                name: name.to_owned(),
                source,
            }),
        };
        match &result {
            Ok(status) => tracing::info!(
                plugin = name,
                from = short(old.as_deref()),
                to = short(status.version.as_deref()),
                compile_ms = status.compile_ms,
                source = status.source,
                tools = ?status.tools,
                "plugin loaded"
            ),
            Err(e) => {
                tracing::warn!(plugin = name, serving = short(old.as_deref()), error = %e, "plugin not loaded; the previous version (if any) keeps serving");
                self.update(name, |s| {
                    s.state = State::Failed;
                    s.error = Some(e.to_string());
                });
            }
        }
        result
    }

    fn register(&self, name: &str, plugin: LoadedPlugin) -> Result<PluginStatus, ChangeError> {
        let version = plugin.version.clone();
        let compile_ms = plugin.compile_time.as_secs_f64() * 1000.0;
        let source = plugin.origin.as_str();
        let (entry, tools) = plugin.into_catalog_entry();
        let ids: Vec<String> = tools.iter().map(|t| tool::tool_id(name, &t.name)).collect();
        self.catalog
            .register(entry, tools)
            .map_err(|e| ChangeError::Register {
                name: name.to_owned(),
                message: e.to_string(),
            })?;
        let mut done = None;
        self.update(name, |s| {
            s.state = State::Ready;
            s.version = Some(version);
            s.loaded_at = Some(now_ms());
            s.tools = ids;
            s.error = None;
            s.compile_ms = Some((compile_ms * 100.0).round() / 100.0);
            s.source = Some(source);
            done = Some(s.clone());
        });
        Ok(done.expect("status updated"))
    }

    fn unload(&self, name: &str, why: &str) {
        let removed = self.catalog.remove_backend(name, "wasm");
        let old = self.lock_status().remove(name);
        if removed || old.is_some() {
            let version = old.and_then(|s| s.version);
            tracing::info!(
                plugin = name,
                from = short(version.as_deref()),
                to = "none",
                "plugin unloaded: {why}"
            );
        }
    }

    /// Install an uploaded component (and manifest) as plugin `name`: load it
    /// first, and only when it loads write the files into the directory and
    /// swap it in. Without a manifest, the plugin's current manifest file (if
    /// any) stays.
    pub async fn upload(
        &self,
        name: &str,
        wasm: Vec<u8>,
        manifest: Option<Vec<u8>>,
    ) -> Result<PluginStatus, ChangeError> {
        if !tool::is_valid_plugin_name(name) {
            return Err(ChangeError::InvalidName(name.to_owned()));
        }
        let manifest = match manifest {
            Some(bytes) => {
                Some(String::from_utf8(bytes).map_err(|_| ChangeError::ManifestNotText)?)
            }
            None => None,
        };
        let lock = self.name_lock(name);
        let _guard = lock.lock().await;
        let toml_path = self.dir.join(format!("{name}.toml"));
        let manifest = match manifest {
            Some(text) => Some(text),
            None => read_manifest(&toml_path)?,
        };
        let old = self.get(name).and_then(|s| s.version);
        let plugin = self
            .wasm
            .load(name, wasm.clone(), manifest.as_deref())
            .await
            .map_err(|source| ChangeError::Load {
                name: name.to_owned(),
                source,
            })?;
        // Manifest first, component last: the watcher sees a complete pair.
        if let Some(text) = &manifest {
            write_atomic(&toml_path, text.as_bytes())?;
        }
        write_atomic(&self.dir.join(format!("{name}.wasm")), &wasm)?;
        let identity = identity(&wasm, manifest.as_deref());
        let status = self.register(name, plugin)?;
        let stamps = self.stamps(name);
        self.update(name, |s| {
            s.files = Some(identity);
            s.stamps = Some(stamps);
        });
        tracing::info!(
            plugin = name,
            from = short(old.as_deref()),
            to = short(status.version.as_deref()),
            compile_ms = status.compile_ms,
            "plugin uploaded"
        );
        Ok(status)
    }

    /// Delete plugin `name`: its files and its tools.
    pub async fn delete(&self, name: &str) -> Result<(), ChangeError> {
        if !tool::is_valid_plugin_name(name) {
            return Err(ChangeError::InvalidName(name.to_owned()));
        }
        let lock = self.name_lock(name);
        let _guard = lock.lock().await;
        let mut found = self.get(name).is_some();
        for ext in ["wasm", "toml"] {
            match std::fs::remove_file(self.dir.join(format!("{name}.{ext}"))) {
                Ok(()) => found = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        if !found {
            return Err(ChangeError::NotFound(name.to_owned()));
        }
        self.unload(name, "deleted through the admin API");
        Ok(())
    }

    /// Delete compile-cache entries that no loaded plugin uses.
    pub fn prune_cache(&self) {
        let Some(cache) = self.wasm.cache() else {
            return;
        };
        let keep: HashSet<String> = self.list().into_iter().filter_map(|s| s.version).collect();
        let deleted = cache.prune(&keep);
        if deleted > 0 {
            tracing::info!(deleted, "pruned stale compile-cache entries");
        }
    }
}

/// A status with `progress.elapsed_ms` brought up to now.
fn with_elapsed(s: &PluginStatus) -> PluginStatus {
    let mut s = s.clone();
    if let (Some(p), Some(since)) = (&mut s.progress, s.since) {
        p.elapsed_ms = since.elapsed().as_millis() as u64;
    }
    s
}

/// The plugin a directory entry belongs to: `<name>.wasm` or `<name>.toml`,
/// hidden and temporary files excluded.
pub fn plugin_name_of(path: &Path) -> Option<String> {
    let file = path.file_name()?.to_str()?;
    if file.starts_with('.') {
        return None;
    }
    let (stem, ext) = file.rsplit_once('.')?;
    matches!(ext, "wasm" | "toml").then(|| stem.to_owned())
}

fn identity(wasm: &[u8], manifest: Option<&str>) -> String {
    let manifest = manifest.map_or_else(
        || "-".to_owned(),
        |m| crate::wasm::loader::content_hash(m.as_bytes()),
    );
    format!("{}+{}", crate::wasm::loader::content_hash(wasm), manifest)
}

/// Write `bytes` to `path` through a hidden temporary file in the same
/// directory and a rename, so no reader (nor the watcher) sees half a file.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".upload-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_data()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_directory_entries() {
        let name = |p: &str| plugin_name_of(Path::new(p));
        assert_eq!(name("/p/calc.wasm").as_deref(), Some("calc"));
        assert_eq!(name("/p/calc.toml").as_deref(), Some("calc"));
        assert_eq!(name("/p/calc.wasm.tmp"), None);
        assert_eq!(name("/p/.upload-x1"), None);
        assert_eq!(name("/p/.calc.wasm.swp"), None);
        assert_eq!(name("/p/notes.txt"), None);
        assert_eq!(name("/p/Bad_Name.wasm").as_deref(), Some("Bad_Name"));
    }
}
