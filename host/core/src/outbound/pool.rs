//! Idle [`Link`]s kept per origin for the next request to it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::link::Link;

/// Idle links by origin (`scheme://host:port`), the most recently used
/// taken first (the likeliest still open at the other end).
pub struct Pool {
    idle: Mutex<HashMap<String, Vec<(Instant, Link)>>>,
    /// Most idle links kept per origin ...
    max_idle: usize,
    /// ... and for how long.
    idle_for: Duration,
}

impl Pool {
    pub fn new(max_idle: usize, idle_for: Duration) -> Pool {
        Pool {
            idle: Mutex::new(HashMap::new()),
            max_idle,
            idle_for,
        }
    }

    /// An idle link to `origin`, if one is kept and not too old.
    pub fn take(&self, origin: &str) -> Option<Link> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let links = idle.get_mut(origin)?;
        let now = Instant::now();
        // The oldest are first: those past their time go.
        links.retain(|(since, _)| now.duration_since(*since) < self.idle_for);
        let link = links.pop().map(|(_, link)| link);
        if links.is_empty() {
            idle.remove(origin);
        }
        link
    }

    /// Keep `link` for the next request to `origin` (unless it closed or
    /// the origin has enough).
    pub fn put(&self, origin: &str, link: Link) {
        if !link.is_open() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let links = idle.entry(origin.to_owned()).or_default();
        if links.len() >= self.max_idle {
            links.remove(0);
        }
        links.push((Instant::now(), link));
    }
}
