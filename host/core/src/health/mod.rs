//! Tools kept healthy over time (seed 004's `ToolState`, `health_alert`):
//! every `[health] interval_s` (a toolkit's manifest may say its own,
//! [`declared`]) each toolkit is looked at, and its tools are `degraded`
//! when
//! - the toolkit cannot serve (the backend's own problem: a service that
//!   never became healthy or keeps dying, an MCP server that keeps exiting,
//!   a Docker toolkit whose nodes cannot be made), or
//! - a check failed: the backend's own ([`Backend::probe`]: a service's
//!   health path on its running containers, an MCP server's ping) or the
//!   probe call its manifest declares (`[health] probe`, any kind: a wasm
//!   tool's example, an API's cheap operation), or
//! - its calls since the last look failed for trouble of its own
//!   ([`is_trouble`]) at `error_rate` or more (with `min_calls` at least).
//!
//! It is `running` again by itself at the first look where none holds.
//! A tool turning degraded is a `health_alert` on the events bus (with the
//! container checked, the reason and when it was last healthy), and is
//! told to [`Health::on_degraded`] (repair tasks, `[health] repair`);
//! `GET /tools/{id}` shows `health: {state, last_healthy, reason, ...}`.
//!
//! [`Backend::probe`]: crate::backend::Backend::probe

pub mod declared;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::backend::Checked;
use crate::catalog::{Catalog, ToolkitEntry};
use crate::dispatch::{CallOptions, Dispatcher};
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
    /// What a tool turning degraded starts ([`Repair`]).
    pub repair: Repair,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            interval_s: 60,
            error_rate: 0.5,
            min_calls: 5,
            repair: Repair::Request,
        }
    }
}

/// `[health] repair`: what a tool turning degraded starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Repair {
    /// Nothing but the alert.
    Off,
    /// A `repair_tool` task for a builder to claim.
    Request,
    /// Its toolkit restarted first (fresh containers, a new server
    /// connection); a `repair_tool` task when it is still degraded at the
    /// next look.
    Auto,
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
    /// The last check's answer, and the container it asked.
    check: Option<Checked>,
    /// Looks in a row that found it degraded.
    looks_degraded: u32,
    /// This replica's own verdict at the last look (what it tells the
    /// others), without theirs.
    own: Option<String>,
}

/// A tool that turned (or stays) degraded, as [`Health::on_degraded`] is
/// told.
#[derive(Debug, Clone)]
pub struct Degraded {
    pub tool_id: String,
    pub toolkit: String,
    pub reason: String,
    pub container_id: Option<String>,
    /// The last check's answer.
    pub check: Option<String>,
    /// Looks in a row that found it degraded (1: it just turned).
    pub looks: u32,
}

type OnDegraded = Box<dyn Fn(Degraded) + Send + Sync>;

pub struct Health {
    config: HealthConfig,
    seen: Mutex<HashMap<String, Seen>>,
    /// When each toolkit was last looked at, and its version then.
    looked: Mutex<HashMap<String, (Instant, String)>>,
    /// Told of each degraded tool at each look (repair tasks).
    pub on_degraded: OnceLock<OnDegraded>,
    /// Where replicas tell each other their verdicts.
    registry: OnceLock<Arc<crate::registry::Registry>>,
    /// The other replicas' verdicts: tool -> replica -> (reason when
    /// degraded, when told).
    peers: Mutex<HashMap<String, HashMap<String, PeerVerdict>>>,
}

/// Another replica's verdict: the reason when degraded, and when told.
type PeerVerdict = (Option<String>, Instant);

/// A replica's verdict as the others are told it.
#[derive(Serialize, Deserialize)]
struct Told {
    degraded: Option<String>,
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a look found of one toolkit.
#[derive(Default)]
struct Found {
    problem: Option<String>,
    check: Option<Checked>,
}

impl Health {
    pub fn new(config: HealthConfig) -> Arc<Health> {
        Arc::new(Health {
            config,
            seen: Mutex::default(),
            looked: Mutex::default(),
            on_degraded: OnceLock::new(),
            registry: OnceLock::new(),
            peers: Mutex::default(),
        })
    }

    /// Tell replicas sharing `registry` this one's verdicts, and hear theirs
    /// ([`Health::followed`]): one verdict for all (a tool degraded on one is
    /// degraded on every one), one alert (the leading replica's).
    pub fn attach(&self, registry: Arc<crate::registry::Registry>) {
        let _ = self.registry.set(registry);
    }

