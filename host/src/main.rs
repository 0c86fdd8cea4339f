//! The `toolhost` command: serve plugins over HTTP, or run one call locally.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use serde_json::{Value, json};

use toolhost::config::Config;
use toolhost::server::{self, Server};
use toolhost::wasm::WasmBackend;

mod oci_cli;

#[derive(Parser)]
#[command(name = "toolhost", version, about = "A tool server for LLM agents")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the plugins of a directory over HTTP.
    Serve {
        /// Address to listen on [default: 127.0.0.1:8001, or the config file's].
        #[arg(long, env = "TOOLHOST_BIND")]
        bind: Option<std::net::SocketAddr>,
        /// Directory of `<name>.wasm` components with `<name>.toml` manifests.
        #[arg(long, env = "TOOLHOST_PLUGINS", default_value = "plugins")]
        plugins: PathBuf,
        /// Directory for session workspaces.
        #[arg(long, env = "TOOLHOST_DATA", default_value = "data")]
        data: PathBuf,
        /// Server configuration file (TOML); every key has a default.
        #[arg(long, env = "TOOLHOST_CONFIG")]
        config: Option<PathBuf>,
        /// Bearer token of the admin routes (plugin upload / delete)
        /// [default: the config file's `[auth] admin_token`; unset: refused].
        #[arg(long, env = "TOOLHOST_ADMIN_TOKEN", hide_env_values = true)]
        admin_token: Option<String>,
        /// A bearer token callers must present on every route but /health
        /// [default: the config file's `[auth] tokens`; none: no caller auth].
        #[arg(long, env = "TOOLHOST_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// The key file that authenticates compiled components
        /// [default: the config file's `[plugins] cache_key`, else
        /// `<data>/compile-cache.key`, made when missing].
        #[arg(long, env = "TOOLHOST_CACHE_KEY")]
        cache_key: Option<PathBuf>,
    },
    /// Run one tool of a component locally, without a server.
    Call {
        component: PathBuf,
        /// Tool name within the component (not the `<plugin>_` id).
        tool: String,
        /// Input as JSON.
        #[arg(default_value = "{}")]
        input: String,
        /// Directory to use as the session workspace [default: a temporary one].
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
    /// Print a component's tools and their schemas.
    Inspect { component: PathBuf },
    /// Start a plugin from a template: `<dir>/<name>/` with the tool code, the
    /// manifest `<name>.toml` and a README with the build command.
    New {
        /// The plugin's language.
        #[arg(long, value_enum)]
        lang: toolhost::scaffold::Lang,
        /// Plugin name: lowercase letters, digits and `-` (tool ids are `<name>_<tool>`).
        name: String,
        /// Folder to create the plugin in.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Build a plugin folder into `<name>.wasm` + `<name>.toml`, ready for the
    /// plugins directory (a running server hot-loads them from there).
    Build {
        /// The plugin folder (made by `toolhost new`).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Where to put the component and its manifest, e.g. the server's
        /// plugins directory [default: <dir>/dist].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also compile it ahead of time into `<out>/.compile-cache/`, with
        /// the compile-cache key of the server that will serve it (a server
        /// reads only entries made with its own key). The component is then
        /// built and compiled beside `<out>` and moved in last, so a server
        /// watching `<out>` swaps to it from the cache at once.
        #[arg(long, env = "TOOLHOST_CACHE_KEY")]
        cache_key: Option<PathBuf>,
    },
    /// Compile every component of a plugins directory ahead of time into its
    /// `.compile-cache/` folder, which a server serving that directory reads
    /// when its own cache misses: the first start with a fresh data directory
    /// is warm. Entries are for this build's engine and the given settings;
    /// other builds and settings ignore them and compile. They are
    /// authenticated with the server's compile-cache key (native code is
    /// only run when it provably came from the server or from here).
    Precompile {
        /// The plugins directory.
        #[arg(long, env = "TOOLHOST_PLUGINS", default_value = "plugins")]
        plugins: PathBuf,
        /// The data directory of the server that will serve them: its
        /// `compile-cache.key` is used (made when missing).
        #[arg(long, env = "TOOLHOST_DATA", default_value = "data")]
        data: PathBuf,
        /// The key file to use instead [default: the config file's
        /// `[plugins] cache_key`, else `<data>/compile-cache.key`].
        #[arg(long, env = "TOOLHOST_CACHE_KEY")]
        cache_key: Option<PathBuf>,
        /// The server's configuration file, if it has one (its `[engine]`
        /// settings decide the compiled code).
        #[arg(long, env = "TOOLHOST_CONFIG")]
        config: Option<PathBuf>,
    },
    #[command(flatten)]
    Oci(oci_cli::OciCommand),
    /// Read a configuration file as `serve` does (every section, key and
    /// limit checked) and start nothing: "ok", or the reason it is refused.
    CheckConfig {
        /// The configuration file (TOML).
        config: PathBuf,
    },
    /// Turn a core wasm module (C: clang + wasi-libc, linked with the C SDK's
    /// `plugin_component_type.o`) into a plugin component; WASI preview 1 is
    /// bridged by the embedded adapter.
    Componentize {
        /// The core module.
        module: PathBuf,
        /// Where to write the component.
        #[arg(short, long)]
        out: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let cli = Cli::parse();
    // The server's log lines and traces are as its file says; every other
    // command's are the defaults.
    let serving = match &cli.command {
        Command::Serve { config, .. } => Some(match config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        }),
        _ => None,
    };
    let _telemetry = toolhost::traces::init(
        serving
            .as_ref()
            .map_or(&Default::default(), |c: &Config| &c.telemetry),
    )?;
    let runtime = tokio::runtime::Runtime::new().context("failed to start the async runtime")?;
    runtime.block_on(async move {
        match cli.command {
            Command::Serve {
                bind,
                plugins,
                data,
                config: _,
                admin_token,
                token,
                cache_key,
            } => {
                let mut config = serving.expect("read above");
                if let Some(bind) = bind {
                    config.server.bind = bind;
                }
                if let Some(token) = admin_token.filter(|t| !t.is_empty()) {
                    config.auth.admin_token = Some(token);
                }
                if let Some(token) = token.filter(|t| !t.is_empty()) {
                    config.auth.tokens.push(token);
                }
                if let Some(key) = cache_key {
                    config.plugins.cache_key = Some(key);
                }
                serve(started, &plugins, &data, config).await
            }
            Command::Call {
                component,
                tool,
                input,
                workspace,
            } => call(&component, &tool, &input, workspace).await,
            Command::Inspect { component } => inspect(&component).await,
            Command::Precompile {
                plugins,
                data,
                cache_key,
                config,
            } => {
                let config = match config {
                    Some(path) => Config::from_file(&path)?,
                    None => Config::default(),
                };
                let key = cache_key
                    .or(config.plugins.cache_key.clone())
                    .unwrap_or_else(|| data.join(toolhost::wasm::cache::KEY_FILE));
                let key = toolhost::wasm::CacheKey::load_or_create(&key)?;
                let cache_dir = plugins.join(toolhost::wasm::cache::PRECOMPILED_DIR);
                precompile(&config, &plugins, &cache_dir, None, key).await?;
                Ok(())
            }
            Command::Oci(command) => oci_cli::run(command).await,
            Command::CheckConfig { config } => {
                Config::from_file(&config)?;
                println!("{}: ok", config.display());
                Ok(())
            }
            Command::New { lang, name, dir } => {
                let made = toolhost::scaffold::new_plugin(lang, &name, &dir)?;
                println!(
                    "created {}: write your tools, then `toolhost build {}` (see its README.md)",
                    made.display(),
                    made.display()
                );
                Ok(())
            }
            Command::Componentize { module, out } => {
                let core = std::fs::read(&module)
                    .with_context(|| format!("cannot read {}", module.display()))?;
                let component = toolhost::componentize::componentize(&core)
                    .with_context(|| format!("{} is not a plugin module", module.display()))?;
                std::fs::write(&out, component)
                    .with_context(|| format!("cannot write {}", out.display()))?;
                Ok(())
            }
            Command::Build {
                dir,
                out,
                cache_key,
            } => {
                let out = out.unwrap_or_else(|| dir.join("dist"));
                let wasm = match cache_key {
                    None => toolhost::scaffold::build(&dir, &out)?,
                    Some(key) => {
                        let key = toolhost::wasm::CacheKey::load(&key)?;
                        build_precompiled(&dir, &out, key).await?
                    }
                };
                println!(
                    "built {} (+ manifest): copy both into the server's plugins directory, or pass --out <plugins dir>",
                    wasm.display()
                );
                Ok(())
            }
        }
    })
}

/// Serve with `config` (the file's, with the command line's overrides).
async fn serve(
    started: std::time::Instant,
    plugins: &Path,
    data: &Path,
    config: Config,
) -> anyhow::Result<()> {
    config.check()?;
    if let Some(warning) = config.exposure_warning() {
        tracing::warn!("{warning}");
    }
    let server = Server::build(&config, plugins, data).await?;
    let listener = tokio::net::TcpListener::bind(config.server.bind)
        .await
        .with_context(|| format!("failed to listen on {}", config.server.bind))?;
    // Once, before any plugin compiles: how long start-up took and what is
    // left to load behind the listening server (`GET /health/ready`).
    tracing::info!(
        addr = %listener.local_addr()?,
        startup_ms = (started.elapsed().as_secs_f64() * 1e4).round() / 10.0,
        compiling = ?server.plugins.names_on_disk().unwrap_or_default(),
        "toolhost listening"
    );
    server.load_plugins();
    let served = server::serve(
        listener,
        server.router(&config),
        server::ConnLimits::of(&config.server),
        server.shutdown.clone(),
    )
    .await;
    server.shutdown().await;
    served
}

/// The engine settings of a command that loads components once: Cranelift's
/// builds only (a quick build would be compiled on top of what it waits for).
fn one_shot(config: &Config) -> toolhost::wasm::config::EngineConfig {
    toolhost::wasm::config::EngineConfig {
        quick_compile: false,
        ..config.engine.clone()
    }
}

/// Load `component` as a plugin named after its file, with its manifest if any.
async fn load_one(
    component: &Path,
) -> anyhow::Result<(Arc<WasmBackend>, toolhost::wasm::LoadedPlugin)> {
    let config = Config::default();
    let backend = WasmBackend::new(&one_shot(&config), config.limits, None)?;
    let name = component
        .file_stem()
        .and_then(|s| s.to_str())
        .context("the component path has no file name")?
        .replace('_', "-");
    let file = toolhost::wasm::loader::PluginFile {
        name,
        wasm: component.to_owned(),
        manifest: Some(component.with_extension("toml")).filter(|p| p.is_file()),
    };
    if file.manifest.is_none() {
        eprintln!(
            "note: no {} beside the component: it runs without its manifest's grants (no workspace, no HTTP, no config)",
            component.with_extension("toml").display()
        );
    }
    let plugin = toolhost::wasm::loader::load_file(&backend, &file).await?;
    Ok((backend, plugin))
}

async fn call(
    component: &Path,
    tool: &str,
    input: &str,
    workspace: Option<PathBuf>,
) -> anyhow::Result<()> {
    let input: Value = serde_json::from_str(input).context("the input is not valid JSON")?;
    let (_backend, plugin) = load_one(component).await?;
    let plugin_name = plugin.name.clone();
    let data = tempfile_dir()?;
    let catalog = Arc::new(toolhost::catalog::Catalog::new());
    let (entry, tools) = plugin.into_catalog_entry();
    catalog.register(entry, tools)?;
    let sessions = Arc::new(toolhost::sessions::Sessions::new(
        &data,
        std::time::Duration::from_secs(3600),
    )?);
    let (session, _) = sessions.open(&toolhost::callers::Caller::anonymous(), Some("local"))?;
    if let Some(dir) = workspace {
        // Point the session's workspace at the given directory.
        let ws = session.workspace_path().to_owned();
        std::fs::create_dir_all(ws.parent().unwrap_or(Path::new(".")))?;
        let dir = std::fs::canonicalize(&dir)
            .with_context(|| format!("no directory {}", dir.display()))?;
        std::os::unix::fs::symlink(&dir, &ws).context("failed to link the workspace")?;
    }
    let dispatcher = toolhost::dispatch::Dispatcher::new(catalog, sessions);
    let id = toolhost::tool::tool_id(&plugin_name, tool);
    let result = dispatcher
        .dispatch(&session, &id, input, Default::default())
        .await;
    let _ = std::fs::remove_dir_all(&data);
    match result {
        Ok(out) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&toolhost::surfaces::render::success_body(&out))?
            );
            Ok(())
        }
        Err(e) => bail!("{} ({})", e, e.kind()),
    }
}

