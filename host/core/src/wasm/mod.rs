//! The wasm backend: one engine for every plugin, components compiled off the
//! request path, an `InstancePre` cached per plugin and a fresh Store +
//! instance per call (see [`toolkit`]).

mod bindings;
pub mod cache;
mod compile;
pub mod config;
mod engine;
pub mod http;
pub mod limits;
pub mod loader;
pub mod manifest;
mod metrics;
pub mod provenance;
mod state;
mod toolkit;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, oneshot};
use wasmtime::component::Component;

pub use bindings::WIT_VERSION;
use bindings::{TOOLKIT_EXPORT, TOOLKIT_EXPORT_PREFIX};
pub use cache::{CacheKey, CompileCache, Origin};
use compile::{Cranelift, Quick};
use manifest::Manifest;
use state::PluginContext;
pub use toolkit::WasmToolkit;

use crate::catalog::ToolkitEntry;
use crate::tool::{self, Limits, ToolDescriptor};
use config::EngineConfig;
use limits::PluginLimits;

/// Why a component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(
        "invalid plugin name `{0}`: use lowercase letters, digits and `-`, starting with a letter"
    )]
    InvalidName(String),
    #[error("not a WebAssembly file (no `\\0asm` header)")]
    NotWasm,
    #[error(
        "a core WebAssembly module, not a component: build for wasm32-wasip2 (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule,
    #[error("the component does not compile: {0}")]
    Compile(String),
    #[error(
        "the component targets toolhost:plugin@{found}; this host accepts toolhost:plugin@{accepted}"
    )]
    WrongVersion {
        found: String,
        accepted: &'static str,
    },
    #[error("the component does not export `{expected}` (its exports: {found})")]
    MissingExport {
        expected: &'static str,
        found: String,
    },
    #[error("the component needs imports this host does not provide: {0}")]
    Link(String),
    #[error("list-tools failed: {0}")]
    Describe(String),
    #[error("invalid manifest: {0}")]
    Manifest(String),
}

/// A component ready to register.
pub struct LoadedPlugin {
    pub name: String,
    pub description: String,
    /// Hex SHA-256 of the component's bytes.
    pub version: String,
    pub limits: Limits,
    pub tools: Vec<ToolDescriptor>,
    pub toolkit: Arc<WasmToolkit>,
    /// Time to compile the component, or to load it from the compile cache.
    pub compile_time: Duration,
    /// Whether it came from the compile cache, or Winch's quick build.
    pub origin: Origin,
    /// A quick build's: told Cranelift's compile time and source when calls
    /// have moved to its build.
    pub better: Option<oneshot::Receiver<(Duration, &'static str)>>,
}

impl LoadedPlugin {
    /// The catalog entry and tool list of this plugin, registered by hand
    /// (`toolhost call`) rather than from a plugins directory.
    pub fn into_catalog_entry(self) -> (ToolkitEntry, Vec<ToolDescriptor>) {
        (
            ToolkitEntry::new(
                Arc::new(crate::backend::Detached("wasm")),
                self.name,
                self.description,
                self.version,
                self.limits,
                self.toolkit,
            ),
            self.tools,
        )
    }
}

/// A component's bytes, and their content hash when it is known already
/// (the plugins directory hashed the file as it read it).
pub struct ComponentBytes {
    pub bytes: Vec<u8>,
    pub hash: Option<String>,
}

impl From<Vec<u8>> for ComponentBytes {
    fn from(bytes: Vec<u8>) -> Self {
        ComponentBytes { bytes, hash: None }
    }
}

pub struct WasmBackend {
    /// Cranelift's engine and linker, the compile cache and the compile slots.
    cranelift: Cranelift,
    /// Winch's, for a first build served at once (`[engine] quick_compile`).
    quick: Option<Quick>,
    defaults: PluginLimits,
    max_memory_mb: u32,
    reservation: u64,
    /// Named secrets for `[[http.auth]]` (else only the environment's).
    secrets: std::sync::OnceLock<crate::credentials::Secrets>,
    /// Where components may come from and who must have signed them
    /// (unset: anywhere, unchecked).
    provenance: std::sync::OnceLock<Arc<provenance::Provenance>>,
    /// Its own series in the server's metrics (none: off, or no server).
    series: std::sync::OnceLock<Arc<metrics::WasmSeries>>,
    _ticker: engine::EpochTicker,
}

impl WasmBackend {
    /// The engine and linker, with `defaults` for plugins whose manifest sets
    /// no limits, and a compile cache in `cache` (a directory and the key of
    /// its entries) if given.
    pub fn new(
        cfg: &EngineConfig,
        defaults: PluginLimits,
        cache: Option<(&Path, CacheKey)>,
    ) -> anyhow::Result<Arc<Self>> {
        engine::configure_compile_pool();
        let (engine, reservation) = engine::build(cfg)
            .map_err(|e| anyhow::anyhow!("failed to build the wasm engine: {e:#}"))?;
        let linker = Arc::new(compile::linker(&engine)?);
        let ticker = engine::EpochTicker::start(&engine, Duration::from_millis(cfg.epoch_tick_ms));
        let cache = cache
            .map(|(dir, key)| {
                CompileCache::open(dir, &engine, key).map_err(|e| {
                    anyhow::anyhow!("failed to open the compile cache {}: {e}", dir.display())
                })
            })
            .transpose()?;
        let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
        Ok(Arc::new(WasmBackend {
            cranelift: Cranelift {
                engine,
                linker,
                cache,
                slots: Arc::new(Semaphore::new(parallel)),
            },
            quick: Quick::new(cfg),
            defaults,
            max_memory_mb: cfg.max_memory_mb,
            reservation,
            secrets: std::sync::OnceLock::new(),
            provenance: std::sync::OnceLock::new(),
            series: std::sync::OnceLock::new(),
            _ticker: ticker,
        }))
    }