    /// Replica `replica` told its verdict on tool `tool` (JSON).
    pub fn followed(&self, tool: &str, replica: &str, body: &str) {
        let Ok(told) = serde_json::from_str::<Told>(body) else {
            return;
        };
        lock(&self.peers)
            .entry(tool.to_owned())
            .or_default()
            .insert(replica.to_owned(), (told.degraded, Instant::now()));
    }

    /// A fresh verdict of another replica that tool `id` is degraded.
    fn peer_says(&self, id: &str, fresh: Duration) -> Option<String> {
        let peers = lock(&self.peers);
        let (replica, (reason, _)) = peers
            .get(id)?
            .iter()
            .find(|(_, (reason, at))| reason.is_some() && at.elapsed() < fresh)?;
        Some(format!(
            "on replica {}: {}",
            &replica[..8.min(replica.len())],
            reason.as_deref().unwrap_or_default()
        ))
    }

    /// Seconds between `toolkit`'s looks: its manifest's, else `[health]`'s.
    fn interval(&self, toolkit: &ToolkitEntry) -> Duration {
        let every = toolkit.health.as_ref().and_then(|h| h.interval_s);
        Duration::from_secs(every.unwrap_or(self.config.interval_s).max(1))
    }

    /// The toolkits due for a look now (all of them when `all`).
    fn due(&self, catalog: &Catalog, all: bool) -> Vec<Arc<ToolkitEntry>> {
        let now = Instant::now();
        let mut looked = lock(&self.looked);
        let mut due: HashMap<String, Arc<ToolkitEntry>> = HashMap::new();
        for t in catalog.all_tools() {
            if due.contains_key(&t.toolkit.name) {
                continue;
            }
            let every = self.interval(&t.toolkit);
            // Ticks come every second: a look a little early is on time. A
            // new version (a repair) is looked at at once.
            let last = looked.get(&t.toolkit.name);
            let on_time = |(at, version): &(Instant, String)| {
                now.duration_since(*at) + Duration::from_millis(500) >= every
                    || *version != t.toolkit.version
            };
            if all || last.is_none_or(on_time) {
                looked.insert(t.toolkit.name.clone(), (now, t.toolkit.version.clone()));
                due.insert(t.toolkit.name.clone(), t.toolkit.clone());
            }
        }
        due.into_values().collect()
    }

    /// What toolkit `toolkit` shows now: its backend's problem, its
    /// backend's check and its declared probe call (through `calls`).
    async fn examine(toolkit: &ToolkitEntry, calls: Option<&Dispatcher>) -> Found {
        let name = &toolkit.name;
        let problem = toolkit.backend.problem(name).map(|p| p.reason);
        let mut check = toolkit.backend.probe(name).await;
        let declared = toolkit.health.as_ref().and_then(|h| h.probe.as_ref());
        if let (Some(probe), Some(calls), true) =
            (declared, calls, check.as_ref().is_none_or(|c| c.ok))
        {
            let id = crate::tool::tool_id(name, &probe.tool);
            let sessions = calls.sessions();
            if let Ok((session, _)) = sessions.open(&crate::callers::Caller::anonymous(), None) {
                let options = CallOptions {
                    no_fallback: true,
                    ..Default::default()
                };
                let answer = calls
                    .dispatch(&session, &id, probe.input.clone(), options)
                    .await;
                let _ = sessions.close(session.id()).await;
                let container_id = check.as_ref().and_then(|c| c.container_id.clone());
                check = Some(match answer {
                    Ok(_) => Checked {
                        ok: true,
                        detail: format!("probe {id} answered"),
                        container_id,
                    },
                    Err(e) => Checked {
                        ok: false,
                        detail: format!("probe {id} failed: {}: {e}", e.kind()),
                        container_id,
                    },
                });
            }
        }
        Found { problem, check }
    }

