//! The compiled-component cache on disk.
//!
//! Compiling a component is the slow part of loading it (milliseconds for a
//! small Rust plugin, seconds for an 18 MB Python one). The cache keeps what
//! `Component::serialize` produced, keyed by the component's content hash and a
//! fingerprint of the engine (wasmtime version + every setting that affects
//! code generation), so a restart or a reload of known bytes skips the
//! compiler.
//!
//! An entry is `<content hash>-<engine fingerprint>.cwasm`: a magic tag, the
//! SHA-256 of the payload, then the payload. It is written to a temporary file
//! and renamed into place, so a reader never sees half an entry; it is checked
//! against its checksum before wasmtime sees it, so a damaged entry is deleted
//! and the component compiled again. Entries of another fingerprint (an older
//! engine or other settings) are never read; [`CompileCache::prune`] deletes
//! them together with entries no plugin uses any more.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The folder of a plugins directory where `toolhost precompile` (run by
/// `make plugins` and `toolhost build`) puts compiled components, for
/// servers to read when their own cache has no entry (a fresh data
/// directory). Hidden, so the watcher and the toolkit scan pass it by.
pub const PRECOMPILED_DIR: &str = ".compile-cache";

const MAGIC: &[u8; 8] = b"THCWASM1";
const HEADER: usize = MAGIC.len() + 32;
const EXTENSION: &str = "cwasm";

/// The cache directory of one engine.
#[derive(Clone)]
pub struct CompileCache {
    dir: PathBuf,
    fingerprint: String,
    /// Read-only caches looked at after `dir` (precompiled by the build).
    seeds: std::sync::Arc<std::sync::RwLock<Vec<PathBuf>>>,
}

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Loaded from the cache.
    Cached,
    /// Compiled (and stored, when the cache is writable).
    Compiled,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Cached => "cache",
            Origin::Compiled => "compiled",
        }
    }
}

impl CompileCache {
    /// A cache in `dir` (created if missing) for components of `engine`.
    pub fn open(dir: &Path, engine: &Engine) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(CompileCache {
            dir: dir.to_owned(),
            fingerprint: fingerprint(engine),
            seeds: Default::default(),
        })
    }

    /// Also read entries from `dir` (never written or pruned here; an entry
    /// of another engine is not seen, a damaged one is passed over).
    pub fn add_seed(&self, dir: &Path) {
        self.seeds
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(dir.to_owned());
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, content_hash: &str) -> PathBuf {
        self.dir
            .join(format!("{content_hash}-{}.{EXTENSION}", self.fingerprint))
    }

    /// The cached compilation of the component with `content_hash`, if there
    /// is a sound one, from this cache or else a seed. A damaged entry of
    /// this cache is deleted.
    pub fn get(&self, engine: &Engine, content_hash: &str) -> Option<Component> {
        if let Some(component) = self.get_in(engine, &self.path(content_hash), true) {
            return Some(component);
        }
        let seeds = self.seeds.read().unwrap_or_else(|e| e.into_inner()).clone();
        let file = self.path(content_hash);
        let file = file.file_name()?;
        seeds
            .iter()
            .find_map(|seed| self.get_in(engine, &seed.join(file), false))
    }

    fn get_in(&self, engine: &Engine, path: &Path, own: bool) -> Option<Component> {
        let bytes = std::fs::read(path).ok()?;
        match verify(&bytes) {
            // SAFETY: the payload was produced by `Component::serialize` of an
            // engine with this fingerprint and written by this module (the
            // checksum proves it is intact); the cache directory belongs to
            // the server, like the plugins directory.
            Some(payload) => match unsafe { Component::deserialize(engine, payload) } {
                Ok(component) => return Some(component),
                Err(e) => {
                    tracing::warn!(entry = %path.display(), error = %format!("{e:#}"), "unusable cache entry; compiling again")
                }
            },
            None => {
                tracing::warn!(entry = %path.display(), "damaged cache entry; compiling again")
            }
        }
        if own {
            let _ = std::fs::remove_file(path);
        }
        None
    }

    /// Store `component` under `content_hash`. Failures are logged, not
    /// returned: the cache is an optimisation.
    pub fn put(&self, content_hash: &str, component: &Component) {
        if let Err(e) = self.try_put(content_hash, component) {
            tracing::warn!(dir = %self.dir.display(), error = %format!("{e:#}"), "could not write the compile cache");
        }
    }

    fn try_put(&self, content_hash: &str, component: &Component) -> anyhow::Result<()> {
        let payload = component
            .serialize()
            .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        tmp.write_all(MAGIC)?;
        tmp.write_all(&Sha256::digest(&payload))?;
        tmp.write_all(&payload)?;
        tmp.as_file().sync_data()?;
        tmp.persist(self.path(content_hash))?;
        Ok(())
    }

    /// Delete entries of other engines and entries whose content hash is not
    /// in `keep`. Returns how many were deleted.
    pub fn prune(&self, keep: &HashSet<String>) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let suffix = format!("-{}.{EXTENSION}", self.fingerprint);
        let mut deleted = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let stale = match name.strip_suffix(&suffix) {
                Some(hash) => !keep.contains(hash),
                // Another engine's entry, or a temporary file left by a crash.
                None => name.ends_with(EXTENSION) || name.starts_with(".tmp"),
            };
            if stale && std::fs::remove_file(entry.path()).is_ok() {
                deleted += 1;
            }
        }
        deleted
    }
}

