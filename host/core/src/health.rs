//! Tools kept healthy over time (seed 004's `ToolState`, `health_alert`):
//! every `[health] interval_s` each tool is looked at, and it is
//! `degraded` when its toolkit cannot serve (the backend's own problem: a
//! service that never became healthy or keeps dying, an MCP server that
//! keeps exiting, a Docker toolkit whose nodes cannot be made) or when its
//! calls since the last look failed for trouble of its own
//! ([`is_trouble`]) at `error_rate` or more (with `min_calls` at least). It
//! is `running` again by itself at the first look where neither holds.
//! A tool turning degraded is a `health_alert` on the events bus with the
//! reason and when it was last healthy; `GET /tools/{id}` shows
//! `health: {state, last_healthy, reason}`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::catalog::Catalog;
use crate::events::Events;
use crate::tool::ErrorKind;

/// `[health]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HealthConfig {
    /// Seconds between looks (seed 004's `health_check_interval_s`).
    #[serde(alias = "health_check_interval_s")]
    pub interval_s: u64,
    /// The share of a look's calls failing for trouble that degrades a tool.
    pub error_rate: f64,
    /// Fewer calls since the last look are not judged by their errors.
    pub min_calls: u64,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            interval_s: 60,
            error_rate: 0.5,
            min_calls: 5,
        }
    }
}

/// Errors that say the tool itself is unwell: it ran out of time, memory or
/// fuel, trapped, its backend or node went away, or toolhost failed. Not
/// the caller's (`invalid_input`, `forbidden`, ...) nor the tool's own
/// answer (`tool_error`).
pub fn is_trouble(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Timeout
            | ErrorKind::Trap
            | ErrorKind::OutOfMemory
            | ErrorKind::OutOfFuel
            | ErrorKind::BackendUnavailable
            | ErrorKind::NodeLost
            | ErrorKind::Internal
    )
}

#[derive(Debug, Clone, Default)]
struct Seen {
    degraded: Option<String>,
    /// Unix ms of the last look that found it healthy.
    last_healthy: Option<u64>,
    /// Its calls and troubled calls at the last look.
    counts: (u64, u64),
}

pub struct Health {
    config: HealthConfig,
    seen: Mutex<HashMap<String, Seen>>,
}

/// Unix time `ms` as seed 004 writes times (`2026-03-20T10:00:00Z`).
pub fn iso(ms: u64) -> String {
    let (y, m, d) = crate::tasks::budget::date_of(ms);
    let s = (ms / 1000) % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

impl Health {
    pub fn new(config: HealthConfig) -> Arc<Health> {
        Arc::new(Health {
            config,
            seen: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Seen>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Look at every tool of `catalog` now; alerts go to `events`.
    pub fn look(&self, catalog: &Catalog, events: &Events) {
        let now = crate::tasks::now_ms();
        let mut seen = self.lock();
        let tools = catalog.all_tools();
        seen.retain(|id, _| tools.iter().any(|t| &t.id == id));
        // A toolkit's problem, asked once per look however many tools it has.
        let mut problems: HashMap<String, Option<String>> = HashMap::new();
        for t in tools {
            let entry = seen.entry(t.id.clone()).or_default();
            let counts = t.record.stats.health_counts();
            let (calls, trouble) = (
                counts.0.saturating_sub(entry.counts.0),
                counts.1.saturating_sub(entry.counts.1),
            );
            entry.counts = counts;
            let problem = problems
                .entry(t.toolkit.name.clone())
                .or_insert_with(|| t.toolkit.backend.problem(&t.toolkit.name).map(|p| p.reason))
                .clone();
            let rate = calls >= self.config.min_calls.max(1)
                && trouble as f64 >= self.config.error_rate * calls as f64;
            let reason = problem.or_else(|| {
                rate.then(|| format!("{trouble} of its {calls} calls since the last look failed (timeouts, traps, lost nodes, unavailable backend)"))
            });
            match (reason, &entry.degraded) {
                (None, was) => {
                    if was.is_some() {
                        tracing::info!(tool = %t.id, "tool healthy again: running");
                    }
                    entry.degraded = None;
                    entry.last_healthy = Some(now);
                }
                (Some(reason), None) => {
                    tracing::warn!(tool = %t.id, %reason, "tool degraded");
                    let last = entry.last_healthy.map(iso);
                    events.health_alert(&t.id, "", &reason, last.as_deref());
                    entry.degraded = Some(reason);
                }
                (Some(reason), Some(_)) => entry.degraded = Some(reason),
            }
        }
    }

    /// Tool `id`'s health as `GET /tools/{id}` shows it.
    pub fn view(&self, id: &str) -> Value {
        let seen = self.lock().get(id).cloned().unwrap_or_default();
        json!({
            "state": if seen.degraded.is_some() { "degraded" } else { "running" },
            "last_healthy": seen.last_healthy.map(iso),
            "reason": seen.degraded,
        })
    }

    /// Look every `[health] interval_s` for as long as the process lives.
    pub fn spawn(self: &Arc<Self>, catalog: Arc<Catalog>, events: Arc<Events>) {
        let (me, every) = (
            Arc::downgrade(self),
            std::time::Duration::from_secs(self.config.interval_s.max(1)),
        );
        let catalog = Arc::downgrade(&catalog);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let (Some(me), Some(catalog)) = (me.upgrade(), catalog.upgrade()) else {
                    return;
                };
                me.look(&catalog, &events);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_the_seed_writes_them() {
        assert_eq!(iso(0), "1970-01-01T00:00:00Z");
        // 2026-03-20T10:00:00Z, the seed's last_healthy.
        assert_eq!(iso(1_774_000_800_000), "2026-03-20T10:00:00Z");
        assert_eq!(iso(951_782_400_000 + 86_399_000), "2000-02-29T23:59:59Z");
    }

    #[test]
    fn trouble_is_the_tools_not_the_callers() {
        assert!(is_trouble(ErrorKind::Timeout) && is_trouble(ErrorKind::NodeLost));
        assert!(!is_trouble(ErrorKind::InvalidInput) && !is_trouble(ErrorKind::ToolError));
        assert!(!is_trouble(ErrorKind::Overloaded) && !is_trouble(ErrorKind::NotActive));
    }
}
