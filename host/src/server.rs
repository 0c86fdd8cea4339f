//! Putting a server together: engine, sessions, catalog loaded from the
//! plugins directory, dispatcher, router.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::api::{self, AppState};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::dispatch::Dispatcher;
use crate::sessions::Sessions;
use crate::wasm::{WasmBackend, loader};

/// A running server's parts.
pub struct Server {
    pub dispatcher: Arc<Dispatcher>,
    pub wasm: Arc<WasmBackend>,
    /// Plugin files that failed to load, with the reason.
    pub load_errors: Vec<(String, String)>,
    reaper: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.reaper.abort();
    }
}

impl Server {
    /// Build the engine and load every plugin in `plugins`. A plugin that fails
    /// to load is logged and skipped; the others serve.
    pub async fn start(config: &Config, plugins: &Path, data: &Path) -> anyhow::Result<Server> {
        let wasm = WasmBackend::new(&config.engine, config.limits)?;
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
        let files = loader::scan(plugins).with_context(|| {
            format!("failed to read the plugins directory {}", plugins.display())
        })?;
        let mut load_errors = Vec::new();
        for file in files {
            let result = match loader::load_file(&wasm, &file).await {
                Ok(plugin) => {
                    let (name, version, ms) = (
                        plugin.name.clone(),
                        plugin.version.clone(),
                        plugin.compile_time.as_millis(),
                    );
                    let (entry, tools) = plugin.into_catalog_entry();
                    let ids: Vec<String> = tools
                        .iter()
                        .map(|t| crate::tool::tool_id(&name, &t.name))
                        .collect();
                    catalog.register(entry, tools).map(|()| {
                        tracing::info!(plugin = %name, version = &version[..12], compile_ms = ms as u64, tools = ?ids, "plugin loaded");
                    }).map_err(|e| e.to_string())
                }
                Err(e) => Err(e.to_string()),
            };
            if let Err(error) = result {
                tracing::warn!(plugin = %file.name, file = %file.wasm.display(), %error, "plugin not loaded");
                load_errors.push((file.name.clone(), error));
            }
        }
        tracing::info!(
            tools = catalog.tools().len(),
            plugins = catalog.toolkits().len(),
            "catalog ready"
        );
        Ok(Server {
            dispatcher: Arc::new(Dispatcher::new(catalog, sessions)),
            wasm,
            load_errors,
            reaper,
        })
    }

    /// The HTTP API of this server.
    pub fn router(&self, config: &Config) -> axum::Router {
        api::router(
            AppState {
                dispatcher: self.dispatcher.clone(),
            },
            config.server.max_body_kb as usize * 1024,
        )
    }
}

/// Serve `router` on `listener` until Ctrl-C or SIGTERM.
pub async fn serve(listener: tokio::net::TcpListener, router: axum::Router) -> anyhow::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown_signal())
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
