//! MCP servers as toolkits: toolhost as an MCP gateway. A folder
//! `<plugins>/<name>/` whose `<name>.toml` has an `[mcp]` table (see
//! [`manifest`]) mounts a remote server (streamable HTTP) through rmcp's
//! client: its tools join the catalog under the toolkit's prefix (schemas
//! normalised like every tool's; an invalid one skipped with a warning), a
//! `notifications/tools/list_changed` reloads the toolkit (swapped like any
//! new version, on the same connection), calls are forwarded with their
//! arguments, progress notifications become toolhost progress, and a call
//! that ends early (the caller went away, its time limit) is cancelled on the
//! server.

mod asks;
mod backend;
pub mod client;
mod http;
mod listing;
pub mod manifest;
pub mod mount;
mod routes;
mod toolkit;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::backend::{EntryFile, Loaded, Refresh, content_hash, folder_manifest};
use crate::credentials::Secrets;
use crate::outbound::HttpPolicy;
use crate::tool::{self, CallError, Limits};
use client::{Connection, Handler};
use toolkit::McpToolkit;

/// A server that ran this long before it exited is not counted as failing
/// again (its restarts in a row start over), nor shown degraded after it.
const STABLE: Duration = Duration::from_secs(60);

/// How long a streamed call waits, once answered, for progress the server
/// sent just before the answer.
pub(crate) const PROGRESS_GRACE: Duration = Duration::from_millis(20);

/// A session's server of a toolkit, made once.
type SessionCell = Arc<tokio::sync::OnceCell<Arc<Connection>>>;

/// The backend of MCP-server toolkits.
pub struct McpBackend {
    /// This backend, for the toolkits it makes.
    me: std::sync::Weak<McpBackend>,
    secrets: Secrets,
    /// Runs servers given as a command (stdio), in node containers.
    docker: Option<Arc<crate::nodes::NodeBackend>>,
    /// Restarts in a row of each toolkit's server (a server that lived a
    /// minute starts the count again), the last one's words, and when.
    restarts: Mutex<HashMap<String, (u32, String, std::time::Instant)>>,
    /// Each toolkit whose server floods `tools/list_changed`: how many came
    /// in one reload window, and when.
    floods: Mutex<HashMap<String, (u64, std::time::Instant)>>,
    refresh: OnceLock<Refresh>,
    /// Each toolkit's live connection, with the manifest it was made for.
    connections: Mutex<HashMap<String, (String, Arc<Connection>)>>,
    /// Per-session servers, by (toolkit, session); made on a session's
    /// first call, stopped when the session is released.
    per_session: Mutex<HashMap<(String, String), SessionCell>>,
}

impl McpBackend {
    /// A reload window of `toolkit` ended with `count` list changes: past
    /// [`FLOOD`], the server is flooding (shown degraded, logged once a
    /// flood).
    fn note_changes(&self, toolkit: &str, count: u64) {
        if count < FLOOD {
            return;
        }
        let mut floods = self.floods.lock().unwrap_or_else(|e| e.into_inner());
        let ongoing = floods
            .get(toolkit)
            .is_some_and(|(_, at)| at.elapsed() < FLOOD_SHOWN);
        if !ongoing {
            tracing::warn!(
                toolkit,
                count,
                "MCP server floods tools/list_changed: reloads held to one per {} ms; shown degraded",
                LIST_CHANGED_EVERY.as_millis()
            );
        }
        floods.insert(toolkit.to_owned(), (count, std::time::Instant::now()));
    }

    pub fn new(secrets: Secrets, docker: Option<Arc<crate::nodes::NodeBackend>>) -> Arc<Self> {
        Arc::new_cyclic(|me| McpBackend {
            me: me.clone(),
            per_session: Mutex::default(),
            secrets,
            docker,
            restarts: Mutex::default(),
            floods: Mutex::default(),
            refresh: OnceLock::new(),
            connections: Mutex::default(),
        })
    }

