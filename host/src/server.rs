//! Putting a server together: engine, sessions, catalog loaded from the
//! plugins directory (and kept in step with it), dispatcher, router.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::serve::ListenerExt;
use tokio_util::sync::CancellationToken;

use crate::api::{self, AdminToken, ApiLimits, AppState};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::dispatch::Dispatcher;
use crate::docker::DockerBackend;
use crate::metrics::Metrics;
use crate::plugins::{PluginManager, State, watch};
use crate::sessions::Sessions;
use crate::wasm::WasmBackend;

/// A running server's parts.
pub struct Server {
    pub dispatcher: Arc<Dispatcher>,
    pub wasm: Arc<WasmBackend>,
    pub docker: Option<Arc<DockerBackend>>,
    pub plugins: Arc<PluginManager>,
    _watcher: Option<watch::DirWatcher>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Cancelled by [`serve`] when a shutdown signal arrives.
    pub shutdown: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Server {
    /// Build the engine and load every plugin in `plugins`, then watch the
    /// directory (unless `[plugins] watch = false`). A plugin that fails to
    /// load is logged, shown in its status, and skipped; the others serve.
    pub async fn start(config: &Config, plugins: &Path, data: &Path) -> anyhow::Result<Server> {
        // Absolute from here on: relative paths reach Docker as bind-mount
        // sources, which it takes for volume names and refuses (`make run`
        // passes `--plugins target/plugins --data target/data`).
        let (plugins, data) = resolve_dirs(plugins, data)?;
        let (plugins, data) = (plugins.as_path(), data.as_path());
        tracing::info!(plugins = %plugins.display(), data = %data.display(), "directories");
        let cache_dir = data.join("compile-cache");
        let wasm = WasmBackend::new(
            &config.engine,
            config.limits,
            config.plugins.compile_cache.then_some(cache_dir.as_path()),
        )?;
        tracing::info!(
            pool_instances = config.engine.pool_instances,
            virtual_reservation_gib = wasm.reservation_bytes() as f64 / (1u64 << 30) as f64,
            "wasm engine ready (the pool's address space is reserved, not committed)"
        );
        let sessions = Arc::new(
            Sessions::new(data, Duration::from_secs(config.sessions.idle_timeout_s))
                .with_context(|| format!("failed to open the data directory {}", data.display()))?,
        );
        let reaper =
            sessions.spawn_reaper(Duration::from_secs(config.sessions.reap_interval_s.max(1)));
        let catalog = Arc::new(Catalog::new());
        let mut tasks = vec![reaper];
        // Docker toolkits first: a wasm plugin cannot take their names.
        let docker = config.docker.enabled.then(|| {
            let docker = DockerBackend::new(data, sessions.clone());
            docker.register_toolkits(plugins, &catalog);
            tasks.push(docker.start());
            docker
        });
        let manager = PluginManager::new(plugins, wasm.clone(), catalog.clone());
        let started = Instant::now();
        manager.load_all().await.with_context(|| {
            format!("failed to read the plugins directory {}", plugins.display())
        })?;
        let watcher = if config.plugins.watch {
            let w = watch::spawn(
                manager.clone(),
                Duration::from_millis(config.plugins.debounce_ms),
                Duration::from_secs(config.plugins.rescan_interval_s),
            )
            .with_context(|| format!("failed to watch {}", plugins.display()))?;
            Some(w)
        } else {
            None
        };
        tracing::info!(
            tools = catalog.tools().len(),
            plugins = catalog.toolkits().len(),
            failed = manager
                .list()
                .iter()
                .filter(|s| s.state == State::Failed)
                .count(),
            ms = started.elapsed().as_millis() as u64,
            watching = config.plugins.watch,
            "catalog ready"
        );
        Ok(Server {
            dispatcher: Arc::new(Dispatcher::new(catalog, sessions).with_metrics(
                if config.server.metrics {
                    Metrics::new()
                } else {
                    Metrics::off()
                },
            )),
            wasm,
            docker,
            plugins: manager,
            _watcher: watcher,
            tasks,
            shutdown: CancellationToken::new(),
        })
    }

    /// Release what outlives the process otherwise: the Docker nodes.
    pub async fn shutdown(&self) {
        if let Some(docker) = &self.docker {
            docker.shutdown().await;
        }
    }

    /// Plugins that failed to load, with the reason.
    pub fn load_errors(&self) -> Vec<(String, String)> {
        self.plugins
            .list()
            .into_iter()
            .filter_map(|s| Some((s.name, s.error?)))
            .collect()
    }

    /// The HTTP API of this server.
    pub fn router(&self, config: &Config) -> axum::Router {
        let limits = ApiLimits {
            max_body_bytes: config.server.max_body_kb as usize * 1024,
            body_timeout: std::time::Duration::from_millis(config.server.body_timeout_ms),
            max_upload_bytes: config.plugins.max_upload_mb as usize * 1024 * 1024,
        };
        api::router(
            AppState {
                dispatcher: self.dispatcher.clone(),
                plugins: self.plugins.clone(),
                admin_token: config.auth.admin_token.as_deref().map(AdminToken::new),
                limits,
                docker: self.docker.clone(),
                retriever: Default::default(),
                shutdown: self.shutdown.clone(),
            },
            limits,
            mcp_allowed_hosts(config.server.bind.ip()),
            api::auth::CallerAuth::from_config(&config.auth),
        )
    }
}

/// The plugins and data directories as absolute paths, symlinks resolved
/// (the data directory is created if missing).
fn resolve_dirs(plugins: &Path, data: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(data)
        .with_context(|| format!("failed to create the data directory {}", data.display()))?;
    let data = std::fs::canonicalize(data)
        .with_context(|| format!("failed to resolve the data directory {}", data.display()))?;
    let plugins = std::fs::canonicalize(plugins)
        .or_else(|_| std::path::absolute(plugins))
        .with_context(|| {
            format!(
                "failed to resolve the plugins directory {}",
                plugins.display()
            )
        })?;
    Ok((plugins, data))
}

/// The `Host` headers `/mcp` accepts: loopback names on a loopback address
/// (DNS-rebinding protection, the MCP spec's advice for local servers); any on
/// another address, where the operator puts the server behind its own names.
fn mcp_allowed_hosts(ip: std::net::IpAddr) -> Option<Vec<String>> {
    ip.is_loopback().then(|| {
        ["localhost", "127.0.0.1", "::1", "[::1]"]
            .into_iter()
            .map(String::from)
            .collect()
    })
}

/// Serve `router` on `listener` until Ctrl-C or SIGTERM; then cancel
/// `shutdown` so long-lived streams end and the graceful shutdown completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    // No Nagle: SSE responses (MCP, native streaming) are written as several
    // small frames, and Nagle with the client's delayed ACK held each
    // following frame ~40 ms.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            shutdown.cancel();
        })
        .await
        .context("the HTTP server failed")
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("failed to install the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
}
