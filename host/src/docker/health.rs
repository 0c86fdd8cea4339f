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
}

#[derive(Debug, Clone, Default)]
struct Entry {
    problem: Option<(Cause, String)>,
    failures: u64,
}

/// One toolkit's health as `GET /plugins` and `/metrics` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolkitHealth {
    pub toolkit: String,
    /// Why its nodes cannot be created now; none when they can.
    pub problem: Option<String>,
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

    /// The health of `toolkit`.
    pub fn of(&self, toolkit: &str) -> ToolkitHealth {
        let entry = self.lock().get(toolkit).cloned().unwrap_or_default();
        ToolkitHealth {
            toolkit: toolkit.to_owned(),
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
