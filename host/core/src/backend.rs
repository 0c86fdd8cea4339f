//! The contract every kind of tool implements.
//!
//! A backend claims entries of the plugins directory (the wasm backend a
//! `<name>.wasm` + `<name>.toml`, the Docker backend a `<name>/` folder with
//! `<name>/<name>.toml`), loads one from its files into a [`Toolkit`] with its
//! tool descriptors, is told when one is gone, says why one cannot serve now,
//! and shuts down. Start-up and the directory watcher drive every backend
//! through this trait alone ([`crate::plugins::PluginManager`]): reading the
//! files, noticing what changed, swapping the toolkit into the catalog
//! atomically, statuses and errors are theirs, not the backends'. A session's
//! resources are released through [`crate::sessions::SessionResources`].
//!
//! Adding a kind of tool is implementing this trait (and `Toolkit`, the call
//! path) in a folder of its own and handing the backend to
//! [`crate::server::Server::build_with`]: no surface changes.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::sessions::Session;
use crate::tool::{
    BoxFuture, CallError, Content, LimitOverrides, Limits, ProgressSink, ToolDescriptor,
};

/// A boxed future borrowing from its backend.
pub type BackendFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One call as a backend receives it, input already validated.
pub struct Invocation {
    /// Tool name within the toolkit (not the id).
    pub tool: String,
    /// The input object, checked against the tool's schema.
    pub input: serde_json::Value,
    /// The tool's id in the catalog (labels of a backend's own metrics).
    pub id: String,
    pub session: Arc<Session>,
    /// The toolkit's common limits, lowered as the caller asked.
    pub limits: Limits,
    /// What the caller asked to lower; a backend applies the parts that are
    /// its own (a wasm sandbox's fuel and memory).
    pub lower: LimitOverrides,
    /// Where progress reports go, when the caller streams.
    pub progress: Option<ProgressSink>,
    /// Who answers the tool's questions (`crate::input`); none: nobody.
    pub ask: Option<Arc<dyn crate::input::Asker>>,
    /// What the call used, filled in by the backend as far as it can tell.
    pub usage: Arc<Usage>,
}

/// What one call used, as far as its backend can tell (zero: unknown): the
/// call's answer and the tool's statistics (seed 004's ResourceUsage) show
/// it.
#[derive(Debug, Default)]
pub struct Usage {
    /// Fuel units consumed (a wasm sandbox's measure of work).
    pub fuel: AtomicU64,
    /// Largest memory of the call's sandbox, in bytes.
    pub peak_memory: AtomicU64,
}

impl Usage {
    pub fn set(field: &AtomicU64, value: u64) {
        field.store(value, Ordering::Relaxed);
    }

    pub fn get(field: &AtomicU64) -> u64 {
        field.load(Ordering::Relaxed)
    }
}

