//! The processes sharing a registry (replicas on one PostgreSQL
//! database): this one's id, and which others are alive. Each replica
//! says it is alive every [`HEARTBEAT`] (the registry's writer does it) and
//! counts as gone once it has not for [`LEASE`]. What a replica leaves
//! behind (its node containers) is removed by the others only once it is
//! gone, never while it runs. A process on its own (the embedded SQLite
//! registry) is the only one alive: whatever an earlier run left is gone.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a replica says it is alive.
pub const HEARTBEAT: Duration = Duration::from_secs(2);

/// How long a replica that stopped saying so still counts as alive.
pub const LEASE: Duration = Duration::from_secs(10);

pub struct Replicas {
    id: String,
    /// On a shared database: the label scope every replica's containers
    /// carry (the same for all of them).
    shared_scope: Option<String>,
    /// The replicas alive when last read, and when.
    live: Mutex<Option<(Instant, HashSet<String>)>>,
}

impl Replicas {
    /// A process on its own.
    pub fn alone() -> Replicas {
        Replicas {
            id: uuid::Uuid::new_v4().simple().to_string(),
            shared_scope: None,
            live: Mutex::new(None),
        }
    }

    /// A replica on the database `shown` (its URL, password hidden).
    pub fn shared(shown: &str) -> Replicas {
        let scope = crate::backend::content_hash(format!("registry {shown}").as_bytes());
        Replicas {
            shared_scope: Some(scope[..16].to_owned()),
            ..Replicas::alone()
        }
    }

    /// This process's id (its containers' run label).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The label scope replicas share, if they do.
    pub fn shared_scope(&self) -> Option<&str> {
        self.shared_scope.as_deref()
    }

    /// The replicas the database says are alive now.
    pub fn saw(&self, live: HashSet<String>) {
        *self.live.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), live));
    }

    /// Whether this replica leads the others (the alive one of the lowest
    /// id, by a recent reading): it speaks for all (health alerts, repair
    /// tasks). On its own, or without a recent reading, it does.
    pub fn leads(&self) -> bool {
        if self.shared_scope.is_none() {
            return true;
        }
        match &*self.live.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((at, live)) if at.elapsed() < LEASE => {
                live.iter().all(|other| other.as_str() >= self.id.as_str())
            }
            _ => true,
        }
    }

    /// Whether the process whose id is `run` is known to be gone: another
    /// process, on our own or absent from a recent reading of the alive
    /// ones. Without a recent reading (the database away) nobody is.
    pub fn is_gone(&self, run: &str) -> bool {
        if run == self.id {
            return false;
        }
        if self.shared_scope.is_none() {
            return true;
        }
        match &*self.live.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((at, live)) if at.elapsed() < LEASE => !live.contains(run),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_replica_missing_from_a_recent_reading_is_gone() {
        let alone = Replicas::alone();
        assert!(alone.is_gone("an-earlier-run") && !alone.is_gone(alone.id()));
        let a = Replicas::shared("postgres://toolhost@db/toolhost");
        let b = Replicas::shared("postgres://toolhost@db/toolhost");
        assert_eq!(a.shared_scope(), b.shared_scope());
        assert_ne!(a.id(), b.id());
        assert!(!a.is_gone("dead"), "no reading yet: nobody is gone");
        a.saw([a.id().to_owned(), b.id().to_owned()].into());
        assert!(!a.is_gone(b.id()));
        assert!(a.is_gone("dead"));
        a.saw([a.id().to_owned()].into());
        assert!(a.is_gone(b.id()));
        *a.live.lock().unwrap() = Some((Instant::now() - LEASE, HashSet::new()));
        assert!(!a.is_gone(b.id()), "an old reading proves nothing");
        // One leads: the alive one of the lowest id.
        let live: HashSet<String> = [a.id().to_owned(), b.id().to_owned()].into();
        a.saw(live.clone());
        b.saw(live);
        assert!(a.leads() != b.leads(), "exactly one of two leads");
        assert!(alone.leads());
    }
}
