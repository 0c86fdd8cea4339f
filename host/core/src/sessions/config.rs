//! `[sessions]`, owned by the sessions.

/// `[sessions]`: how long sessions live and how many may be open.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionsConfig {
    /// A session unused for this long is closed and its workspace deleted.
    pub idle_timeout_s: u64,
    /// How often idle sessions are looked for.
    pub reap_interval_s: u64,
    /// Most sessions open at once. A request that would open one more (a
    /// call without a session header makes a new session) gets 503 with
    /// `Retry-After` until some close or idle out.
    pub max_sessions: usize,
    /// Most MCP sessions (`initialize` on `/mcp`) open at once, each some
    /// memory until it is closed or idles out. An `initialize` beyond them
    /// gets 503 with `Retry-After` (a stateless 2026-07-28 request opens
    /// none).
    pub max_mcp_sessions: usize,
    /// An MCP session whose client sent `initialize` and never finished the
    /// handshake (`notifications/initialized`) is closed after this long.
    pub mcp_unfinished_timeout_s: u64,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        SessionsConfig {
            idle_timeout_s: 3600,
            reap_interval_s: 60,
            max_sessions: 10_000,
            max_mcp_sessions: 1024,
            mcp_unfinished_timeout_s: 60,
        }
    }
}
