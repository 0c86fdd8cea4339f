//! Putting a server together: engine, sessions, catalog loaded from the
//! plugins directory (and kept in step with it), dispatcher, router.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::catalog::Catalog;
use crate::config::Config;
use crate::dispatch::Dispatcher;
use crate::metrics::Metrics;
use crate::nodes::NodeBackend;
use crate::plugins::{PluginManager, State, watch};
use crate::sessions::Sessions;
use crate::wasm::WasmBackend;
use toolhost_surfaces::{self as surfaces, AdminToken, ApiLimits, AppState};

/// A running server's parts.
pub struct Server {
    pub dispatcher: Arc<Dispatcher>,
    pub wasm: Arc<WasmBackend>,
    pub docker: Option<Arc<NodeBackend>>,
    pub plugins: Arc<PluginManager>,
    /// Tool requests and their builds.
    pub requests: Arc<crate::tasks::Tasks>,
    callbacks: Arc<crate::tasks::build::Callbacks>,
    events: Arc<crate::events::Events>,
    health: Arc<crate::health::Health>,
    /// Coding agents' build environments.
    pub builders: Arc<crate::builder::Builders>,
    _watcher: Option<watch::DirWatcher>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Cancelled by [`serve`] when a shutdown signal arrives.
    pub shutdown: CancellationToken,
    /// The background load of the plugins directory, and its end.
    loading: Mutex<
        Option<(
            tokio::task::JoinHandle<()>,
            tokio::sync::watch::Receiver<bool>,
        )>,
    >,
}

impl Drop for Server {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Some((task, _)) = self
            .loading
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
    }
}

impl Server {
    /// [`Server::build`], [`Server::load_plugins`], and wait until every
    /// plugin on disk has loaded or failed.
    pub async fn start(config: &Config, plugins: &Path, data: &Path) -> anyhow::Result<Server> {
        let server = Self::build(config, plugins, data).await?;
        server.load_plugins();
        server.loaded().await;
        Ok(server)
    }

    /// Build the engine, the sessions and the Docker toolkits, and watch the
    /// plugins directory (unless `[plugins] watch = false`); milliseconds,
    /// no plugin compiled yet: that is [`Server::load_plugins`]'s, behind a
    /// server that already answers. A plugin that fails to load is logged,
    /// shown in its status, and skipped; the others serve.
    pub async fn build(config: &Config, plugins: &Path, data: &Path) -> anyhow::Result<Server> {
        Self::build_with(config, plugins, data, Vec::new()).await
    }

