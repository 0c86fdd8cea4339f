//! The search result cache: one JSON file per query under
//! `<workspace>/.cache/web_search/`, named by a hash of the provider, the
//! endpoint, the count and the query, holding that key in full (a hash
//! collision is a miss, never another query's results) and the fetch time.
//!
//! It lives in the session's workspace because a wasm instance lives for one
//! call only, and because a cache per session keeps one agent's queries (and
//! whether they were asked) from showing through another session's
//! `cached` flag. It goes with the session.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::providers::Hit;

/// The cache's folder in the workspace.
pub const DIR: &str = ".cache/web_search";
/// Entries kept; past it the expired ones go, then the oldest.
pub const MAX_ENTRIES: usize = 256;

#[derive(Serialize, Deserialize)]
struct Entry {
    key: String,
    fetched_at: u64,
    results: Vec<Hit>,
}

pub struct Cache {
    dir: PathBuf,
    ttl_s: u64,
}

/// The cache key of a query.
pub fn key(provider: &str, endpoint: &str, count: usize, query: &str) -> String {
    format!("{provider}\n{endpoint}\n{count}\n{query}")
}

/// FNV-1a, 64 bits: a file name, not a security boundary (the key is checked).
fn hash(key: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

impl Cache {
    /// The cache under workspace `root`, entries fresh for `ttl_s` seconds.
    pub fn new(root: &Path, ttl_s: u64) -> Cache {
        Cache {
            dir: root.join(DIR),
            ttl_s,
        }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(hash(key) + ".json")
    }

    /// The results stored for `key` and when they were fetched, if fresh at `now`.
    pub fn get(&self, key: &str, now: u64) -> Option<(Vec<Hit>, u64)> {
        if self.ttl_s == 0 {
            return None;
        }
        let text = fs::read(self.path(key)).ok()?;
        let entry: Entry = serde_json::from_slice(&text).ok()?;
        let fresh = entry.key == key && now.saturating_sub(entry.fetched_at) < self.ttl_s;
        fresh.then_some((entry.results, entry.fetched_at))
    }

    /// Store `results` for `key`, fetched at `now` (written whole, then
    /// renamed into place); keeps at most [`MAX_ENTRIES`].
    pub fn put(&self, key: &str, now: u64, results: &[Hit]) -> std::io::Result<()> {
        if self.ttl_s == 0 {
            return Ok(());
        }
        fs::create_dir_all(&self.dir)?;
        let entry = Entry {
            key: key.to_owned(),
            fetched_at: now,
            results: results.to_vec(),
        };
        let path = self.path(key);
        let tmp = path.with_extension("part");
        fs::write(
            &tmp,
            serde_json::to_vec(&entry).map_err(std::io::Error::other)?,
        )?;
        fs::rename(&tmp, &path)?;
        self.prune(now)
    }

    fn prune(&self, now: u64) -> std::io::Result<()> {
        let paths: Vec<PathBuf> = fs::read_dir(&self.dir)?
            .flatten()
            .map(|e| e.path())
            .collect();
        if paths.len() <= MAX_ENTRIES {
            return Ok(());
        }
        let mut entries: Vec<(u64, PathBuf)> = paths
            .into_iter()
            .map(|path| {
                let at = fs::read(&path)
                    .ok()
                    .and_then(|t| serde_json::from_slice::<Entry>(&t).ok())
                    .map_or(0, |e| e.fetched_at);
                (at, path)
            })
            .collect();
        entries.sort();
        let excess = entries.len() - MAX_ENTRIES;
        for (i, (at, path)) in entries.iter().enumerate() {
            if i < excess || now.saturating_sub(*at) >= self.ttl_s {
                let _ = fs::remove_file(path);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(n: usize) -> Vec<Hit> {
        (0..n)
            .map(|i| Hit {
                title: format!("t{i}"),
                url: format!("https://x/{i}"),
                snippet: String::new(),
                published: None,
            })
            .collect()
    }

    #[test]
    fn fresh_entries_hit_and_expired_ones_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path(), 60);
        let k = key("brave", "https://e/", 5, "rust");
        assert!(cache.get(&k, 1000).is_none());
        cache.put(&k, 1000, &hits(2)).unwrap();
        assert_eq!(cache.get(&k, 1059), Some((hits(2), 1000)));
        assert!(cache.get(&k, 1060).is_none(), "expired at the TTL");
        assert!(
            cache
                .get(&key("brave", "https://e/", 5, "rust!"), 1001)
                .is_none()
        );
        assert!(
            cache
                .get(&key("bing", "https://e/", 5, "rust"), 1001)
                .is_none()
        );
        // A damaged entry is a miss, and is replaced.
        fs::write(cache.path(&k), b"{garbage").unwrap();
        assert!(cache.get(&k, 1001).is_none());
        cache.put(&k, 1001, &hits(1)).unwrap();
        assert_eq!(cache.get(&k, 1002), Some((hits(1), 1001)));
        // TTL 0: no cache at all.
        let off = Cache::new(dir.path(), 0);
        off.put(&k, 1003, &hits(3)).unwrap();
        assert!(off.get(&k, 1003).is_none());
    }

    #[test]
    fn a_colliding_file_is_never_another_querys_results() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path(), 60);
        let (a, b) = (key("s", "e", 1, "a"), key("s", "e", 1, "b"));
        cache.put(&a, 10, &hits(1)).unwrap();
        // Pretend `b` hashes to `a`'s file.
        fs::copy(cache.path(&a), cache.path(&b)).unwrap();
        assert!(cache.get(&b, 11).is_none());
    }

    #[test]
    fn the_cache_keeps_a_bounded_number_of_entries() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path(), 1_000_000);
        for i in 0..MAX_ENTRIES + 10 {
            cache
                .put(&key("s", "e", 1, &i.to_string()), i as u64, &hits(1))
                .unwrap();
        }
        let files = fs::read_dir(dir.path().join(DIR)).unwrap().count();
        assert_eq!(files, MAX_ENTRIES);
        let newest = key("s", "e", 1, &(MAX_ENTRIES + 9).to_string());
        assert!(cache.get(&newest, 1000).is_some());
        assert!(
            cache.get(&key("s", "e", 1, "0"), 1000).is_none(),
            "the oldest went"
        );
    }
}