    /// Stop the per-session servers matching `which` (awaited).
    async fn close_sessions(&self, which: impl Fn(&(String, String)) -> bool) {
        let closing: Vec<SessionCell> = {
            let mut map = self.per_session.lock().unwrap_or_else(|e| e.into_inner());
            let keys: Vec<_> = map.keys().filter(|k| which(k)).cloned().collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        futures::future::join_all(
            closing
                .iter()
                .filter_map(|cell| cell.get())
                .map(|conn| conn.close()),
        )
        .await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Arc<Connection>)>> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The live connection made for this manifest, else a new one (a
    /// server that exited is started again, after a backoff that grows with
    /// its restarts in a row).
    async fn connection(
        &self,
        name: &str,
        identity: &str,
        folder: &Path,
        m: &manifest::McpSection,
    ) -> Result<Arc<Connection>, String> {
        let previous = self.lock().get(name).cloned();
        if let Some((made_for, conn)) = &previous
            && made_for == identity
            && conn.is_usable()
        {
            return Ok(conn.clone());
        }
        // The same manifest's server is gone: a restart.
        let restart = previous
            .as_ref()
            .is_some_and(|(made_for, _)| made_for == identity);
        if restart {
            let (count, why) = {
                let mut restarts = self.restarts.lock().unwrap_or_else(|e| e.into_inner());
                let entry = restarts.entry(name.to_owned()).or_insert((
                    0,
                    String::new(),
                    std::time::Instant::now(),
                ));
                let lived = previous.as_ref().map_or(Duration::ZERO, |(_, c)| c.age());
                if lived > STABLE {
                    entry.0 = 0;
                }
                entry.0 += 1;
                entry.1 = previous
                    .as_ref()
                    .map(|(_, c)| c.stderr_tail())
                    .unwrap_or_default();
                entry.2 = std::time::Instant::now();
                (entry.0, entry.1.clone())
            };
            let pause = Duration::from_millis(250u64 << count.min(6)).min(Duration::from_secs(10));
            tracing::warn!(toolkit = name, restarts = count, stderr = %why, ?pause, "MCP server exited; restarting it");
            tokio::time::sleep(pause).await;
        }
        let refresh = self.refresh.get().cloned();
        let toolkit = name.to_owned();
        let me = self.me.clone();
        let (handler, waiting, asking) = Handler::new(
            client::coalescing(LIST_CHANGED_EVERY, move |absorbed| {
                tracing::info!(
                    toolkit,
                    absorbed,
                    "MCP server: its tool list changed; reloading"
                );
                if let Some(me) = me.upgrade() {
                    me.note_changes(&toolkit, absorbed + 1);
                }
                if let Some(r) = &refresh {
                    r.entry(&toolkit);
                }
            }),
            false,
        );
        let within = Duration::from_millis(m.init_timeout_ms);
        let late = || {
            format!(
                "the MCP server did not finish initialize within {} ms",
                m.init_timeout_ms
            )
        };
        let conn = match (&m.url, &m.command) {
            (Some(url), _) => {
                let (client, config) = self.remote(url, m)?;
                let client = http::SessionAware::new(client);
                let lost = client.lost();
                let transport = StreamableHttpClientTransport::with_client(client, config);
                let service = tokio::time::timeout(within, handler.serve(transport))
                    .await
                    .map_err(|_| late())?
                    .map_err(|e| format!("the MCP server's initialize failed: {e}"))?;
                Connection::new(service, (waiting, asking), None).losing_calls_on(lost)
            }
            (None, Some(command)) => {
                let spec = stdio_spec(name, folder, command, m)?;
                self.start_stdio(
                    &spec,
                    "shared",
                    handler,
                    (waiting, asking),
                    m.init_timeout_ms,
                )
                .await?
            }
            (None, None) => return Err("[mcp] names no server".into()),
        };
        let conn = Arc::new(conn);
        self.lock()
            .insert(name.to_owned(), (identity.to_owned(), conn.clone()));
        Ok(conn)
    }

    /// Start `spec` in a node for `session` and initialize it.
    async fn start_stdio(
        &self,
        spec: &crate::nodes::stdio::StdioSpec,
        session: &str,
        handler: Handler,
        routes: (client::Waiting, client::Asking),
        init_timeout_ms: u64,
    ) -> Result<Connection, String> {
        let docker = self
            .docker
            .clone()
            .ok_or("servers run from a command need the Docker backend ([docker] enabled)")?;
        let (process, container) = docker
            .spawn_stdio(spec, session)
            .await
            .map_err(|e| e.to_string())?;
        let stderr = process.stderr.clone();
        let within = Duration::from_millis(init_timeout_ms);
        let served =
            tokio::time::timeout(within, handler.serve((process.output, process.input))).await;
        let tail = || crate::nodes::stdio::tail(&stderr);
        let service = served
            .map_err(|_| {
                format!(
                    "the MCP server did not finish initialize within {init_timeout_ms} ms (stderr: {})",
                    tail()
                )
            })?
            .map_err(|e| format!("the MCP server's initialize failed: {e} (stderr: {})", tail()))?;
        Ok(Connection::new(
            service,
            routes,
            Some((container, stderr.clone())),
        ))
    }

    /// Session `session`'s own server of toolkit `toolkit` (made on its
    /// first call, with the session's workspace at /workspace).
    async fn session_connection(
        &self,
        toolkit: &str,
        spec: &crate::nodes::stdio::StdioSpec,
        init_timeout_ms: u64,
        session: &crate::sessions::Session,
    ) -> Result<Arc<Connection>, CallError> {
        let key = (toolkit.to_owned(), session.id().to_owned());
        let cell = loop {
            let cell = self
                .per_session
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(key.clone())
                .or_default()
                .clone();
            match cell.get() {
                // A server that exited is replaced.
                Some(conn) if !conn.is_usable() => {
                    let mut map = self.per_session.lock().unwrap_or_else(|e| e.into_inner());
                    if map.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                        map.remove(&key);
                    }
                }
                _ => break cell,
            }
        };
        let workspace = session
            .prepare_workspace()
            .await
            .map_err(|e| CallError::Internal(e.to_string()))?
            .to_owned();
        let conn = cell
            .get_or_try_init(|| async {
                let mut spec = spec.clone();
                spec.binds
                    .push(format!("{}:/workspace:rw", workspace.display()));
                let (handler, waiting, asking) = Handler::new(|| {}, true);
                self.start_stdio(
                    &spec,
                    session.id(),
                    handler,
                    (waiting, asking),
                    init_timeout_ms,
                )
                .await
                .map(Arc::new)
            })
            .await
            .map_err(CallError::BackendUnavailable)?;
        Ok(conn.clone())
    }

    /// The transport config of a remote server, its host checked against
    /// the list.
    fn remote(
        &self,
        url: &str,
        m: &manifest::McpSection,
    ) -> Result<(reqwest::Client, StreamableHttpClientTransportConfig), String> {
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("[mcp] url: {e}"))?;
        let methods = ["GET".to_string(), "POST".into(), "DELETE".into()];
        let policy = HttpPolicy::parse(&m.allow, &methods)
            .map_err(|e| e.replace("http.allow", "[mcp] allow"))?
            .named("[mcp] allow");
        if let Some(why) = policy.refusal(
            "POST",
            parsed.scheme(),
            parsed.host_str().unwrap_or(""),
            parsed.port(),
        ) {
            return Err(format!("[mcp] url: {why}"));
        }
        // Names resolved under the list (internal addresses only for hosts it
        // names exactly), no proxy from the environment, no redirects.
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(crate::outbound::PolicyResolver(Arc::new(policy))))
            .build()
            .map_err(|e| format!("cannot make the HTTP client: {e}"))?;
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
        if let Some(auth) = &m.auth {
            let secret = self.secrets.get(&auth.secret)?;
            match auth.kind {
                manifest::AuthKind::Bearer => config.auth_header = Some(secret),
                // Refused when the manifest is read (`Auth::check`).
                manifest::AuthKind::Query => {
                    return Err("[mcp.auth] kind: header or bearer".into());
                }
                manifest::AuthKind::Header => {
                    if let Some((name, value)) = auth.header(&secret)? {
                        config.custom_headers.insert(name, value);
                    }
                }
            }
        }
        Ok((client, config))
    }

    async fn load_manifest(&self, name: &str, files: &[EntryFile]) -> Result<Loaded, String> {
        let (folder, text) = folder_manifest(name, files)?;
        let manifest = manifest::parse(text)?;
        let m = &manifest.mcp;
        let identity: String = files.iter().map(|f| f.hash.as_str()).collect();
        // A stdio server's packages, checked against what was installed
        // from their locks before the server starts.
        // ... and its image, by the trust policy.
        let image = match (&m.command, &self.docker) {
            (Some(_), Some(docker)) => docker.judge_image(&m.image).await?,
            _ => None,
        };
        let (record, mount_warning) = match (&m.command, &m.mount) {
            (Some(_), Some(mount)) => {
                let dir = folder.join(mount);
                tokio::task::spawn_blocking(move || mount::check(&dir))
                    .await
                    .map_err(|e| e.to_string())??
            }
            _ => (None, None),
        };
        let conn = self.connection(name, &identity, &folder, m).await?;
        let within = Duration::from_millis(m.init_timeout_ms);
        let (listed, more) =
            tokio::time::timeout(within, listing::list(conn.service.peer(), m.max_tools))
                .await
                .map_err(|_| {
                    format!(
                        "the MCP server did not list its tools within {} ms",
                        m.init_timeout_ms
                    )
                })??;
        let room = tool::MAX_TOOL_ID_LEN.saturating_sub(name.len() + 1);
        let (tools, names, mut warnings) = listing::descriptors(name, listed, room);
        if more {
            warnings.insert(
                0,
                format!(
                    "the server lists more than {} tools: the first {} are served ([mcp] max_tools)",
                    m.max_tools, m.max_tools
                ),
            );
        }
        warnings.extend(mount_warning);
        warnings.extend(image.as_ref().and_then(|v| v.warning.clone()));
        if tools.is_empty() {
            return Err("the MCP server lists no usable tool".into());
        }
        // The tool list is part of the version: a changed list is a new one.
        let listing = serde_json::to_vec(
            &tools
                .iter()
                .map(|t| (&t.name, &t.input_schema))
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default();
        let version = content_hash(format!("{identity}{}", content_hash(&listing)).as_bytes());
        let description = manifest.description.clone().unwrap_or_else(|| {
            conn.service
                .peer()
                .peer_info()
                .and_then(|i| i.server_info.clone())
                .map(|s| format!("The MCP server {}", s.name))
                .unwrap_or_else(|| format!("The MCP server {name}"))
        });
        Ok(Loaded {
            description,
            version,
            limits: Limits {
                timeout_ms: m.timeout_ms,
                max_concurrency: m.max_concurrency,
                max_queue: 256,
                max_output_kb: 16 * 1024,
            },
            toolkit: Arc::new(McpToolkit {
                conn,
                names,
                tasked: Default::default(),
                toolkit: name.to_owned(),
                refresh: self.refresh.get().cloned(),
                per_session: match (&m.command, m.per_session) {
                    (Some(command), true) => Some((
                        self.me.clone(),
                        stdio_spec(name, &folder, command, m)?,
                        m.init_timeout_ms,
                    )),
                    _ => None,
                },
            }),
            tools,
            compile: None,
            better: None,
            warnings,
            provenance: (record.is_some() || image.is_some()).then(|| {
                serde_json::json!({"installed_from_locks": record, "image": m.image, "trust": image})
            }),
        })
    }
}