/// The payload of an entry whose header and checksum are right.
fn verify(bytes: &[u8]) -> Option<&[u8]> {
    if bytes.len() < HEADER || &bytes[..MAGIC.len()] != MAGIC {
        return None;
    }
    let (sum, payload) = bytes[MAGIC.len()..].split_at(32);
    (Sha256::digest(payload).as_slice() == sum).then_some(payload)
}

/// A short hex fingerprint of everything in `engine` that decides whether a
/// serialized component can be loaded into it.
fn fingerprint(engine: &Engine) -> String {
    // SipHash with fixed keys: stable for a given build of toolhost, which is
    // all that is needed (a new build at worst misses the cache once).
    #[allow(deprecated)]
    let mut hasher = std::hash::SipHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    env!("CARGO_PKG_VERSION").hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAT: &str = r#"(component (core module (func (export "f"))))"#;

    fn engine() -> Engine {
        Engine::default()
    }

    #[test]
    fn round_trip_damage_and_prune() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache = CompileCache::open(dir.path(), &engine).unwrap();
        assert!(cache.get(&engine, "abc").is_none());

        let component = Component::new(&engine, WAT).unwrap();
        cache.put("abc", &component);
        assert!(cache.get(&engine, "abc").is_some());

        // Flip one byte of the payload: the checksum catches it, the entry goes.
        let path = cache.path("abc");
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert!(cache.get(&engine, "abc").is_none());
        assert!(!path.exists(), "a damaged entry is deleted");

        // Truncated, and junk.
        cache.put("abc", &component);
        std::fs::write(&path, &std::fs::read(&path).unwrap()[..100]).unwrap();
        assert!(cache.get(&engine, "abc").is_none());
        std::fs::write(&path, b"junk").unwrap();
        assert!(cache.get(&engine, "abc").is_none());

        cache.put("abc", &component);
        cache.put("old", &component);
        std::fs::write(dir.path().join("abc-0123456789abcdef.cwasm"), b"x").unwrap();
        std::fs::write(dir.path().join("unrelated.txt"), b"x").unwrap();
        let keep: HashSet<String> = ["abc".to_owned()].into();
        assert_eq!(cache.prune(&keep), 2);
        assert!(cache.get(&engine, "abc").is_some());
        assert!(dir.path().join("unrelated.txt").exists());
    }

    #[test]
    fn seeds_are_read_after_the_cache_and_never_changed() {
        let (dir, seed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let engine = engine();
        let component = Component::new(&engine, WAT).unwrap();
        CompileCache::open(seed.path(), &engine)
            .unwrap()
            .put("abc", &component);
        let cache = CompileCache::open(dir.path(), &engine).unwrap();
        assert!(cache.get(&engine, "abc").is_none());
        cache.add_seed(seed.path());
        assert!(cache.get(&engine, "abc").is_some(), "read from the seed");
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "nothing written into the cache"
        );
        // A damaged seed entry is passed over, not deleted.
        let entry = std::fs::read_dir(seed.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::write(&entry, b"junk").unwrap();
        assert!(cache.get(&engine, "abc").is_none());
        assert!(entry.exists());
        // Another engine's seed entries are not seen.
        let mut config = wasmtime::Config::new();
        config.consume_fuel(true);
        let other = Engine::new(&config).unwrap();
        CompileCache::open(seed.path(), &other)
            .unwrap()
            .put("def", &Component::new(&other, WAT).unwrap());
        assert!(cache.get(&engine, "def").is_none());
    }

    #[test]
    fn another_engine_configuration_misses() {
        let dir = tempfile::tempdir().unwrap();
        let a = engine();
        let mut config = wasmtime::Config::new();
        config.consume_fuel(true);
        let b = Engine::new(&config).unwrap();
        let cache_a = CompileCache::open(dir.path(), &a).unwrap();
        let cache_b = CompileCache::open(dir.path(), &b).unwrap();
        assert_ne!(cache_a.fingerprint, cache_b.fingerprint);
        cache_a.put("abc", &Component::new(&a, WAT).unwrap());
        assert!(cache_b.get(&b, "abc").is_none());
        assert!(cache_a.get(&a, "abc").is_some());
    }
}