    /// Look at the toolkits due (every one when `all`) now; alerts go to
    /// `events`, declared probe calls through `calls`.
    pub async fn look(
        &self,
        catalog: &Catalog,
        events: &Events,
        calls: Option<&Dispatcher>,
        all: bool,
    ) {
        let due = self.due(catalog, all);
        if due.is_empty() {
            return;
        }
        let found = futures::future::join_all(due.iter().map(|tk| Self::examine(tk, calls))).await;
        let found: HashMap<&str, Found> =
            due.iter().map(|tk| tk.name.as_str()).zip(found).collect();
        let now = crate::tasks::now_ms();
        let tools = catalog.all_tools();
        let mut told = Vec::new();
        let leads = self.registry.get().is_none_or(|r| r.replicas().leads());
        {
            // Tools gone from the catalog are forgotten.
            let ids: std::collections::HashSet<&str> =
                tools.iter().map(|t| t.id.as_str()).collect();
            lock(&self.peers).retain(|id, _| ids.contains(id.as_str()));
            let mut seen = lock(&self.seen);
            seen.retain(|id, _| ids.contains(id.as_str()));
            for t in &tools {
                let Some(f) = found.get(t.toolkit.name.as_str()) else {
                    continue;
                };
                let entry = seen.entry(t.id.clone()).or_default();
                let counts = t.record.stats.health_counts();
                let (calls, trouble) = (
                    counts.0.saturating_sub(entry.counts.0),
                    counts.1.saturating_sub(entry.counts.1),
                );
                entry.counts = counts;
                if f.check.is_some() {
                    entry.check = f.check.clone();
                }
                let rate = calls >= self.config.min_calls.max(1)
                    && trouble as f64 >= self.config.error_rate * calls as f64;
                let failed = f.check.as_ref().filter(|c| !c.ok);
                let reason = f
                    .problem
                    .clone()
                    .or_else(|| failed.map(|c| format!("its health check failed: {}", c.detail)))
                    .or_else(|| {
                        rate.then(|| format!("{trouble} of its {calls} calls since the last look failed (timeouts, traps, lost nodes, unavailable backend)"))
                    });
                let container = entry.check.as_ref().and_then(|c| c.container_id.clone());
                // Told to the others when it changes, and again at each
                // look while degraded (a verdict not renewed goes stale).
                if let Some(registry) = self
                    .registry
                    .get()
                    .filter(|r| r.replicas().shared_scope().is_some())
                    && (reason != entry.own || reason.is_some())
                {
                    let body = serde_json::to_string(&Told {
                        degraded: reason.clone(),
                    })
                    .unwrap_or_default();
                    registry.write(crate::registry::Write::Health(
                        t.id.clone(),
                        registry.replicas().id().to_owned(),
                        body,
                    ));
                }
                entry.own = reason.clone();
                let fresh = self.interval(&t.toolkit) * 3 + Duration::from_secs(5);
                let reason = reason.or_else(|| self.peer_says(&t.id, fresh));
                match (reason, &entry.degraded) {
                    (None, was) => {
                        if was.is_some() {
                            tracing::info!(tool = %t.id, "tool healthy again: running");
                        }
                        entry.degraded = None;
                        entry.looks_degraded = 0;
                        entry.last_healthy = Some(now);
                    }
                    (Some(reason), was) => {
                        if was.is_none() && leads {
                            tracing::warn!(tool = %t.id, %reason, "tool degraded");
                            let last = entry.last_healthy.map(iso);
                            events.health_alert(
                                &t.id,
                                container.as_deref().unwrap_or(""),
                                &reason,
                                last.as_deref(),
                            );
                        }
                        if was.is_none() && !leads {
                            tracing::info!(tool = %t.id, %reason, "tool degraded (the leading replica alerts)");
                        }
                        entry.degraded = Some(reason.clone());
                        entry.looks_degraded += 1;
                        // Repairs are the leading replica's to start.
                        if leads {
                            told.push(Degraded {
                                tool_id: t.id.clone(),
                                toolkit: t.toolkit.name.clone(),
                                reason,
                                container_id: container,
                                check: entry.check.as_ref().map(|c| c.detail.clone()),
                                looks: entry.looks_degraded,
                            });
                        }
                    }
                }
                t.record.set_degraded(entry.degraded.is_some());
            }
        }
        if let Some(tell) = self.on_degraded.get() {
            for d in told {
                tell(d);
            }
        }
    }

    /// Tool `id`'s health as `GET /tools/{id}` shows it.
    pub fn view(&self, id: &str) -> Value {
        let seen = lock(&self.seen).get(id).cloned().unwrap_or_default();
        json!({
            "state": if seen.degraded.is_some() { "degraded" } else { "running" },
            "last_healthy": seen.last_healthy.map(iso),
            "reason": seen.degraded,
            "last_check": seen.check.as_ref().map(|c| &c.detail),
            "container_id": seen.check.as_ref().and_then(|c| c.container_id.as_ref()),
        })
    }

    /// Look at each toolkit when it is due, for as long as the process
    /// lives.
    pub fn spawn(
        self: &Arc<Self>,
        catalog: Arc<Catalog>,
        events: Arc<Events>,
        calls: std::sync::Weak<Dispatcher>,
    ) {
        let me = Arc::downgrade(self);
        let catalog = Arc::downgrade(&catalog);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let (Some(me), Some(catalog)) = (me.upgrade(), catalog.upgrade()) else {
                    return;
                };
                let calls = calls.upgrade();
                me.look(&catalog, &events, calls.as_deref(), false).await;
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