/// A loaded toolkit's call path, as a backend implements it. Backends are
/// peers behind [`Backend`]; each toolkit they load is one of
/// these.
pub trait Toolkit: Send + Sync + 'static {
    /// Run one tool of this toolkit.
    fn invoke(self: Arc<Self>, call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>>;

    /// Whether its answers are another server's, relayed as they came (an
    /// MCP server's): then nothing is added to them (no links to the files
    /// a call wrote).
    fn relays(&self) -> bool {
        false
    }

    /// Whether the files its calls write are written through this
    /// machine's kernel (wasm tools, a local Docker engine's bind mounts),
    /// so that the kernel tells what a call wrote
    /// ([`crate::sessions::Session::watch_writes`]); else the workspace is
    /// walked before and after the call.
    fn writes_seen_here(&self) -> bool {
        false
    }

    /// Whether its tools are defined elsewhere at run time (an MCP server's
    /// list, a spec fetched by URL), so that their definitions are pinned
    /// ([`crate::pins`]): a change waits for an admin.
    fn pins_definitions(&self) -> bool {
        false
    }

    /// Prompts and resources it declares (wasm plugins, in their manifest).
    fn declared(&self) -> Option<&crate::declared::Declared> {
        None
    }

    /// The limits its backend enforces itself beyond the common [`Limits`]
    /// (a wasm sandbox's `fuel` and `memory_mb`, a node's `memory_mb` and
    /// `cpus`), by name, for admin views.
    fn own_limits(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
}

/// One file of an entry, read.
pub struct EntryFile {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    /// [`content_hash`] of `bytes`, computed once (an entry's identity and
    /// a component's version are both this: 14 ms over an 18 MB Python
    /// component).
    pub hash: String,
}

impl EntryFile {
    pub fn new(path: PathBuf, bytes: Vec<u8>) -> Self {
        let hash = content_hash(&bytes);
        EntryFile { path, bytes, hash }
    }
}

/// A toolkit a backend loaded, for the catalog.
pub struct Loaded {
    pub description: String,
    /// Content hash or other version label (`GET /plugins`, the
    /// `x-toolhost-plugin-version` header).
    pub version: String,
    pub limits: Limits,
    pub toolkit: Arc<dyn Toolkit>,
    pub tools: Vec<ToolDescriptor>,
    /// Compile (or compile-cache) time and where the code came from
    /// (`compiled` / `cache`), for backends that compile.
    pub compile: Option<(Duration, &'static str)>,
    /// A better build being made behind this one (wasm: Cranelift's behind
    /// Winch's quick build): told its compile time and source, as in
    /// `compile`, when calls have moved to it (dropped: it failed, this one
    /// keeps serving).
    pub better: Option<tokio::sync::oneshot::Receiver<(Duration, &'static str)>>,
    /// What loaded but should be looked at (shown by `GET /plugins`).
    pub warnings: Vec<String>,
    /// Where it came from and who signed it, for backends that check
    /// (`GET /plugins`: the trust policy's verdict).
    pub provenance: Option<serde_json::Value>,
}

/// Why a loaded entry cannot serve now ([`Backend::problem`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub reason: String,
    /// Shown `failed` (it will not serve until something changes: a
    /// service that never became healthy), else `unavailable` (it serves
    /// again once its engine, image ... are back).
    pub failed: bool,
}

impl Problem {
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Problem {
            reason: reason.into(),
            failed: false,
        }
    }

    pub fn failed(reason: impl Into<String>) -> Self {
        Problem {
            reason: reason.into(),
            failed: true,
        }
    }
}

/// What an active check of a loaded entry found ([`Backend::probe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub ok: bool,
    /// What was asked and answered (`GET /health answered 503`).
    pub detail: String,
    /// The container checked, for entries that run in one.
    pub container_id: Option<String>,
}

/// What a backend does for the plugins directory.
pub trait Backend: Send + Sync + 'static {
    /// Its name: `wasm`, `docker`, ... (`GET /plugins`, metrics, errors).
    fn name(&self) -> &'static str;

    /// The table a folder manifest `<name>/<name>.toml` of this backend
    /// has at its top level (`docker`, `api`, ...), for backends whose
    /// entries are such folders: the plugins directory gives each folder to
    /// the one backend whose table it has ([`folder_owner`]).
    fn folder_kind(&self) -> Option<&'static str> {
        None
    }

    /// The name of the entry `child` (a direct child of the plugins
    /// directory, which may no longer exist) belongs to, if this backend
    /// claims such entries. A folder backend claims folders named as plugins
    /// ([`folder_entry`]); another claims nothing unless it says so.
    fn claim(&self, child: &Path) -> Option<String> {
        self.folder_kind().and_then(|_| folder_entry(child))
    }

    /// The files entry `name` of `dir` is made of, those that exist now; empty
    /// when the entry is gone. Their size and time decide whether it changed.
    /// A folder backend's: every visible file of the folder ([`folder_files`]).
    fn files(&self, dir: &Path, name: &str) -> Vec<PathBuf> {
        match self.folder_kind() {
            Some(_) => folder_files(dir, name),
            None => Vec::new(),
        }
    }

    /// Load entry `name` from its `files` (as [`Backend::files`] listed them,
    /// read). `report` is told each phase (`compiling`, ...). The error is
    /// the reason shown in `GET /plugins`.
    fn load<'a>(
        &'a self,
        name: &'a str,
        files: Vec<EntryFile>,
        report: &'a (dyn Fn(&'static str) + Sync),
    ) -> BackendFuture<'a, Result<Loaded, String>>;

    /// File `path`, anywhere under the plugins directory (its hidden folders
    /// too), was just written whole or moved into place. A backend that can
    /// start on such a file before any entry is reconciled does so, off the
    /// caller's thread (the wasm backend loads a compile-cache entry that
    /// arrives ahead of its component).
    fn arrived(&self, _path: &Path) {}

    /// Entry `name` left the catalog (deleted, or replaced by a new version
    /// when `replaced`): release what the old version holds once its calls in
    /// flight are done.
    fn unloaded(&self, _name: &str, _replaced: bool) {}

    /// Why loaded entry `name` cannot serve now, if it cannot (it is then
    /// `unavailable` in `GET /plugins`, and its calls answer 503).
    fn problem(&self, _name: &str) -> Option<Problem> {
        None
    }

    /// Check loaded entry `name` now, actively (a service's health path on
    /// its running containers, an MCP server's ping), when there is
    /// something to check; none else. Answered within a few seconds.
    fn probe<'a>(&'a self, _name: &'a str) -> BackendFuture<'a, Option<Checked>> {
        Box::pin(async { None })
    }

    /// Start loaded entry `name` afresh (its containers, its server
    /// connection), for a degraded tool (`[health] repair = "auto"`); the
    /// next call makes what it needs.
    fn restart(&self, _name: &str) {}

    /// A scan of the whole directory loaded these versions (compile caches
    /// prune what no entry uses).
    fn scanned(&self, _versions: &std::collections::HashSet<String>) {}

    /// How entry `name`'s tools are run, for `GET /tools/{id}` (seed 004's
    /// `scheduling`: `mode` and `state`), when the backend schedules them.
    fn scheduling(&self, _name: &str) -> Option<serde_json::Value> {
        None
    }

    /// Receive the handle that reloads one of this backend's entries on its
    /// own initiative (see [`Refresh`]).
    fn attach(&self, _refresh: Refresh) {}

    /// Bring this backend's gauges in `metrics` up to date (called for each
    /// `/metrics` scrape).
    fn observe(&self, _metrics: &crate::metrics::Metrics) {}

    /// What this backend has allocated of the host (`GET /system`), if it
    /// allocates anything.
    fn resources(&self) -> Option<serde_json::Value> {
        None
    }

    /// Release everything before the process exits.
    fn shutdown(&self) -> BackendFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// Calls from inside a call to other tools of the server, through the one