/// `tools/list_changed` notifications in one reload window that make a
/// server a flood (20 a second and more).
const FLOOD: u64 = 10;

/// How long a flood is shown (`degraded` in `GET /plugins`) after its last
/// window.
const FLOOD_SHOWN: Duration = Duration::from_secs(10);

/// A server's `tools/list_changed` notifications are followed at most once
/// per this long: a server that notifies every 10 ms costs one reload (and
/// one notice to toolhost's own clients) a half-second, not a hundred.
const LIST_CHANGED_EVERY: Duration = Duration::from_millis(500);

/// How a server given as a command runs in a node.
fn stdio_spec(
    name: &str,
    folder: &Path,
    command: &[String],
    m: &manifest::McpSection,
) -> Result<crate::nodes::stdio::StdioSpec, String> {
    let mut binds = vec![format!("{}:/toolkit:ro", folder.display())];
    if let Some(mount) = &m.mount {
        let dir = folder.join(mount);
        if !dir.is_dir() {
            return Err(format!("[mcp] mount: {} is not a directory", dir.display()));
        }
        binds.push(format!("{}:/opt/mcp:ro", dir.display()));
    }
    Ok(crate::nodes::stdio::StdioSpec {
        toolkit: name.to_owned(),
        image: m.image.clone(),
        command: command.to_vec(),
        env: m.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        binds,
        memory_mb: m.memory_mb,
        cpus: m.cpus,
        pids: m.pids,
        network: "none",
        // Bounded by its toolkit (one server, or one per session), like
        // the interactive nodes.
        allocate: false,
        gpus: None,
    })
}
