//! Seed entries loaded as they arrive, before their component does.
//!
//! `toolhost build --cache-key` writes a new version's entry into the
//! plugins folder's `.compile-cache/` first and moves the component in
//! after. The watcher reports the entry the moment it lands: a slot for it
//! is opened at once, on the watcher's turn (so it is there before the
//! component's own event is handled), and the entry is read on the
//! blocking pool (its tag checked against the content hash its name claims,
//! as any read does), while the build is still finishing and while the
//! server reads and hashes the component once it arrives. The component's
//! load then takes the prepared code, waiting for it if it is still being
//! read, instead of reading the entry itself: a swap's two largest steps
//! overlap.
//!
//! A prepared component is only ever given to a load whose own hash of the
//! `.wasm` it read equals the hash the entry was checked for, so an entry
//! planted under another name proves nothing more here than in a plain read.
//! At most [`KEPT`] are held, each for at most [`HELD`] (an entry whose
//! component never arrives is dropped, and its memory with it).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use wasmtime::component::Component;

/// Prepared entries held at once (the oldest goes first).
const KEPT: usize = 4;
/// How long a prepared entry waits for its component.
const HELD: Duration = Duration::from_secs(60);

/// What became of an entry: `None` while it is read, then the component
/// (`None` again inside: refused or unreadable).
type Outcome = Option<Option<Component>>;

#[derive(Default)]
struct Slot {
    outcome: Mutex<Outcome>,
    done: Condvar,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, Outcome> {
        self.outcome.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn refused(&self) -> bool {
        matches!(*self.lock(), Some(None))
    }
}

/// The right to fill one slot; a slot never filled (its reader dropped
/// unrun, at a runtime's shutdown, or panicking) is filled with nothing, so
/// no load waits on it for ever.
pub(super) struct Filling(Arc<Slot>);

impl Filling {
    pub fn fill(self, component: Option<Component>) {
        *self.0.lock() = Some(component);
        self.0.done.notify_all();
    }
}

impl Drop for Filling {
    fn drop(&mut self) {
        let mut outcome = self.0.lock();
        if outcome.is_none() {
            *outcome = Some(None);
            self.0.done.notify_all();
        }
    }
}

/// The entries prepared on arrival, newest last.
#[derive(Default)]
pub(super) struct Prepared(Mutex<VecDeque<(String, Instant, Arc<Slot>)>>);

impl Prepared {
    /// Open the slot of `content_hash`'s entry, to be filled by whoever
    /// reads it; a load of that hash meanwhile waits for it. None when that
    /// hash's entry is already being read or was read (a refused one is
    /// read again: it may have been read while still being written).
    pub fn begin(&self, content_hash: &str) -> Option<Filling> {
        let mut slots = self.lock();
        Self::expire(&mut slots);
        if let Some(at) = slots.iter().position(|(hash, ..)| hash == content_hash) {
            if !slots[at].2.refused() {
                return None;
            }
            slots.remove(at);
        }
        if slots.len() == KEPT {
            slots.pop_front();
        }
        let slot = Arc::new(Slot::default());
        slots.push_back((content_hash.to_owned(), Instant::now(), slot.clone()));
        Some(Filling(slot))
    }

    /// The prepared component of `content_hash`, once it is read, if one was
    /// prepared and was authentic; it is given once.
    pub fn take(&self, content_hash: &str) -> Option<Component> {
        let slot = {
            let mut slots = self.lock();
            Self::expire(&mut slots);
            let at = slots.iter().position(|(hash, ..)| hash == content_hash)?;
            slots.remove(at)?.2
        };
        let outcome = slot.lock();
        let mut outcome = slot
            .done
            .wait_while(outcome, |o| o.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        outcome.take().flatten()
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<(String, Instant, Arc<Slot>)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn expire(slots: &mut VecDeque<(String, Instant, Arc<Slot>)>) {
        slots.retain(|(_, at, _)| at.elapsed() < HELD);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::Engine;

    fn component(engine: &Engine) -> Component {
        Component::new(engine, r#"(component (core module (func (export "f"))))"#).unwrap()
    }

    /// A load that comes while the entry is still being read waits for it
    /// and gets it; it is given once, and only for its own hash.
    #[test]
    fn a_load_waits_for_the_entry_being_read_and_takes_it_once() {
        let engine = Engine::default();
        let prepared = Arc::new(Prepared::default());
        let filling = prepared.begin("abc").unwrap();
        assert!(prepared.begin("abc").is_none(), "being read already");
        assert!(prepared.take("abd").is_none(), "another hash's load");
        let taker = {
            let prepared = prepared.clone();
            std::thread::spawn(move || prepared.take("abc"))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!taker.is_finished(), "the load waits for the read");
        filling.fill(Some(component(&engine)));
        assert!(taker.join().unwrap().is_some(), "and takes its component");
        assert!(prepared.take("abc").is_none(), "given once");
    }

    /// A slot whose reader never ran lets its load go on (to read the entry
    /// itself) instead of waiting for ever.
    #[test]
    fn a_reader_dropped_unrun_releases_its_load() {
        let prepared = Arc::new(Prepared::default());
        let filling = prepared.begin("abc").unwrap();
        let taker = {
            let prepared = prepared.clone();
            std::thread::spawn(move || prepared.take("abc"))
        };
        std::thread::sleep(Duration::from_millis(20));
        drop(filling);
        assert!(taker.join().unwrap().is_none());
    }

    /// A refused entry prepares nothing (and is read again when it comes
    /// again); a hash already read is not read twice; at most KEPT are held.
    #[test]
    fn refused_repeated_and_surplus_entries() {
        let engine = Engine::default();
        let prepared = Prepared::default();
        prepared.begin("bad").unwrap().fill(None);
        prepared
            .begin("bad")
            .unwrap()
            .fill(Some(component(&engine)));
        assert!(
            prepared.take("bad").is_some(),
            "a refused entry is read again"
        );
        prepared.begin("bad").unwrap().fill(None);
        assert!(prepared.take("bad").is_none());

        prepared
            .begin("one")
            .unwrap()
            .fill(Some(component(&engine)));
        assert!(prepared.begin("one").is_none(), "read twice");
        assert!(prepared.take("one").is_some());

        for n in 0..=KEPT {
            let filling = prepared.begin(&n.to_string()).unwrap();
            filling.fill(Some(component(&engine)));
        }
        assert!(prepared.take("0").is_none(), "the oldest was dropped");
        for n in 1..=KEPT {
            assert!(prepared.take(&n.to_string()).is_some(), "{n} is held");
        }
    }
}