/// dispatcher (every check a caller's call gets): for backends whose tools
/// compose others (`code_interpreter`). The dispatcher implements it; a
/// backend receives it through a [`ToolCallsSlot`], filled once the
/// dispatcher exists (it is made after the backends).
pub trait ToolCalls: Send + Sync {
    /// Whether tool `id` can serve now: its backend's name and its input
    /// schema, or why not.
    fn ready(&self, id: &str) -> Result<(&'static str, serde_json::Value), String>;

    /// Call tool `id` in `session` with `input`, progress to `progress`.
    fn call(
        self: Arc<Self>,
        session: Arc<Session>,
        id: String,
        input: serde_json::Value,
        progress: Option<ProgressSink>,
    ) -> BoxFuture<Result<Vec<Content>, CallError>>;
}

/// Where a backend finds [`ToolCalls`] once the server has made them.
pub type ToolCallsSlot = Arc<std::sync::OnceLock<std::sync::Weak<dyn ToolCalls>>>;

/// Reload entry `name` of this backend although its files did not change
/// (an MCP server said its tool list changed): the plugins directory's
/// manager loads it again and swaps it in like any new version.
#[derive(Clone)]
pub struct Refresh(Arc<dyn Fn(&str) + Send + Sync>);

impl Refresh {
    pub fn new(f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Refresh(Arc::new(f))
    }

    pub fn entry(&self, name: &str) {
        (self.0)(name)
    }
}

/// A backend that claims nothing: the owner of toolkits registered by hand
/// (`toolhost call`, tests).
pub struct Detached(pub &'static str);

impl Backend for Detached {
    fn name(&self) -> &'static str {
        self.0
    }
    fn load<'a>(
        &'a self,
        name: &'a str,
        _: Vec<EntryFile>,
        _: &'a (dyn Fn(&'static str) + Sync),
    ) -> BackendFuture<'a, Result<Loaded, String>> {
        Box::pin(async move { Err(format!("{name}: a detached backend loads nothing")) })
    }
}

/// Hex SHA-256 of `bytes`: content versions and file identities.
pub fn content_hash(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    crate::text::hex(&digest)
}

/// The name of a plugins-directory child `<name>.<ext>` with one of `exts`,
/// hidden and temporary files excluded.
pub fn file_entry(child: &Path, exts: &[&str]) -> Option<String> {
    let file = child.file_name()?.to_str()?;
    if file.starts_with('.') {
        return None;
    }
    let (stem, ext) = file.rsplit_once('.')?;
    exts.contains(&ext).then(|| stem.to_owned())
}

