//! What a list makes of each catalog entry, made once and kept while the
//! entry lives: a list of 10,000 tools reuses what it made of each the last
//! time instead of turning every tool into JSON again on every request
//! (docs/benchmarks.md#costs-that-stay-flat). A tool reloaded or its
//! toolkit replaced is a new entry, so what was made of the old one is
//! never served for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use toolhost_core::catalog::ToolEntry;

/// One kind of thing made per entry (an MCP `Tool`, an OpenAI definition's
/// bytes...), by tool id.
pub struct PerEntry<T> {
    made: Mutex<HashMap<String, (Weak<ToolEntry>, T)>>,
}

impl<T: Clone> Default for PerEntry<T> {
    fn default() -> Self {
        PerEntry {
            made: Mutex::default(),
        }
    }
}

impl<T: Clone> PerEntry<T> {
    /// What `make` makes of each of `entries`, in order; an entry it makes
    /// nothing of is left out (and asked again next time).
    pub fn of<'a>(
        &self,
        entries: impl ExactSizeIterator<Item = &'a Arc<ToolEntry>>,
        make: impl Fn(&ToolEntry) -> Option<T>,
    ) -> Vec<T> {
        let living = entries.len();
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        let out = entries
            .filter_map(|entry| {
                // The same entry, alive: its address is its own.
                if let Some((from, thing)) = made.get(&entry.id)
                    && from.upgrade().is_some_and(|e| Arc::ptr_eq(&e, entry))
                {
                    return Some(thing.clone());
                }
                let thing = make(entry)?;
                made.insert(entry.id.clone(), (Arc::downgrade(entry), thing.clone()));
                Some(thing)
            })
            .collect();
        // Entries gone (a toolkit replaced or removed) are forgotten once they
        // outnumber the living.
        if made.len() > 2 * living + 64 {
            made.retain(|_, (from, _)| from.strong_count() > 0);
        }
        out
    }
}

/// `{"tools":[` the pieces, comma-separated `]}`: a list written from JSON
/// made before.
pub fn listing(pieces: &[Arc<[u8]>]) -> Vec<u8> {
    const OPEN: &[u8] = b"{\"tools\":";
    let mut body = Vec::with_capacity(OPEN.len() + joined_len(pieces) + 1);
    body.extend_from_slice(OPEN);
    join_into(&mut body, pieces);
    body.push(b'}');
    body
}

/// The length of `pieces` joined as a JSON array.
pub fn joined_len(pieces: &[Arc<[u8]>]) -> usize {
    pieces.iter().map(|p| p.len()).sum::<usize>() + pieces.len().saturating_sub(1) + 2
}

/// `[` the pieces, comma-separated `]`, at the end of `out`.
pub fn join_into(out: &mut Vec<u8>, pieces: &[Arc<[u8]>]) {
    out.push(b'[');
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(piece);
    }
    out.push(b']');
}

/// Catalog entries for unit tests of what is made of them.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;
    use toolhost_core::backend::{Detached, Invocation, Toolkit};
    use toolhost_core::catalog::{Catalog, ToolkitEntry};
    use toolhost_core::tool::{BoxFuture, CallError, Content, Limits, ToolDescriptor};

    struct Idle;
    impl Toolkit for Idle {
        fn invoke(self: Arc<Self>, _: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
            Box::pin(async { Ok(vec![]) })
        }
    }

    /// Tool `name`: an object input schema, `output` its output schema.
    pub fn tool(
        name: &str,
        description: &str,
        output: Option<serde_json::Value>,
    ) -> ToolDescriptor {
        ToolDescriptor {
            name: name.into(),
            description: description.into(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: output,
            continue_with: None,
            hints: Default::default(),
        }
    }

    /// `tools` registered as toolkit `kit` of `catalog`, at `version`.
    pub fn register(catalog: &Catalog, version: &str, tools: Vec<ToolDescriptor>) {
        let kit = ToolkitEntry::new(
            Arc::new(Detached("test")),
            "kit",
            "",
            version,
            Limits::default(),
            Arc::new(Idle),
        );
        catalog.register(kit, tools).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{register as register_kit, tool};
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use toolhost_core::catalog::Catalog;

    fn register(catalog: &Catalog, description: &str) {
        register_kit(catalog, description, vec![tool("x", description, None)]);
    }

    #[test]
    fn made_once_per_entry_and_again_for_a_new_one() {
        let catalog = Catalog::new();
        let made = PerEntry::<String>::default();
        let calls = AtomicUsize::new(0);
        let make = |t: &ToolEntry| {
            calls.fetch_add(1, Ordering::Relaxed);
            Some(t.descriptor.description.clone())
        };
        register(&catalog, "one");
        assert_eq!(made.of(catalog.tools().iter(), make), ["one"]);
        assert_eq!(made.of(catalog.tools().iter(), make), ["one"]);
        assert_eq!(
            calls.load(Ordering::Relaxed),
            1,
            "made again for the same entry"
        );
        // Reloaded: a new entry under the same id is made anew.
        register(&catalog, "two");
        assert_eq!(made.of(catalog.tools().iter(), make), ["two"]);
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        // Nothing made is left out, and asked again.
        let none = PerEntry::<String>::default();
        assert!(none.of(catalog.tools().iter(), |_| None).is_empty());
    }

    #[test]
    fn a_listing_is_the_json_of_its_pieces() {
        let pieces: Vec<Arc<[u8]>> = vec![Arc::from(&b"{\"a\":1}"[..]), Arc::from(&b"[2]"[..])];
        let body = listing(&pieces);
        let parsed: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(parsed, serde_json::json!({"tools": [{"a": 1}, [2]]}));
        assert_eq!(body.capacity(), body.len());
        let empty: serde_json::Value = serde_json::from_slice(&listing(&[])).unwrap();
        assert_eq!(empty, serde_json::json!({"tools": []}));
    }
}
