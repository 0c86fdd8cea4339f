//! Whether each Docker toolkit can make nodes now, and why not.
//!
//! A toolkit whose nodes cannot be created (no engine, no image, a bind mount
//! or other setting the engine refuses) must not look healthy: its state is
//! `unavailable` with the reason in `GET /plugins`, a warning is logged when
//! the reason first appears or changes, and every failed creation counts in
//! `toolhost_docker_node_create_failures_total{toolkit}`. A node created
//! afterwards (a call, the hot pool's refill) clears it; so does the monitor
//! once the engine answers and the image is there, for a problem that was one
//! of those two.

use std::collections::HashMap;
use std::sync::Mutex;

/// What stands in the way of a toolkit's nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// No Docker engine answers.
    Engine,
    /// The node image is missing.
    Image,
    /// The engine refused to create or start a node, or its driver did not
    /// come up.
    Create,
    /// A service's container never answered its health path (shown
    /// `failed`).
    Unhealthy,
    /// A service's container died, was restarted once, and died again: no
    /// restart for [`DEGRADED_FOR`].
    Degraded,
    /// It asks for a GPU and no engine that answers has one.
    Gpu,
}

/// How long a degraded service is left alone before one more start is tried.
pub const DEGRADED_FOR: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Debug, Clone, Default)]
struct Entry {
    problem: Option<(Cause, String)>,
    failures: u64,
    /// Service containers found dead since a call last succeeded.
    deaths: u32,
    degraded_at: Option<std::time::Instant>,
}

/// One toolkit's health as `GET /plugins` and `/metrics` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolkitHealth {
    pub toolkit: String,
    /// Why its nodes cannot be created now; none when they can.
    pub problem: Option<String>,
    pub cause: Option<Cause>,
    /// Node creations that failed since start.
    pub create_failures: u64,
}

#[derive(Default)]
pub struct Health {
    entries: Mutex<HashMap<String, Entry>>,
}

impl Health {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A node of `toolkit` was created: whatever stood in the way is gone.
    pub fn created(&self, toolkit: &str) {
        let mut map = self.lock();
        let entry = map.entry(toolkit.to_owned()).or_default();
        if let Some((_, reason)) = entry.problem.take() {
            tracing::info!(toolkit, was = %reason, "docker toolkit available again");
        }
    }

    /// Creating a node of `toolkit` failed with `reason`.
    pub fn failed(&self, toolkit: &str, cause: Cause, reason: &str) {
        let mut map = self.lock();
        let entry = map.entry(toolkit.to_owned()).or_default();
        entry.failures += 1;
        Self::set(toolkit, entry, cause, reason);
    }

    /// The monitor found `cause` in the way of `toolkit` (without trying to
    /// create a node): recorded, not counted as a failed creation.
    pub fn found(&self, toolkit: &str, cause: Cause, reason: &str) {
        let mut map = self.lock();
        let entry = map.entry(toolkit.to_owned()).or_default();
        Self::set(toolkit, entry, cause, reason);
    }

    /// The monitor found the engine up and the image of `toolkit` there: a
    /// problem of one of those kinds is gone (a refused creation stays until a
    /// node is made).
    pub fn engine_and_image_ok(&self, toolkit: &str) {
        let mut map = self.lock();
        if let Some(entry) = map.get_mut(toolkit)
            && matches!(entry.problem, Some((Cause::Engine | Cause::Image, _)))
        {
            let (_, reason) = entry.problem.take().expect("matched above");
            tracing::info!(toolkit, was = %reason, "docker toolkit available again");
        }
    }

    fn set(toolkit: &str, entry: &mut Entry, cause: Cause, reason: &str) {
        let changed = entry.problem.as_ref().is_none_or(|(_, r)| r != reason);
        if changed {
            tracing::warn!(
                toolkit,
                reason,
                "docker toolkit unavailable: its nodes cannot be created"
            );
        }
        entry.problem = Some((cause, reason.to_owned()));
    }

    /// The monitor found an engine with GPUs up: a GPU problem is gone.
    pub fn gpu_ok(&self, toolkit: &str) {
        let mut map = self.lock();
        if let Some(entry) = map.get_mut(toolkit)
            && matches!(entry.problem, Some((Cause::Gpu, _)))
        {
            entry.problem = None;
            tracing::info!(
                toolkit,
                "an engine with GPUs answers: the toolkit is available"
            );
        }
    }

    /// A service container of `toolkit` was found dead (`why`): the first
    /// time it is restarted; a second time in a row the toolkit is
    /// degraded. Whether it may be restarted now.
    pub fn died(&self, toolkit: &str, why: &str) -> bool {
        let mut map = self.lock();
        let entry = map.entry(toolkit.to_owned()).or_default();
        entry.deaths += 1;
        if entry.deaths < 2 {
            return true;
        }
        entry.degraded_at = Some(std::time::Instant::now());
        let reason = format!(
            "degraded: its service container died again after a restart ({why}); the next start is tried after {} s",
            DEGRADED_FOR.as_secs()
        );
        Self::set(toolkit, entry, Cause::Degraded, &reason);
        false
    }

    /// Whether `toolkit` is degraded now (then no container is started).
    pub fn is_degraded(&self, toolkit: &str) -> Option<String> {
        let map = self.lock();
        let entry = map.get(toolkit)?;
        match (&entry.problem, entry.degraded_at) {
            (Some((Cause::Degraded, reason)), Some(at)) if at.elapsed() < DEGRADED_FOR => {
                Some(reason.clone())
            }
            _ => None,
        }
    }

    /// A call of `toolkit` succeeded: its service works.
    pub fn served(&self, toolkit: &str) {
        let mut map = self.lock();
        if let Some(entry) = map.get_mut(toolkit) {
            entry.deaths = 0;
            if matches!(entry.problem, Some((Cause::Degraded, _))) {
                entry.problem = None;
                entry.degraded_at = None;
                tracing::info!(toolkit, "docker toolkit no longer degraded");
            }
        }
    }

    /// The health of `toolkit`.
    pub fn of(&self, toolkit: &str) -> ToolkitHealth {
        let entry = self.lock().get(toolkit).cloned().unwrap_or_default();
        ToolkitHealth {
            toolkit: toolkit.to_owned(),
            cause: entry.problem.as_ref().map(|(c, _)| *c),
            problem: entry.problem.map(|(_, r)| r),
            create_failures: entry.failures,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_come_and_go() {
        let h = Health::default();
        assert_eq!(h.of("shell").problem, None);
        h.failed(
            "shell",
            Cause::Create,
            "Docker refused creating a node: bad mount",
        );
        h.failed(
            "shell",
            Cause::Create,
            "Docker refused creating a node: bad mount",
        );
        let s = h.of("shell");
        assert_eq!(s.create_failures, 2);
        assert!(s.problem.unwrap().contains("bad mount"));
        // A refused creation is not cleared by the engine and image being fine.
        h.engine_and_image_ok("shell");
        assert!(h.of("shell").problem.is_some());
        h.created("shell");
        assert_eq!(h.of("shell").problem, None);
        assert_eq!(h.of("shell").create_failures, 2);

        h.found("browser", Cause::Image, "the node image is missing");
        assert_eq!(h.of("browser").create_failures, 0);
        h.engine_and_image_ok("browser");
        assert_eq!(h.of("browser").problem, None);
    }
}