    /// The server's named secrets, for manifests' `[[http.auth]]` (set once,
    /// before plugins load; unset: `TOOLHOST_SECRET_<NAME>` only).
    pub fn set_secrets(&self, secrets: crate::credentials::Secrets) {
        let _ = self.secrets.set(secrets);
    }

    /// The trust policy and registry logins components are loaded under
    /// (set once, before plugins load).
    pub fn set_provenance(&self, provenance: Arc<provenance::Provenance>) {
        let _ = self.provenance.set(provenance);
    }

    /// Record what each call spends in `metrics` (set once, before plugins
    /// load; toolkits loaded before are not recorded).
    pub fn set_metrics(&self, metrics: &crate::metrics::Metrics) {
        if let Some(series) = metrics::WasmSeries::register(metrics) {
            let _ = self.series.set(Arc::new(series));
        }
    }

    /// The compile cache, if any.
    pub fn cache(&self) -> Option<&CompileCache> {
        self.cranelift.cache.as_ref()
    }

    /// Virtual address space the instance pool reserves, bytes.
    pub fn reservation_bytes(&self) -> u64 {
        self.reservation
    }

    /// Compile, check and describe component `bytes` as plugin `name`.
    /// Compilation runs on threads of its own at a lower priority, never on
    /// a request thread. Answers with Cranelift's build: a quick one is
    /// waited past.
    pub async fn load(
        &self,
        name: &str,
        bytes: Vec<u8>,
        manifest: Option<&str>,
    ) -> Result<LoadedPlugin, LoadError> {
        let mut plugin = self
            .load_reporting(name, ComponentBytes::from(bytes), manifest, None, &|_| {})
            .await?;
        if let Some(better) = plugin.better.take() {
            let (took, _) = better
                .await
                .map_err(|_| LoadError::Compile("Cranelift's build failed (logged)".into()))?;
            (plugin.compile_time, plugin.origin) = (took, Origin::Compiled);
        }
        Ok(plugin)
    }

