//! What `GET /plugins` shows of each entry of the plugins directory.

use std::time::{Instant, SystemTime};

use serde::Serialize;

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

/// How far a compiling plugin is.
#[derive(Debug, Clone, Serialize)]
pub struct Progress {
    /// `queued` (on disk, waiting for a compile slot or to be read),
    /// `fetching` (pulling the component from its registry),
    /// `compiling`, `cached` (loading the compile cache's entry), or
    /// `describing` (asking the plugin for its tools).
    pub phase: &'static str,
    /// Since the load began.
    pub elapsed_ms: u64,
    /// The entry's size.
    pub bytes: Option<u64>,
}

/// Size and modification time of each file of an entry, in order.
pub(super) type Stamps = Vec<(u64, Option<SystemTime>)>;

/// What `GET /plugins` shows of a plugin.
#[derive(Debug, Clone, Serialize)]
pub struct PluginStatus {
    pub name: String,
    pub backend: &'static str,
    pub state: State,
    /// Content hash of the version serving now, if one is.
    pub version: Option<String>,
    /// When the serving version was loaded (Unix time, ms).
    pub loaded_at: Option<u64>,
    /// Tool ids of the serving version.
    pub tools: Vec<String>,
    /// Why the last load failed, or why the plugin cannot serve now.
    pub error: Option<String>,
    /// What the serving version's load warns of.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Where the serving version came from and who signed it (wasm: the
    /// trust policy's verdict: `source`, `policy`, `signed_by`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<serde_json::Value>,
    /// Compile (or cache load) time of the serving version, ms.
    pub compile_ms: Option<f64>,
    /// `compiled`, `cache`, or `winch` (Winch's quick build, serving
    /// until Cranelift's is made: then `compiled`).
    pub source: Option<&'static str>,
    /// While compiling: the phase, the time so far and the entry's size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// When the current load began (for `progress.elapsed_ms`).
    #[serde(skip)]
    pub(super) since: Option<Instant>,
    /// Identity of the files last attempted (their hashes), so an event
    /// that changed nothing does not reload.
    #[serde(skip)]
    pub(super) files: Option<String>,
    /// Size and time of those files, taken before they were read: while
    /// they are the same, the files are not read and hashed again (the
    /// periodic rescan looks at every plugin).
    #[serde(skip)]
    pub(super) stamps: Option<Stamps>,
}

impl PluginStatus {
    pub(super) fn new(name: &str, backend: &'static str) -> Self {
        PluginStatus {
            name: name.to_owned(),
            backend,
            state: State::Compiling,
            version: None,
            loaded_at: None,
            tools: Vec::new(),
            error: None,
            warnings: Vec::new(),
            provenance: None,
            compile_ms: None,
            source: None,
            progress: None,
            since: None,
            files: None,
            stamps: None,
        }
    }

    /// This status as shown now: `progress.elapsed_ms` brought up to date,
    /// and `problem` (why the backend cannot run it now) turning a ready
    /// plugin `unavailable`.
    pub(super) fn shown(&self, problem: Option<crate::backend::Problem>) -> PluginStatus {
        let mut s = self.clone();
        if let (Some(p), Some(since)) = (&mut s.progress, s.since) {
            p.elapsed_ms = since.elapsed().as_millis() as u64;
        }
        if s.state == State::Ready
            && let Some(problem) = problem
        {
            s.state = if problem.failed {
                State::Failed
            } else {
                State::Unavailable
            };
            s.error = Some(problem.reason);
        }
        s
    }
}
