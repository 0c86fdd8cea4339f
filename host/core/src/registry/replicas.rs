//! The processes sharing a registry (replicas on one PostgreSQL
//! database): this one's id, and which others are alive. Each replica
//! says it is alive every [`HEARTBEAT`] (the registry's writer does it) and
//! counts as gone once it has not for [`LEASE`]. What a replica leaves
//! behind (its node containers) is removed by the others only once it is
//! gone, never while it runs. A process on its own (the embedded SQLite
//! registry) is the only one alive: whatever an earlier run left is gone.
//!
//! The eldest replica alive leads (speaks for all): a replica that just
//! joined sees the older ones at its first reading, while they may not see
//! it until their next one, so leading by seniority never gives two leaders
//! while one joins (leading by the lowest id did: an older replica whose
//! reading predated a newcomer of a lower id led beside it).

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
    live: Mutex<Option<Reading>>,
    /// When this process began: until its first reading (made at once),
    /// a replica does not lead.
    began: Instant,
}

/// The replicas alive by one reading of the database.
struct Reading {
    at: Instant,
    live: HashSet<String>,
    /// The one that started first (the lowest id among equals).
    eldest: String,
}

impl Replicas {
    /// A process on its own.
    pub fn alone() -> Replicas {
        Replicas {
            id: uuid::Uuid::new_v4().simple().to_string(),
            shared_scope: None,
            live: Mutex::new(None),
            began: Instant::now(),
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

    /// The replicas the database says are alive now, each with when it
    /// started (milliseconds by the database's clock).
    pub fn saw(&self, live: Vec<(String, i64)>) {
        let eldest = live
            .iter()
            .min_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)))
            .map(|(id, _)| id.clone())
            .unwrap_or_default();
        let reading = Reading {
            at: Instant::now(),
            live: live.into_iter().map(|(id, _)| id).collect(),
            eldest,
        };
        *self.live.lock().unwrap_or_else(|e| e.into_inner()) = Some(reading);
    }

    /// Whether this replica leads the others (the eldest alive, by a
    /// recent reading): it speaks for all (health alerts, repair tasks).
    /// On its own it does; on a shared database not before its first
    /// reading, and without a recent one (the database away for a lease)
    /// it does: an alert told twice is better than one lost.
    pub fn leads(&self) -> bool {
        if self.shared_scope.is_none() {
            return true;
        }
        match &*self.live.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(r) if r.at.elapsed() < LEASE => r.eldest == self.id,
            Some(_) => true,
            None => self.began.elapsed() >= LEASE,
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
            Some(r) if r.at.elapsed() < LEASE => !r.live.contains(run),
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
        assert!(!a.leads() && !b.leads(), "no reading yet: nobody leads");
        let (ai, bi) = (a.id().to_owned(), b.id().to_owned());
        a.saw(vec![(ai.clone(), 5), (bi.clone(), 9)]);
        assert!(!a.is_gone(b.id()));
        assert!(a.is_gone("dead"));
        a.saw(vec![(ai.clone(), 5)]);
        assert!(a.is_gone(b.id()));
        *a.live.lock().unwrap() = Some(Reading {
            at: Instant::now() - LEASE,
            live: HashSet::new(),
            eldest: String::new(),
        });
        assert!(!a.is_gone(b.id()), "an old reading proves nothing");
        assert!(a.leads(), "the database away: it speaks");
        // One leads: the eldest alive, whatever the ids.
        let (older, newer) = if ai > bi { (&a, &b) } else { (&b, &a) };
        let both = vec![(older.id().to_owned(), 5), (newer.id().to_owned(), 9)];
        a.saw(both.clone());
        b.saw(both);
        assert!(older.leads() && !newer.leads(), "the elder of two leads");
        // The elder's reading from before the newcomer joined: still one.
        older.saw(vec![(older.id().to_owned(), 5)]);
        assert!(
            older.leads() && !newer.leads(),
            "a newcomer never leads beside its elder"
        );
        // Started in the same millisecond: the lower id.
        let same = vec![(ai.clone(), 7), (bi.clone(), 7)];
        a.saw(same.clone());
        b.saw(same);
        assert!(a.leads() == (ai < bi) && b.leads() == (bi < ai));
        assert!(alone.leads());
    }
}