    /// [`Self::load`], telling `report` each phase it enters: `cached`
    /// (reading the compile cache), `compiling` (a compile slot taken),
    /// `describing` (asking the plugin for its tools). `dir` is the plugins
    /// directory a relative `[assets] dir` is found in.
    pub async fn load_reporting(
        &self,
        name: &str,
        component: ComponentBytes,
        manifest: Option<&str>,
        dir: Option<&std::path::Path>,
        report: &(dyn Fn(&'static str) + Sync),
    ) -> Result<LoadedPlugin, LoadError> {
        if !tool::is_valid_plugin_name(name) {
            return Err(LoadError::InvalidName(name.to_owned()));
        }
        let manifest = match manifest {
            Some(text) => Manifest::parse(text).map_err(LoadError::Manifest)?,
            None => Manifest::default(),
        };
        let limits = manifest
            .limits
            .over(&self.defaults, self.max_memory_mb)
            .map_err(LoadError::Manifest)?;
        let ComponentBytes { bytes, hash } = component;
        check_header(&bytes)?;
        let version = hash.unwrap_or_else(|| loader::content_hash(&bytes));

        let started = Instant::now();
        let bytes = Arc::new(bytes);
        let (code, mut origin) = self.compile(bytes.clone(), &version, report).await?;
        let mut compile_time = started.elapsed();
        report("describing");

        let http = http::HttpPolicy::parse(&manifest.http.allow, &manifest.http.methods)
            .map_err(LoadError::Manifest)?;
        let method = manifest.http.methods.first().map_or("GET", String::as_str);
        let secrets = self.secrets.get().cloned().unwrap_or_default();
        let credentials = http::Credentials::resolve(&manifest.http.auth, &secrets, &http, method)
            .map_err(LoadError::Manifest)?;
        let env = manifest
            .env
            .pass
            .iter()
            .filter_map(|name| Some((name.clone(), std::env::var(name).ok()?)))
            .collect();
        let ctx = Arc::new(PluginContext {
            name: name.to_owned(),
            config: manifest.config.clone(),
            http: Arc::new(http),
            credentials: Arc::new(credentials),
            env,
            assets: assets_dir(name, manifest.assets.dir.as_deref(), dir),
            declared: manifest.declared(),
        });
        let made = |code| {
            Arc::new(WasmToolkit::new(
                code,
                ctx.clone(),
                manifest.workspace.access,
                limits.sandbox(),
                self.series.get().cloned(),
            ))
        };
        let common = limits.common();
        let mut toolkit = made(code);
        let tools = match toolkit.describe(&common).await {
            Ok(tools) => tools,
            // Winch's build fails where Cranelift's may not (a bug of the
            // baseline compiler): asked again of Cranelift's.
            Err(e) if origin == Origin::Quick => {
                tracing::info!(plugin = name, error = %e, "list-tools failed on Winch's build: Cranelift's is asked");
                let code = self
                    .cranelift
                    .build(bytes.clone(), &version, report, &|| true)
                    .await?;
                toolkit = made(code);
                (origin, compile_time) = (Origin::Compiled, started.elapsed());
                toolkit.describe(&common).await?
            }
            Err(e) => return Err(e),
        };
        let better = (origin == Origin::Quick).then(|| {
            compile::optimise_behind(
                self.cranelift.clone(),
                Arc::downgrade(&toolkit),
                name.to_owned(),
                bytes,
                version.clone(),
            )
        });
        let limits = common;
        Ok(LoadedPlugin {
            name: name.to_owned(),
            description: manifest.description.unwrap_or_default(),
            version,
            limits,
            tools,
            toolkit,
            compile_time,
            origin,
            better,
        })
    }

    /// The code of the component from the cache, else of Winch's quick
    /// build if it makes one, else of Cranelift's (stored in the cache). A
    /// cache hit never waits for a slot behind a long compile.
    async fn compile(
        &self,
        bytes: Arc<Vec<u8>>,
        version: &str,
        report: &(dyn Fn(&'static str) + Sync),
    ) -> Result<(toolkit::Code, Origin), LoadError> {
        if let Some(cache) = self.cranelift.cache.clone() {
            report("cached");
            let (engine, hash) = (self.cranelift.engine.clone(), version.to_owned());
            let cached = tokio::task::spawn_blocking(move || cache.get(&engine, &hash))
                .await
                .ok()
                .flatten();
            if let Some(component) = cached {
                return Ok((self.cranelift.code(&component)?, Origin::Cached));
            }
        }
        if let Some(quick) = &self.quick {
            report("compiling");
            if let Some(component) = quick.compile(bytes.clone()).await {
                return Ok((quick.code(&component)?, Origin::Quick));
            }
        }
        let code = self
            .cranelift
            .build(bytes, version, report, &|| true)
            .await?;
        Ok((code, Origin::Compiled))
    }
}

/// The wasm backend's side of the backend contract: an entry is
/// `<name>.wasm` with an optional `<name>.toml` manifest, and what says
/// where it comes from ([`provenance`]): `<name>.oci.lock`,
/// `<name>.wasm.sig`, `<name>.wasm.sigstore.json`; a lock, or a manifest
/// naming a `source`, is an entry
/// before its component is fetched.
impl crate::backend::Backend for WasmBackend {
    fn name(&self) -> &'static str {
        "wasm"
    }

    fn claim(&self, child: &Path) -> Option<String> {
        let file = child.file_name()?.to_str()?;
        let stem = file
            .strip_suffix(".oci.lock")
            .or_else(|| file.strip_suffix(".wasm.sig"))
            .or_else(|| file.strip_suffix(".wasm.sigstore.json"));
        match stem {
            Some(stem) if !stem.starts_with('.') => Some(stem.to_owned()),
            Some(_) => None,
            None => crate::backend::file_entry(child, &["wasm", "toml"]),
        }
    }

    /// A compile-cache entry landing in the plugins folder's seed is loaded
    /// at once, on the blocking pool, for its component's load to take.
    fn arrived(&self, path: &Path) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if let Some(preparing) = self
            .cranelift
            .cache
            .as_ref()
            .and_then(|c| c.preparing(path))
        {
            let engine = self.cranelift.engine.clone();
            runtime.spawn_blocking(move || preparing.read(&engine));
        }
    }

    fn files(&self, dir: &Path, name: &str) -> Vec<std::path::PathBuf> {
        let wasm = dir.join(format!("{name}.wasm"));
        let manifest = dir.join(format!("{name}.toml"));
        let lock = provenance::lock_file(dir, name);
        // The manifest is read only for an entry with no component and no
        // lock (the periodic rescan lists every entry).
        let entry = wasm.is_file()
            || lock.is_file()
            || std::fs::read_to_string(&manifest)
                .ok()
                .and_then(|t| provenance::manifest_source(&t))
                .is_some();
        if !entry {
            return Vec::new();
        }
        let signature = provenance::signature_file(dir, name);
        [
            wasm,
            manifest,
            lock,
            signature,
            provenance::bundle_file(dir, name),
        ]
        .into_iter()
        .filter(|p| p.is_file())
        .collect()
    }

    fn load<'a>(
        &'a self,
        name: &'a str,
        files: Vec<crate::backend::EntryFile>,
        report: &'a (dyn Fn(&'static str) + Sync),
    ) -> crate::backend::BackendFuture<'a, Result<crate::backend::Loaded, String>> {
        Box::pin(async move {
            let mut parts = provenance::Parts::default();
            let mut given = None;
            let dir = files
                .first()
                .and_then(|f| f.path.parent())
                .map(std::path::Path::to_owned);
            for file in files {
                match file.path.extension().and_then(|e| e.to_str()) {
                    Some("wasm") => {
                        given = Some(file.hash);
                        parts.component = Some(file.bytes);
                    }
                    // Not UTF-8: shown as is, the manifest parser says where.
                    Some("toml") => {
                        parts.manifest = Some(String::from_utf8_lossy(&file.bytes).into_owned())
                    }
                    Some("lock") => parts.lock = Some(file.bytes),
                    Some("sig") => parts.signature = Some(file.bytes),
                    Some("json") => parts.bundle = Some(file.bytes),
                    _ => {}
                }
            }
            let manifest = parts.manifest.clone();
            let default = provenance::Provenance::default();
            let checks = self.provenance.get().map_or(&default, |p| &**p);
            let checked = checks.check(name, dir.as_deref(), parts, report).await?;
            let verdict = checked.verdict;
            let component = ComponentBytes {
                hash: given.filter(|_| !checked.pulled),
                bytes: checked.component,
            };
            let plugin = self
                .load_reporting(name, component, manifest.as_deref(), dir.as_deref(), report)
                .await
                .map_err(|e| e.to_string())?;
            Ok(crate::backend::Loaded {
                description: plugin.description,
                version: plugin.version,
                limits: plugin.limits,
                toolkit: plugin.toolkit,
                tools: plugin.tools,
                compile: Some((plugin.compile_time, plugin.origin.as_str())),
                better: plugin.better,
                warnings: verdict.warning.iter().cloned().collect(),
                provenance: serde_json::to_value(&verdict).ok(),
            })
        })
    }

    /// Compile-cache entries no loaded plugin uses are deleted.
    fn scanned(&self, versions: &std::collections::HashSet<String>) {
        if let Some(cache) = &self.cranelift.cache {
            let deleted = cache.prune(versions);
            if deleted > 0 {
                tracing::info!(deleted, "pruned stale compile-cache entries");
            }
        }
    }
}

