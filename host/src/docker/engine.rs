//! The connection to the Docker engine: made lazily, the API version
//! negotiated (Debian's dockerd speaks 1.41 at most), dropped on a connection
//! error and made again on a later call, so heavy tools recover when the
//! daemon comes back.

use std::time::{Duration, Instant};

use bollard::Docker;
use tokio::sync::Mutex;

/// How often a failed connection is retried at most.
const RETRY_EVERY: Duration = Duration::from_millis(500);

pub struct Engine {
    state: Mutex<State>,
}

struct State {
    docker: Option<Docker>,
    last_attempt: Option<Instant>,
    last_error: String,
}

impl Default for Engine {
    fn default() -> Self {
        Engine {
            state: Mutex::new(State {
                docker: None,
                last_attempt: None,
                last_error: String::new(),
            }),
        }
    }
}

impl Engine {
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
        match connect().await {
            Ok(d) => {
                tracing::info!(api = %d.client_version(), "connected to the Docker engine");
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

async fn connect() -> Result<Docker, String> {
    let fail = |e: bollard::errors::Error| {
        format!(
            "the Docker engine is not reachable ({e}); start it (`plugins/node/ensure-docker.sh`)"
        )
    };
    let docker = Docker::connect_with_local_defaults().map_err(fail)?;
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
