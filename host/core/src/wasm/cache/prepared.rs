//! Seed entries loaded as they arrive, before their component does.
//!
//! `toolhost build --cache-key` writes a new version's entry into the
//! plugins folder's `.compile-cache/` first and moves the component in
//! after. The watcher reports the entry the moment it lands, and the cache
//! loads it then (checking its tag against the content hash its name
//! claims, as any read does), while the build is still finishing and while
//! the server reads and hashes the component once it arrives. The component's
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
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use wasmtime::component::Component;

/// Prepared entries held at once (the oldest goes first).
const KEPT: usize = 4;
/// How long a prepared entry waits for its component.
const HELD: Duration = Duration::from_secs(60);

/// One entry being prepared or prepared: locked by its preparer until the
/// outcome is in it (`None`: refused or unreadable).
type Slot = Arc<Mutex<Option<Component>>>;

/// The entries prepared on arrival, newest last.
#[derive(Default)]
pub(super) struct Prepared(Mutex<VecDeque<(String, Instant, Slot)>>);

impl Prepared {
    /// Prepare the entry of `content_hash` with `load` (run here, on the
    /// caller's thread); a load of that hash meanwhile waits for it. Nothing
    /// is done when that hash's entry is already being prepared.
    pub fn prepare(&self, content_hash: &str, load: impl FnOnce() -> Option<Component>) {
        let slot: Slot = Arc::default();
        let mut outcome = slot.lock().unwrap_or_else(PoisonError::into_inner);
        {
            let mut slots = self.lock();
            Self::expire(&mut slots);
            // One being prepared, or prepared: done. One refused (read
            // while still being written, say): prepared again.
            if let Some(at) = slots.iter().position(|(hash, ..)| hash == content_hash) {
                let refused = slots[at].2.try_lock().is_ok_and(|c| c.is_none());
                if !refused {
                    return;
                }
                slots.remove(at);
            }
            if slots.len() == KEPT {
                slots.pop_front();
            }
            slots.push_back((content_hash.to_owned(), Instant::now(), slot.clone()));
        }
        *outcome = load();
    }

    /// The prepared component of `content_hash`, once its preparation is
    /// done, if one was prepared and was authentic; it is given once.
    pub fn take(&self, content_hash: &str) -> Option<Component> {
        let slot = {
            let mut slots = self.lock();
            Self::expire(&mut slots);
            let at = slots.iter().position(|(hash, ..)| hash == content_hash)?;
            slots.remove(at)?.2
        };
        slot.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(String, Instant, Slot)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn expire(slots: &mut VecDeque<(String, Instant, Slot)>) {
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

    /// A load that comes while the entry is still being prepared waits for
    /// it and gets it; it is given once, and only for its own hash.
    #[test]
    fn a_load_waits_for_the_entry_being_prepared_and_takes_it_once() {
        let engine = Engine::default();
        let prepared = Arc::new(Prepared::default());
        let (started, go) = (
            std::sync::mpsc::channel::<()>(),
            std::sync::mpsc::channel::<()>(),
        );
        let preparer = {
            let (prepared, engine) = (prepared.clone(), engine.clone());
            let (started, go) = (started.0, go.1);
            std::thread::spawn(move || {
                prepared.prepare("abc", || {
                    started.send(()).unwrap();
                    go.recv().unwrap();
                    Some(component(&engine))
                })
            })
        };
        started.1.recv().unwrap();
        assert!(prepared.take("abd").is_none(), "another hash's load");
        let taker = {
            let prepared = prepared.clone();
            std::thread::spawn(move || prepared.take("abc"))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!taker.is_finished(), "the load waits for the preparation");
        go.0.send(()).unwrap();
        assert!(taker.join().unwrap().is_some(), "and takes its component");
        preparer.join().unwrap();
        assert!(prepared.take("abc").is_none(), "given once");
    }

    /// A refused entry prepares nothing (and is read again when it comes
    /// again); a hash already prepared is not prepared twice; at most KEPT
    /// are held.
    #[test]
    fn refused_repeated_and_surplus_entries() {
        let engine = Engine::default();
        let prepared = Prepared::default();
        prepared.prepare("bad", || None);
        prepared.prepare("bad", || Some(component(&engine)));
        assert!(
            prepared.take("bad").is_some(),
            "a refused entry is read again"
        );
        prepared.prepare("bad", || None);
        assert!(prepared.take("bad").is_none());

        prepared.prepare("one", || Some(component(&engine)));
        prepared.prepare("one", || panic!("prepared twice"));
        assert!(prepared.take("one").is_some());

        for n in 0..=KEPT {
            prepared.prepare(&n.to_string(), || Some(component(&engine)));
        }
        assert!(prepared.take("0").is_none(), "the oldest was dropped");
        for n in 1..=KEPT {
            assert!(prepared.take(&n.to_string()).is_some(), "{n} is held");
        }
    }
}
