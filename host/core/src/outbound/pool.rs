//! Idle [`Link`]s kept per origin for the next request to it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;

use super::link::{Answer, Failure, Link};

/// Why [`Pool::exchange`] has no answer: the caller's own error (making
/// the connection or the request), or the exchange's.
pub enum Trouble<E> {
    Ours(E),
    Link(Failure),
}

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

    /// One exchange with `origin`: on a kept link when there is one, else
    /// on a new one from `connect`; the link kept after it while it stays
    /// open. A kept link its peer closed while it was idle is given up for
    /// a new one, once: when the request was not sent, or, for a request
    /// safe to send again (`repeatable`), when its answer broke off before
    /// it began. `request` makes the request (again for the second try).
    pub async fn exchange<E, Connecting: Future<Output = Result<Link, E>>>(
        &self,
        origin: &str,
        mut connect: impl FnMut() -> Connecting,
        request: impl Fn() -> Result<Request<Full<Bytes>>, E>,
        max_bytes: usize,
        repeatable: bool,
    ) -> Result<Answer, Trouble<E>> {
        let mut kept = self.take(origin);
        loop {
            let mut link = match kept.take() {
                Some(link) => link,
                None => connect().await.map_err(Trouble::Ours)?,
            };
            let sent = request().map_err(Trouble::Ours)?;
            let failure = match link.exchange(sent, max_bytes).await {
                Ok(answer) => {
                    self.put(origin, link);
                    return Ok(answer);
                }
                Err(failure) => failure,
            };
            let again = link.reused
                && match &failure {
                    Failure::NotSent(_) => true,
                    Failure::Failed(e) => repeatable && e.is_incomplete_message(),
                    Failure::TooLarge { .. } => false,
                };
            if !again {
                return Err(Trouble::Link(failure));
            }
        }
    }
}
