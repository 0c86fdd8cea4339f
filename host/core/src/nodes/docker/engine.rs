//! The connection to one Docker engine: made lazily, the API version
//! negotiated (Debian's dockerd speaks 1.41 at most), dropped on a connection
//! error and made again on a later call, so heavy tools recover when the
//! daemon comes back. The engine is the local default (as the docker CLI
//! finds it), a unix socket, TCP (with TLS client certificates) or SSH.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bollard::{API_DEFAULT_VERSION, Docker};
use tokio::sync::Mutex;

/// How often a failed connection is retried at most.
const RETRY_EVERY: Duration = Duration::from_millis(500);
/// Read / write timeout of each request, seconds (bollard's default).
const REQUEST_TIMEOUT_S: u64 = 120;

/// Where an engine is and how to reach it.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// `DOCKER_HOST`, else the local socket (what the docker CLI uses).
    Local,
    /// `unix:///run/docker.sock`
    Unix(String),
    /// `tcp://host:port`; with TLS: (client certificate, its key, the CA).
    Tcp {
        addr: String,
        tls: Option<(PathBuf, PathBuf, PathBuf)>,
    },
    /// `ssh://user@host[:port]`, through the system's OpenSSH client (which
    /// runs `docker system dial-stdio` on the far side); an optional key.
    Ssh { url: String, key: Option<PathBuf> },
}

impl Target {
    /// The target of a configured engine, or why its settings do not make one.
    pub fn of(engine: &super::config::DockerEngine) -> Result<Target, String> {
        let url = engine.url.trim();
        let tls = [&engine.tls_cert, &engine.tls_key, &engine.tls_ca];
        let some_tls = tls.iter().filter(|p| p.is_some()).count();
        if let Some(path) = url.strip_prefix("unix://") {
            if some_tls > 0 || engine.ssh_key.is_some() {
                return Err(format!(
                    "engine `{}`: tls_* and ssh_key are for tcp:// and ssh:// engines",
                    engine.name
                ));
            }
            return Ok(Target::Unix(path.to_owned()));
        }
        if let Some(addr) = url.strip_prefix("tcp://") {
            let tls = match (&engine.tls_cert, &engine.tls_key, &engine.tls_ca) {
                (Some(c), Some(k), Some(a)) => Some((c.clone(), k.clone(), a.clone())),
                (None, None, None) => None,
                _ => {
                    return Err(format!(
                        "engine `{}`: TLS needs all of tls_cert, tls_key and tls_ca",
                        engine.name
                    ));
                }
            };
            if addr.is_empty() {
                return Err(format!("engine `{}`: no address in `{url}`", engine.name));
            }
            return Ok(Target::Tcp {
                addr: addr.to_owned(),
                tls,
            });
        }
        if let Some(authority) = url.strip_prefix("ssh://") {
            if some_tls > 0 {
                return Err(format!(
                    "engine `{}`: tls_* is for tcp:// engines",
                    engine.name
                ));
            }
            // bollard 0.21 hands ssh `user@host:port` as the host name, so a
            // port in the URL never connects: say so instead.
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            if host.contains(':') {
                return Err(format!(
                    "engine `{}`: no port in an ssh:// url (bollard passes it to ssh as part of the host name); name a Host in ~/.ssh/config with its Port and use ssh://user@that-name",
                    engine.name
                ));
            }
            return Ok(Target::Ssh {
                url: url.to_owned(),
                key: engine.ssh_key.clone(),
            });
        }
        Err(format!(
            "engine `{}`: url `{url}` is not unix://, tcp:// or ssh://",
            engine.name
        ))
    }
}

pub struct Engine {
    target: Target,
    state: Mutex<State>,
}

struct State {
    docker: Option<Docker>,
    last_attempt: Option<Instant>,
    last_error: String,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new(Target::Local)
    }
}

impl Engine {
    pub fn new(target: Target) -> Self {
        Engine {
            target,
            state: Mutex::new(State {
                docker: None,
                last_attempt: None,
                last_error: String::new(),
            }),
        }
    }