/// The `[assets] dir` of plugin `name` as a host path, when it is a folder:
/// relative ones are found in the plugins directory `base`. A missing folder
/// is not an error (the plugin runs without it, and says so if it needs it).
fn assets_dir(
    name: &str,
    dir: Option<&str>,
    base: Option<&std::path::Path>,
) -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(dir?);
    let path = if dir.is_absolute() {
        dir.to_owned()
    } else {
        base?.join(dir)
    };
    if path.is_dir() {
        Some(path)
    } else {
        tracing::warn!(plugin = name, path = %path.display(), "the [assets] folder is missing: not mounted");
        None
    }
}

/// The toolkit export must be there, in the version this host speaks.
fn check_exports(component: &Component) -> Result<(), LoadError> {
    let ty = component.component_type();
    let names: Vec<String> = ty
        .exports(component.engine())
        .map(|(n, _)| n.to_owned())
        .collect();
    if names.iter().any(|n| n == TOOLKIT_EXPORT) {
        return Ok(());
    }
    if let Some(other) = names.iter().find(|n| n.starts_with(TOOLKIT_EXPORT_PREFIX)) {
        return Err(LoadError::WrongVersion {
            found: other[TOOLKIT_EXPORT_PREFIX.len()..].to_owned(),
            accepted: WIT_VERSION,
        });
    }
    Err(LoadError::MissingExport {
        expected: TOOLKIT_EXPORT,
        found: if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        },
    })
}