async fn inspect(component: &Path) -> anyhow::Result<()> {
    let (_backend, plugin) = load_one(component).await?;
    let out = json!({
        "plugin": plugin.name,
        "version": plugin.version,
        "description": plugin.description,
        "compile_ms": plugin.compile_time.as_millis() as u64,
        "limits": plugin.limits.view(plugin.toolkit.sandbox().view()),
        "tools": plugin.tools.iter().map(|t| {
            let mut input = t.input_schema.clone();
            toolhost::schema::normalize_input(&mut input);
            let mut output = t.output_schema.clone();
            if let Some(o) = &mut output {
                toolhost::schema::normalize(o);
            }
            json!({
            "tool_id": toolhost::tool::tool_id(&plugin.name, &t.name),
            "name": t.name,
            "description": t.description,
            "input_schema": input,
            "output_schema": output,
        })}).collect::<Vec<_>>(),
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// `toolhost build --cache-key`: the plugin built into a hidden folder of
/// `out` (which no server loads from), compiled into `out`'s
/// `.compile-cache/`, then moved in, its component last: a server watching
/// `out` finds the compiled entry for the new version when it sees it, and
/// serves it at once instead of compiling it.
async fn build_precompiled(
    dir: &Path,
    out: &Path,
    key: toolhost::wasm::CacheKey,
) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(".build-")
        .tempdir_in(out)
        .with_context(|| format!("cannot make a build folder in {}", out.display()))?;
    let built = toolhost::scaffold::build(dir, staging.path())?;
    let cache_dir = out.join(toolhost::wasm::cache::PRECOMPILED_DIR);
    let (backend, precompiled) = precompile(
        &Config::default(),
        staging.path(),
        &cache_dir,
        Some(&built),
        key,
    )
    .await?;
    let placed = out.join(built.file_name().unwrap_or_default());
    // The version this one replaces: its entry goes once the new one is in
    // (a Python plugin's is ~40 MB a version).
    let replaced = std::fs::read(&placed)
        .ok()
        .map(|bytes| toolhost::backend::content_hash(&bytes));
    let mut files: Vec<PathBuf> = std::fs::read_dir(staging.path())?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    // The component last: its arrival is what a server loads on. A file
    // the same as the one in place (the manifest, most builds) is not
    // moved: its arrival alone would have a watching server reload the
    // entry, reading the old component, just before the new one arrives.
    files.sort_by_key(|f| f == &built);
    for file in files {
        let to = out.join(file.file_name().unwrap_or_default());
        if file != built && same_content(&file, &to) {
            continue;
        }
        std::fs::rename(&file, &to)
            .with_context(|| format!("cannot move {} to {}", file.display(), to.display()))?;
    }
    if let (Some(old), Some(cache)) = (replaced, backend.cache())
        && !precompiled.contains(&old)
    {
        cache.forget(&old);
    }
    Ok(placed)
}

/// Compile the components of `dir` (only `only`, if given) into
/// `cache_dir`, authenticated with `key`; without `only`, entries of
/// components no longer there are deleted. Returns the backend and the
/// content hashes of the components compiled (or found compiled).
async fn precompile(
    config: &Config,
    dir: &Path,
    cache_dir: &Path,
    only: Option<&Path>,
    key: toolhost::wasm::CacheKey,
) -> anyhow::Result<(
    std::sync::Arc<WasmBackend>,
    std::collections::HashSet<String>,
)> {
    let backend = WasmBackend::new(&one_shot(config), config.limits, Some((cache_dir, key)))?;
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let wanted = only.is_none_or(|o| o.file_name() == path.file_name());
        if wanted && !name.starts_with('.') && name.ends_with(".wasm") {
            files.push(toolhost::wasm::loader::PluginFile {
                name: name.trim_end_matches(".wasm").to_owned(),
                manifest: Some(path.with_extension("toml")).filter(|p| p.is_file()),
                wasm: path,
            });
        }
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let loads = files
        .iter()
        .map(|f| toolhost::wasm::loader::load_file(&backend, f));
    let mut keep = std::collections::HashSet::new();
    for (file, loaded) in files.iter().zip(futures::future::join_all(loads).await) {
        match loaded {
            Ok(p) => {
                eprintln!(
                    "precompiled {} ({}, {:.0} ms)",
                    file.wasm.display(),
                    p.origin.as_str(),
                    p.compile_time.as_secs_f64() * 1000.0
                );
                keep.insert(p.version);
            }
            // Not a plugin this host loads: the server will say why.
            Err(e) => eprintln!("not precompiled {}: {e}", file.wasm.display()),
        }
    }
    if let Some(cache) = backend.cache() {
        // The entries are written behind the loads: done before the caller
        // goes on (`build --cache-key` then moves the component in).
        let written = cache.clone();
        tokio::task::spawn_blocking(move || written.wait_written()).await?;
        if only.is_none() {
            cache.prune(&keep);
        }
    }
    Ok((backend, keep))
}

/// Whether files `a` and `b` both exist with the same bytes.
fn same_content(a: &Path, b: &Path) -> bool {
    match (std::fs::read(a), std::fs::read(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("toolhost-call-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