    /// A connected client, or why there is none.
    pub async fn get(&self) -> Result<Docker, String> {
        let mut state = self.state.lock().await;
        if let Some(d) = &state.docker {
            return Ok(d.clone());
        }
        if state
            .last_attempt
            .is_some_and(|t| t.elapsed() < RETRY_EVERY)
        {
            return Err(state.last_error.clone());
        }
        state.last_attempt = Some(Instant::now());
        match connect(&self.target).await {
            Ok(d) => {
                tracing::info!(api = %d.client_version(), target = ?self.target, "connected to the Docker engine");
                state.docker = Some(d.clone());
                Ok(d)
            }
            Err(e) => {
                state.last_error = e.clone();
                Err(e)
            }
        }
    }

    /// Forget the client after a connection error; the next call reconnects.
    pub async fn reset(&self) {
        let mut state = self.state.lock().await;
        if state.docker.take().is_some() {
            tracing::warn!("lost the Docker engine; reconnecting on the next call");
        }
    }
}

/// How long connecting (version negotiation and a ping) may take: a daemon
/// that accepts and never answers must not hold the engine's lock, and every
/// heavy call behind it, for longer.
const CONNECT_WITHIN: Duration = Duration::from_secs(5);

async fn connect(target: &Target) -> Result<Docker, String> {
    let fail = |e: bollard::errors::Error| match target {
        Target::Local => format!(
            "the Docker engine is not reachable ({e}); start it (`plugins/node/ensure-docker.sh`)"
        ),
        other => format!(
            "the Docker engine at {} is not reachable ({e})",
            other.url()
        ),
    };
    let v = API_DEFAULT_VERSION;
    let docker = match target {
        Target::Local => Docker::connect_with_local_defaults(),
        Target::Unix(path) => Docker::connect_with_unix(path, REQUEST_TIMEOUT_S, v),
        Target::Tcp { addr, tls: None } => Docker::connect_with_http(addr, REQUEST_TIMEOUT_S, v),
        Target::Tcp {
            addr,
            tls: Some((cert, key, ca)),
        } => {
            // bollard's TLS takes rustls's process-wide provider; two are
            // built in, so one is named (ring; an earlier choice stands).
            let _ = rustls::crypto::ring::default_provider().install_default();
            Docker::connect_with_ssl(addr, key, cert, ca, REQUEST_TIMEOUT_S, v)
        }
        Target::Ssh { url, key } => Docker::connect_with_ssh(
            url,
            REQUEST_TIMEOUT_S,
            v,
            key.as_ref().map(|k| k.to_string_lossy().into_owned()),
        ),
    }
    .map_err(fail)?;
    let handshake = async {
        let docker = docker.negotiate_version().await.map_err(fail)?;
        docker.ping().await.map_err(fail)?;
        Ok(docker)
    };
    tokio::time::timeout(CONNECT_WITHIN, handshake)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "the Docker engine did not answer within {} s",
                CONNECT_WITHIN.as_secs()
            ))
        })
}

impl Target {
    /// Whether the engine is on another machine (TCP to a non-loopback
    /// address, SSH): its containers' `/proc` entries are not ours.
    pub fn is_remote(&self) -> bool {
        let loopback = |host: &str| {
            let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
            matches!(host, "127.0.0.1" | "localhost" | "[::1]")
        };
        match self {
            Target::Local => std::env::var("DOCKER_HOST").is_ok_and(|h| {
                h.strip_prefix("tcp://").is_some_and(|a| !loopback(a)) || h.starts_with("ssh://")
            }),
            Target::Unix(_) => false,
            Target::Tcp { addr, .. } => !loopback(addr),
            Target::Ssh { .. } => true,
        }
    }

    /// How the engine is shown (no secrets: key paths are not shown).
    pub fn url(&self) -> String {
        match self {
            Target::Local => std::env::var("DOCKER_HOST")
                .unwrap_or_else(|_| "unix:///var/run/docker.sock".into()),
            Target::Unix(path) => format!("unix://{path}"),
            Target::Tcp { addr, .. } => format!("tcp://{addr}"),
            Target::Ssh { url, .. } => url.clone(),
        }
    }
}

/// Whether `e` means the engine itself is gone (as opposed to a refused request).
pub fn is_connection_error(e: &bollard::errors::Error) -> bool {
    use bollard::errors::Error as E;
    matches!(
        e,
        E::HyperResponseError { .. }
            | E::IOError { .. }
            | E::RequestTimeoutError
            | E::HyperLegacyError { .. }
            | E::SocketNotFoundError(_)
    )
}
