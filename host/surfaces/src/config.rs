//! The HTTP surfaces' sections: `[server]` (listening, request limits,
//! browser safety) and `[xagent]`.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on. Loopback by default.
    pub bind: SocketAddr,
    /// Largest request body, KiB.
    pub max_body_kb: u32,
    /// Time for a whole request body to arrive, ms (then 408): slow-loris
    /// bodies cannot hold connections for long.
    pub body_timeout_ms: u64,
    /// Time for a request's headers to arrive, ms, counted from when the
    /// connection waits for them: a new connection's first request, and the
    /// next one on a kept-alive connection (so it is also how long an idle
    /// connection stays open). Then the connection is closed: slow-header
    /// clients cannot hold connections.
    pub header_timeout_ms: u64,
    /// Record Prometheus metrics and serve `GET /metrics`.
    pub metrics: bool,
    /// `Host` names served besides the loopback names and the bind address
    /// (DNS-rebinding protection). On a loopback address every other name
    /// is refused; on another address any name passes until this is set;
    /// `["*"]` lets any through.
    pub allowed_hosts: Vec<String>,
    /// Origins of web pages allowed to call the API (`https://app.example`;
    /// `"*"` for any), and given CORS answers. A request from any other page
    /// (it carries an `Origin`) is refused; the console's own are served.
    pub allowed_origins: Vec<String>,
    /// Connections open at once, in all and from one address; one more is
    /// answered 503 with `Retry-After` and closed.
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 8001)),
            max_body_kb: 4096,
            body_timeout_ms: 120_000,
            header_timeout_ms: 30_000,
            metrics: true,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_connections: 4096,
            max_connections_per_peer: 1024,
        }
    }
}

/// The XAgent ToolServer surface.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct XAgentConfig {
    /// How long `/execute_tool` waits for a call, ms. A call still running
    /// then is answered 450 with its latest progress and a continuation
    /// (`next_calling`) that waits as long again; the call goes on meanwhile.
    pub patience_ms: u64,
}

impl Default for XAgentConfig {
    fn default() -> Self {
        XAgentConfig {
            patience_ms: 30_000,
        }
    }
}