/// Tell a component from a core module or junk by its header.
fn check_header(bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(LoadError::NotWasm);
    }
    // Core modules have version 1 and layer 0; components a layer of 1.
    if bytes[6..8] == [0, 0] {
        return Err(LoadError::CoreModule);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_folders_are_found_beside_the_plugins() {
        let plugins = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(plugins.path().join(".models/m")).unwrap();
        let found = assets_dir("p", Some(".models/m"), Some(plugins.path()));
        assert_eq!(found, Some(plugins.path().join(".models/m")));
        let absolute = plugins.path().join(".models").display().to_string();
        assert!(assets_dir("p", Some(&absolute), None).is_some());
        assert_eq!(
            assets_dir("p", Some(".models/missing"), Some(plugins.path())),
            None
        );
        assert_eq!(assets_dir("p", Some(".models/m"), None), None);
        assert_eq!(assets_dir("p", None, Some(plugins.path())), None);
    }

    #[test]
    fn headers() {
        assert!(matches!(
            check_header(b"hello world"),
            Err(LoadError::NotWasm)
        ));
        assert!(matches!(check_header(b"\0asm"), Err(LoadError::NotWasm)));
        assert!(matches!(
            check_header(b"\0asm\x01\0\0\0"),
            Err(LoadError::CoreModule)
        ));
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
    }
}
