//! `[tasks]`: tool requests' builds, callbacks and git deploys.

use serde::{Deserialize, Serialize};

/// Tool requests and their builds (`POST /tools/request`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TasksConfig {
    /// Wall clock and CPU time of one build, seconds.
    pub build_timeout_s: u64,
    /// Hosts a task's `callback_url` may point at (`host`, `host:port`,
    /// `*.domain`); empty: callbacks are refused at submit.
    pub callback_allow: Vec<String>,
    /// Hosts a `github_deploy` may clone from over https; `file` allows
    /// file:// URLs (local repositories). Empty: git deploys are refused.
    pub git_allow: Vec<String>,
}

impl Default for TasksConfig {
    fn default() -> Self {
        TasksConfig {
            build_timeout_s: 600,
            callback_allow: Vec::new(),
            git_allow: Vec::new(),
        }
    }
}