/// The name of a plugins-directory child that is a folder named as a plugin
/// (it may be gone already: the event of a removal). Folder backends (Docker
/// toolkits, API tools) claim these; the manifest's kind tells whose it is
/// ([`folder_files`]).
pub fn folder_entry(child: &Path) -> Option<String> {
    let name = child.file_name()?.to_str()?;
    (crate::tool::is_valid_plugin_name(name) && !child.is_file()).then(|| name.to_owned())
}

/// The visible files of folder entry `<dir>/<name>/`, sorted, when it has a
/// manifest `<name>.toml`; none otherwise. Which backend the folder belongs
/// to is the plugins directory's decision ([`folder_owner`]).
pub fn folder_files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let folder = dir.join(name);
    if !folder.join(format!("{name}.toml")).is_file() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(&folder) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.'))
        })
        .collect();
    files.sort();
    files
}

/// Which of the folder `kinds` (the backends' [`Backend::folder_kind`], in
/// their order) owns folder entry `<dir>/<name>/`: the one whose table its
/// manifest has. A manifest that does not parse belongs to one of them, so
/// it is listed once, failed with the parser's reason: the kind whose table
/// header (`[kind]`, `[kind.x]`) its first such line opens, else the first
/// kind. None without a manifest, or for one with no such table.
pub fn folder_owner(dir: &Path, name: &str, kinds: &[&'static str]) -> Option<&'static str> {
    let text = std::fs::read_to_string(dir.join(name).join(format!("{name}.toml"))).ok()?;
    match text.parse::<toml::Table>() {
        Ok(table) => kinds.iter().copied().find(|k| table.contains_key(*k)),
        Err(_) => owner_of_unparsable(&text, kinds),
    }
}

fn owner_of_unparsable(text: &str, kinds: &[&'static str]) -> Option<&'static str> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix('['))
        .find_map(|header| {
            kinds.iter().copied().find(|k| {
                header
                    .trim_start()
                    .strip_prefix(k)
                    .is_some_and(|rest| rest.starts_with([']', '.', ' ']))
            })
        })
        .or_else(|| kinds.first().copied())
}

/// The folder and manifest text of folder entry `name` among its `files`.
pub fn folder_manifest<'f>(
    name: &str,
    files: &'f [EntryFile],
) -> Result<(PathBuf, &'f str), String> {
    let manifest_name = format!("{name}.toml");
    let manifest = files
        .iter()
        .find(|f| {
            f.path
                .file_name()
                .is_some_and(|n| n == manifest_name.as_str())
        })
        .ok_or_else(|| format!("no {manifest_name} in the folder"))?;
    let folder = manifest
        .path
        .parent()
        .ok_or("the manifest has no folder")?
        .to_owned();
    let text = std::str::from_utf8(&manifest.bytes)
        .map_err(|_| format!("{manifest_name} is not UTF-8 text"))?;
    Ok((folder, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unparsable_folder_manifest_has_one_owner() {
        let kinds = ["docker", "api", "mcp", "interpreter"];
        let owner = |text| owner_of_unparsable(text, &kinds);
        assert_eq!(owner("[mcp]\nurl = \"x\n"), Some("mcp"));
        assert_eq!(owner("description = 1\n[api.auth]\nkind = \n"), Some("api"));
        assert_eq!(owner("[mcpx]\n[docker]\nimage = \n"), Some("docker"));
        assert_eq!(owner("this is not toml"), Some("docker"));
        assert_eq!(owner_of_unparsable("x", &[]), None);

        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("broken")).unwrap();
        std::fs::write(dir.path().join("broken/broken.toml"), "[mcp]\nurl = ").unwrap();
        assert_eq!(folder_owner(dir.path(), "broken", &kinds), Some("mcp"));
        std::fs::create_dir(dir.path().join("ok")).unwrap();
        std::fs::write(dir.path().join("ok/ok.toml"), "[api]\nbase_url = \"x\"").unwrap();
        assert_eq!(folder_owner(dir.path(), "ok", &kinds), Some("api"));
        std::fs::write(dir.path().join("ok/ok.toml"), "[other]\nx = 1").unwrap();
        assert_eq!(folder_owner(dir.path(), "ok", &kinds), None);
        assert_eq!(folder_owner(dir.path(), "none", &kinds), None);
    }
}