    /// [`Server::build`] with more backends, which claim entries of the
    /// plugins directory beside the built-in ones (after Docker, before
    /// wasm): a new kind of tool needs nothing else.
    pub async fn build_with(
        config: &Config,
        plugins: &Path,
        data: &Path,
        more: Vec<Arc<dyn Backend>>,
    ) -> anyhow::Result<Server> {
        // Absolute from here on: relative paths reach Docker as bind-mount
        // sources, which it takes for volume names and refuses (`make run`
        // passes `--plugins target/plugins --data target/data`).
        let (plugins, data) = resolve_dirs(plugins, data)?;
        let (plugins, data) = (plugins.as_path(), data.as_path());
        tracing::info!(plugins = %plugins.display(), data = %data.display(), "directories");
        // The registry first: it is locked for this process, so a second
        // server on the same data directory stops here, before it touches
        // the sessions' workspaces or the containers.
        let secrets = crate::credentials::Secrets::new(config.secrets.0.clone());
        let (registry, saved) =
            crate::registry::Registry::open_with(data, &config.registry, &secrets)?;
        tracing::info!(
            statuses = saved.statuses.len(),
            stats = saved.stats.len(),
            known_tools = saved.tools.len(),
            replica = registry.replicas().id(),
            "tool registry open"
        );
        let cache_dir = data.join("compile-cache");
        let cache = match config.plugins.compile_cache {
            true => {
                let key_file = config
                    .plugins
                    .cache_key
                    .clone()
                    .unwrap_or_else(|| data.join(crate::wasm::cache::KEY_FILE));
                Some((
                    cache_dir.as_path(),
                    crate::wasm::CacheKey::load_or_create(&key_file)?,
                ))
            }
            false => None,
        };
        let wasm = WasmBackend::new(&config.engine, config.limits, cache)?;
        let metrics = Arc::new(match config.server.metrics {
            true => Metrics::new(),
            false => Metrics::off(),
        });
        wasm.set_metrics(&metrics);
        // Components the build precompiled (`toolhost precompile`), read
        // when the data directory's cache has no entry: a fresh data
        // directory starts warm.
        if let Some(cache) = wasm.cache() {
            cache.add_seed(&plugins.join(crate::wasm::cache::PRECOMPILED_DIR));
        }
        tracing::info!(
            pool_instances = config.engine.pool_instances,
            virtual_reservation_gib = wasm.reservation_bytes() as f64 / (1u64 << 30) as f64,
            "wasm engine ready (the pool's address space is reserved, not committed)"
        );
        let sessions = Arc::new(
            Sessions::new(data, Duration::from_secs(config.sessions.idle_timeout_s))
                .with_context(|| format!("failed to open the data directory {}", data.display()))?
                .with_max(config.sessions.max_sessions)
                .with_replicas(config.registry.url.is_some()),
        );
        let reaper =
            sessions.spawn_reaper(Duration::from_secs(config.sessions.reap_interval_s.max(1)));
        let catalog = Arc::new(Catalog::new());
        let mut saved = saved;
        let saved_tasks = std::mem::take(&mut saved.tasks);
        let saved_billing = std::mem::take(&mut saved.billing);
        let saved_pins = std::mem::take(&mut saved.pins)
            .into_iter()
            .filter_map(|p| {
                let definition = serde_json::from_str(&p.definition).ok()?;
                let pin = crate::pins::Pin {
                    toolkit: p.toolkit,
                    digest: p.digest,
                    definition,
                };
                Some((p.tool_id, pin))
            })
            .collect();
        catalog.attach_registry(registry.clone(), saved);
        let adding = Arc::downgrade(&catalog);
        registry.on_stats(Box::new(move |rows| {
            if let Some(catalog) = adding.upgrade() {
                catalog.stored_stats(rows);
            }
        }));
        catalog.attach_pins(Arc::new(crate::pins::Pins::new(
            config.pins.mode,
            saved_pins,
        )));
        let flusher = {
            let catalog = catalog.clone();
            let every = Duration::from_millis(config.registry.flush_ms.max(10));
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    catalog.flush_stats();
                }
            })
        };
        let mut tasks = vec![reaper, flusher];
        // The node backend and its provider: `[kubernetes]` gives
        // Docker-kind toolkits their nodes from a cluster (no Docker engine
        // is used then, whatever `[docker] enabled` says); else the Docker
        // engines of `[docker]`.
        let docker = match config.docker.enabled || config.kubernetes.is_some() {
            true => {
                let docker = match &config.kubernetes {
                    Some(k) => {
                        let scope = crate::nodes::scope_of(data);
                        let cluster = crate::nodes::kubernetes::Cluster::connect(k, &scope)
                            .await
                            .map_err(|e| anyhow::anyhow!("[kubernetes]: {e}"))?;
                        tracing::info!(namespace = %k.namespace, instance = %cluster.instance(), "heavy-tool nodes come from the Kubernetes cluster (agent-sandbox)");
                        NodeBackend::with_cluster(data, sessions.clone(), cluster)
                    }
                    None => NodeBackend::with_config(
                        data,
                        sessions.clone(),
                        &config.docker,
                        registry.replicas().clone(),
                    )
                    .map_err(|e| anyhow::anyhow!("[docker]: {e}"))?,
                };
                let resources: Arc<dyn crate::sessions::SessionResources> = docker.clone();
                sessions.add_resources(Arc::downgrade(&resources));
                tasks.push(docker.start());
                Some(docker)
            }
            false => None,
        };
        // Docker toolkits load first: a wasm plugin cannot take their names.
        let mut backends: Vec<Arc<dyn Backend>> = Vec::new();
        if let Some(docker) = &docker {
            backends.push(docker.clone());
        }
        wasm.set_secrets(secrets.clone());
        // Where code may come from: components, and the images of Docker
        // toolkits.
        let provenance = Arc::new(crate::oci::Provenance {
            trust: crate::trust::Trust::from_config(&config.trust).map_err(anyhow::Error::msg)?,
            registries: config.oci.logins.clone(),
            secrets: secrets.clone(),
        });
        wasm.set_provenance(provenance.clone());
        if let Some(docker) = &docker {
            docker.set_provenance(provenance.clone());
        }
        backends.push(Arc::new(crate::httpapi::ApiBackend::new(secrets.clone())));
        let mcp = crate::mcpserver::McpBackend::new(secrets, docker.clone());
        let resources: Arc<dyn crate::sessions::SessionResources> = mcp.clone();
        sessions.add_resources(Arc::downgrade(&resources));
        backends.push(mcp);
        if config.mock.enabled {
            backends.push(Arc::new(crate::mock::MockBackend));
        }
        let dispatcher_slot = crate::backend::ToolCallsSlot::default();
        backends.push(crate::interpreter::InterpreterBackend::new(
            dispatcher_slot.clone(),
        ));
        backends.extend(more);
        backends.push(wasm.clone());
        let manager = PluginManager::new(plugins, backends, catalog.clone());
        manager.names_on_disk().with_context(|| {
            format!("failed to read the plugins directory {}", plugins.display())
        })?;
        let watcher = if config.plugins.watch {
            let p = &config.plugins;
            let timing = watch::Timing {
                debounce: Duration::from_millis(p.debounce_ms),
                settle: Duration::from_millis(p.settle_ms),
                rescan: Duration::from_secs(p.rescan_interval_s),
            };
            let w = watch::spawn(manager.clone(), timing)
                .with_context(|| format!("failed to watch {}", plugins.display()))?;
            Some(w)
        } else {
            None
        };
        let dispatcher = Arc::new(Dispatcher::new(catalog.clone(), sessions).with_metrics(metrics));
        let tool_calls: Arc<dyn crate::backend::ToolCalls> = dispatcher.clone();
        let _ = dispatcher_slot.set(Arc::downgrade(&tool_calls));
        let callbacks = Arc::new(
            crate::tasks::build::Callbacks::new(
                &config.tasks.callback_allow,
                &config.tasks.git_allow,
            )
            .map_err(|e| anyhow::anyhow!("[tasks] callback_allow: {e}"))?,
        );
        let (tasks_, queue) =
            crate::tasks::Tasks::new(Some(registry.clone()), saved_tasks, config.budget.clone());
        tasks_.billing.load(&saved_billing);
        let events = crate::events::Events::new(&config.events, callbacks.clone())
            .map_err(|e| anyhow::anyhow!(e))?;
        let _ = tasks_.events.set(events.clone());
        let health = crate::health::Health::new(config.health.clone());
        let _ = health
            .on_degraded
            .set(Box::new(crate::tasks::repair::on_degraded(
                config.health.repair,
                Arc::downgrade(&tasks_),
                Arc::downgrade(&catalog),
                Arc::downgrade(&health),
                manager.dir().to_owned(),
            )));
        health.attach(registry.clone());
        health.spawn(catalog.clone(), events.clone(), Arc::downgrade(&dispatcher));
        let builder = Arc::new(crate::tasks::build::Builder {
            tasks: tasks_.clone(),
            plugins: manager.clone(),
            dispatcher: dispatcher.clone(),
            builds: data.join("builds"),
            sdk: crate::scaffold::sdk_dir(),
            timeout: Duration::from_secs(config.tasks.build_timeout_s.max(1)),
            callbacks: callbacks.clone(),
        });
        tasks.push(builder.spawn(queue));
        // Replicas on one database follow each other's status changes and
        // tasks, and take over the builds of a replica that is gone.
        let following = (
            Arc::downgrade(&catalog),
            Arc::downgrade(&tasks_),
            Arc::downgrade(&health),
        );
        registry.follow(move |change| {
            let (Some(catalog), Some(tasks), Some(health)) = (
                following.0.upgrade(),
                following.1.upgrade(),
                following.2.upgrade(),
            ) else {
                return;
            };
            match change {
                crate::registry::Followed::Status(id, status) => catalog.follow_status(&id, status),
                crate::registry::Followed::Task(body) => tasks.followed(&body),
                crate::registry::Followed::Forgotten(id) => tasks.forgotten(&id),
                crate::registry::Followed::Billing(body) => tasks.billing.followed(&body),
                crate::registry::Followed::Fallback(id, body) => {
                    catalog.follow_fallback(&id, &body)
                }
                crate::registry::Followed::Health(id, replica, body) => {
                    health.followed(&id, &replica, &body)
                }
            }
        });
        if registry.replicas().shared_scope().is_some() {
            let taking = tasks_.clone();
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(crate::registry::replicas::HEARTBEAT);
                loop {
                    tick.tick().await;
                    taking.take_over();
                }
            }));
        }
        let builders =
            crate::builder::Builders::new(docker.clone(), data, "toolhost-node:latest".to_owned());
        Ok(Server {
            dispatcher,
            wasm,
            docker,
            plugins: manager,
            requests: tasks_,
            callbacks,
            events,
            health,
            builders,
            _watcher: watcher,
            tasks,
            shutdown: CancellationToken::new(),
            loading: Mutex::new(None),
        })
    }

    /// Load every plugin of the directory in the background: each is listed
    /// as `compiling` at once (a call to one of its tools waits for it), and
    /// its tools appear as it becomes ready, smallest component first.
    pub fn load_plugins(&self) {
        let (done, loaded) = tokio::sync::watch::channel(false);
        let manager = self.plugins.clone();
        let catalog = self.dispatcher.catalog().clone();
        // Listed as compiling now, before the caller answers anything.
        let keys = manager.mark_all().unwrap_or_else(|e| {
            tracing::error!(dir = %manager.dir().display(), error = %e, "cannot read the plugins directory");
            Vec::new()
        });
        let task = tokio::spawn(async move {
            let started = Instant::now();
            manager.load_marked(keys).await;
            let statuses = manager.list();
            let failed: Vec<&str> = statuses
                .iter()
                .filter(|s| s.state == State::Failed)
                .map(|s| s.name.as_str())
                .collect();
            tracing::info!(
                tools = catalog.tools().len(),
                plugins = statuses.len() - failed.len(),
                ?failed,
                ms = started.elapsed().as_millis() as u64,
                "all plugins loaded"
            );
            let _ = done.send(true);
        });
        let old = self
            .loading
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace((task, loaded));
        if let Some((task, _)) = old {
            task.abort();
        }
    }

    /// Wait until the plugins [`Server::load_plugins`] started loading have
    /// loaded or failed (at once if it was not called).
    pub async fn loaded(&self) {
        let loaded = self
            .loading
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|(_, rx)| rx.clone());
        if let Some(mut rx) = loaded {
            let _ = rx.wait_for(|done| *done).await;
        }
    }

    /// Release what outlives the process otherwise (the Docker nodes):
    /// every backend's shutdown.
    pub async fn shutdown(&self) {
        self.builders.shutdown().await;
        self.plugins.shutdown().await;
        let catalog = self.dispatcher.catalog();
        catalog.flush_stats();
        if let Some(registry) = catalog.registry() {
            if let Err(e) = registry.sync().await {
                tracing::error!(error = %e, "the last statistics were not saved");
            }
            registry.close();
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
            max_mcp_sessions: config.sessions.max_mcp_sessions,
            mcp_unfinished_timeout: std::time::Duration::from_secs(
                config.sessions.mcp_unfinished_timeout_s,
            ),
        };
        let auth = surfaces::auth::CallerAuth::from_config(&config.auth);
        let callers = match &auth {
            Some(auth) => auth.callers(),
            None => vec![crate::callers::Caller::anonymous()],
        };
        surfaces::router(
            AppState {
                callers: Arc::new(callers),
                auth: auth.clone(),
                dispatcher: self.dispatcher.clone(),
                plugins: self.plugins.clone(),
                admin_token: config.auth.admin_token.as_deref().map(AdminToken::new),
                limits,
                retriever: Default::default(),
                tasks: self.requests.clone(),
                builders: self.builders.clone(),
                callbacks: self.callbacks.clone(),
                events: self.events.clone(),
                health: self.health.clone(),
                parked: Arc::new(surfaces::xagent::Parked::new(
                    std::time::Duration::from_millis(config.xagent.patience_ms),
                )),
                shutdown: Arc::new(self.shutdown.clone()),
            },
            limits,
            surfaces::guard::Guard::new(
                config.server.bind.ip(),
                &config.server.allowed_hosts,
                &config.server.allowed_origins,
            ),
            auth,
        )
        // The Docker engines, for `GET /plugins` and the drain route.
        .layer(axum::Extension(surfaces::engines::Engines(
            self.docker.clone(),
        )))
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

/// How the server's connections are bounded ([`serve`]).
pub struct ConnLimits {
    pub max_connections: usize,
    pub max_per_peer: usize,
    /// For a request's headers, and for the next request on an idle
    /// kept-alive connection.
    pub header_timeout: Duration,
}

impl ConnLimits {
    pub fn of(config: &surfaces::config::ServerConfig) -> Self {
        ConnLimits {
            max_connections: config.max_connections,
            max_per_peer: config.max_connections_per_peer,
            header_timeout: Duration::from_millis(config.header_timeout_ms.max(1)),
        }
    }
}

/// Serve `router` on `listener` until Ctrl-C or SIGTERM; then cancel
/// `shutdown` so long-lived streams end and the graceful shutdown completes.
/// Each connection: bounded in number ([`surfaces::conns::Limited`]), no
/// Nagle (SSE responses, MCP and native streaming, are written as several
/// small frames, and Nagle with the client's delayed ACK held each following
/// frame ~40 ms), and closed when headers take longer than
/// `header_timeout` (a new request's, or the next on a kept-alive one).
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: ConnLimits,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    use axum::serve::Listener as _;
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

    let mut listener =
        surfaces::conns::Limited::new(listener, limits.max_connections, limits.max_per_peer);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            (io, _peer) = listener.accept() => {
                let service = hyper_util::service::TowerToHyperService::new(router.clone());
                let connection = builder
                    .serve_connection_with_upgrades(TokioIo::new(io), service)
                    .into_owned();
                // Polled quietly: hyper hands each request's body to the
                // handler through a channel in this same task, which woke
                // the task while it ran and so another worker, for nothing
                // (two context switches a POST: docs/benchmarks.md).
                let connection = toolhost_core::quiet::quietly(graceful.watch(connection));
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::trace!(error = %e, "connection ended with an error");
                    }
                });
            }
            () = &mut stop => break,
        }
    }
    shutdown.cancel();
    drop(listener);
    graceful.shutdown().await;
    Ok(())
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
