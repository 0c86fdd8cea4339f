//! The compiled-component cache on disk.
//!
//! Compiling a component is the slow part of loading it (milliseconds for a
//! small Rust plugin, seconds for an 18 MB Python one). The cache keeps what
//! `Component::serialize` produced, keyed by the component's content hash and a
//! fingerprint of the engine (wasmtime version + every setting that affects
//! code generation) and of the entry format, so a restart or a reload of
//! known bytes skips the compiler.
//!
//! An entry is `<content hash>-<engine fingerprint>.cwasm`: a magic tag, a
//! keyed BLAKE3 tag, then the payload. It is written to a temporary file and
//! renamed into place, so a reader never sees half an entry. A reader
//! copies the payload into a sealed memfd, checking the tag over the bytes
//! as they are copied, and wasmtime maps that (see [`sealed`]).
//!
//! **An entry is native code**: `Component::deserialize` runs its bytes in
//! the host process, outside every limit. So an entry is read only when its
//! tag is right under the server's [`CacheKey`], computed over the content
//! hash of the component the server is loading (from the `.wasm` bytes it
//! read itself), the engine fingerprint and the payload. A checksum stored in
//! the entry would prove only that the file is intact; the key proves it was
//! written by this server or by `toolhost precompile` run with the same key
//! (`--data`, `--key`), and the content hash proves it is the compilation of
//! *these* bytes: an entry copied over another component's name, or made by
//! whoever can write the plugins directory but cannot read the key, is
//! refused and the component compiled. A refused entry of the server's own
//! cache is deleted; one in a seed (`.compile-cache/`) is passed over.
//! Entries of another fingerprint (an older engine or other settings) are
//! never read; [`CompileCache::prune`] deletes them together with entries no
//! plugin uses any more.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::text::hex;

mod prepared;
mod sealed;

/// The folder of a plugins directory where `toolhost precompile` (run by
/// `make plugins` and `toolhost build`) puts compiled components, for
/// servers to read when their own cache has no entry (a fresh data
/// directory). Hidden, so the watcher and the toolkit scan pass it by.
pub const PRECOMPILED_DIR: &str = ".compile-cache";

/// Version 3: keyed BLAKE3 (version 2's HMAC-SHA256 took five times as
/// long over a 40 MB entry; version 1 carried a bare checksum). Entries of
/// other versions are never read: their components are compiled again.
const MAGIC: &[u8; 8] = b"THCWASM3";
/// What the tag is computed over first, so it can mean nothing else.
const DOMAIN: &[u8] = b"toolhost compile-cache entry v3\n";
/// The key file the server makes in its data directory when none is given.
pub const KEY_FILE: &str = "compile-cache.key";

/// The secret that authenticates compile-cache entries: 32 random bytes,
/// kept as 64 hex digits in a file only the server (and whoever runs
/// `toolhost precompile` for it) can read.
#[derive(Clone)]
pub struct CacheKey([u8; 32]);

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheKey([hidden])")
    }
}

impl CacheKey {
    /// A new random key.
    pub fn generate() -> Self {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the system's random source failed");
        CacheKey(key)
    }

    /// The key in `path`; made (mode 0600) when the file does not exist.
    pub fn load_or_create(path: &Path) -> anyhow::Result<Self> {
        match Self::load(path) {
            Ok(key) => Ok(key),
            Err(_) if !path.exists() => {
                let key = Self::generate();
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let mut file = std::fs::OpenOptions::new();
                file.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
                match file.open(path) {
                    Ok(mut f) => {
                        writeln!(f, "{}", hex(&key.0))?;
                        f.sync_all()?;
                        Ok(key)
                    }
                    // Another process made it first: use theirs.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Self::load(path),
                    Err(e) => Err(anyhow::anyhow!(
                        "cannot create the compile-cache key {}: {e}",
                        path.display()
                    )),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// The key in `path`: 64 hex digits. A key file anyone may write is
    /// refused (anyone could then sign native code).
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!("cannot read the compile-cache key {}: {e}", path.display())
        })?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let mode = std::fs::metadata(path)?.mode();
            if mode & 0o002 != 0 {
                anyhow::bail!(
                    "the compile-cache key {} is writable by anyone (mode {:o}): refused",
                    path.display(),
                    mode & 0o777
                );
            }
        }
        let text = text.trim();
        let bytes: Option<Vec<u8>> = (text.len() == 64)
            .then(|| {
                (0..32)
                    .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok())
                    .collect()
            })
            .flatten();
        let bytes = bytes.ok_or_else(|| {
            anyhow::anyhow!(
                "the compile-cache key {} is not 64 hex digits",
                path.display()
            )
        })?;
        Ok(CacheKey(bytes.try_into().expect("32 bytes")))
    }

    /// The tag of a payload (hashed into it next) as the compilation of the
    /// component with `content_hash` by an engine with `fingerprint`.
    fn mac(&self, content_hash: &str, fingerprint: &str) -> blake3::Hasher {
        let mut mac = blake3::Hasher::new_keyed(&self.0);
        mac.update(DOMAIN);
        for part in [
            content_hash.as_bytes(),
            b"\n",
            fingerprint.as_bytes(),
            b"\n",
        ] {
            mac.update(part);
        }
        mac
    }
}
const HEADER: usize = MAGIC.len() + 32;
const EXTENSION: &str = "cwasm";

/// The cache directory of one engine.
#[derive(Clone)]
pub struct CompileCache {
    dir: PathBuf,
    fingerprint: String,
    key: CacheKey,
    /// Read-only caches looked at after `dir` (precompiled by the build).
    seeds: std::sync::Arc<std::sync::RwLock<Vec<PathBuf>>>,
    /// Entries being written behind their loads ([`CompileCache::put_behind`]).
    writing: std::sync::Arc<(std::sync::Mutex<usize>, std::sync::Condvar)>,
    /// Seed entries loaded as they arrived ([`CompileCache::preparing`]).
    prepared: std::sync::Arc<prepared::Prepared>,
}

/// A seed entry to read for the load of its component
/// ([`CompileCache::preparing`]).
pub struct Preparing {
    cache: CompileCache,
    content_hash: String,
    path: PathBuf,
    filling: prepared::Filling,
}

impl Preparing {
    /// Read the entry (blocks while it reads: tens of ms for a large one).
    pub fn read(self, engine: &Engine) {
        let started = std::time::Instant::now();
        let component = self
            .cache
            .get_in(engine, &self.content_hash, &self.path, false);
        tracing::debug!(
            entry = %self.path.display(),
            ok = component.is_some(),
            ms = started.elapsed().as_secs_f64() * 1000.0,
            "cache entry prepared on its arrival"
        );
        self.filling.fill(component);
    }
}

/// One write of [`CompileCache::put_behind`], counted until it is done (or
/// dropped unrun, at a runtime's shutdown).
struct Writing(std::sync::Arc<(std::sync::Mutex<usize>, std::sync::Condvar)>);

impl Drop for Writing {
    fn drop(&mut self) {
        let (count, done) = &*self.0;
        *count.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        done.notify_all();
    }
}

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Loaded from the cache.
    Cached,
    /// Compiled (and stored, when the cache is writable).
    Compiled,
    /// Compiled by Winch, served while Cranelift compiles it.
    Quick,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Cached => "cache",
            Origin::Compiled => "compiled",
            Origin::Quick => "winch",
        }
    }
}

impl CompileCache {
    /// A cache in `dir` (created if missing) for components of `engine`,
    /// its entries authenticated with `key`.
    pub fn open(dir: &Path, engine: &Engine, key: CacheKey) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(CompileCache {
            dir: dir.to_owned(),
            fingerprint: fingerprint(engine),
            key,
            seeds: Default::default(),
            writing: Default::default(),
            prepared: Default::default(),
        })
    }

    /// Also read entries from `dir` (never written or pruned here; an entry
    /// of another engine is not seen, a damaged or unauthenticated one is
    /// passed over).
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
        self.dir.join(self.entry_name(content_hash))
    }

    /// The file name of the entry of the component with `content_hash`:
    /// `<content hash>-<engine fingerprint>.cwasm`.
    fn entry_name(&self, content_hash: &str) -> String {
        format!("{content_hash}-{}.{EXTENSION}", self.fingerprint)
    }

    /// The content hash an entry file `name` is for, if it is named as this
    /// engine's entries are ([`CompileCache::entry_name`] read back).
    fn entry_hash<'a>(&self, name: &'a str) -> Option<&'a str> {
        name.strip_suffix(EXTENSION)?
            .strip_suffix('.')?
            .strip_suffix(self.fingerprint.as_str())?
            .strip_suffix('-')
    }

    /// The cached compilation of the component with `content_hash` (the
    /// SHA-256 of bytes the caller read itself), if there is an authentic
    /// one, from this cache or else a seed. A refused entry of this cache is
    /// deleted.
    pub fn get(&self, engine: &Engine, content_hash: &str) -> Option<Component> {
        if let Some(component) = self.prepared.take(content_hash) {
            tracing::debug!(content_hash, "cache entry taken as prepared on its arrival");
            return Some(component);
        }
        if let Some(component) = self.get_in(engine, content_hash, &self.path(content_hash), true) {
            return Some(component);
        }
        let seeds = self.seeds.read().unwrap_or_else(|e| e.into_inner()).clone();
        let file = self.entry_name(content_hash);
        seeds
            .iter()
            .find_map(|seed| self.get_in(engine, content_hash, &seed.join(&file), false))
    }

    /// A reading of the entry at `path`, if it is one of this engine's in a
    /// seed (just written there, before its component: `toolhost build
    /// --cache-key`) and not read already: from now until it is read, a load
    /// of the component with the content hash its name claims waits for it
    /// and takes it (module `prepared`). [`Preparing::read`] it off the caller's
    /// thread.
    pub fn preparing(&self, path: &Path) -> Option<Preparing> {
        let content_hash = self.seed_entry(path)?;
        let filling = self.prepared.begin(&content_hash)?;
        Some(Preparing {
            cache: self.clone(),
            content_hash,
            path: path.to_owned(),
            filling,
        })
    }

    /// The content hash the entry at `path` is named for, if it is an entry
    /// of this engine's directly in a seed.
    pub fn seed_entry(&self, path: &Path) -> Option<String> {
        let hash = self.entry_hash(path.file_name()?.to_str()?)?;
        let seeds = self.seeds.read().unwrap_or_else(|e| e.into_inner());
        let in_seed = seeds
            .iter()
            .any(|seed| Some(seed.as_path()) == path.parent());
        (in_seed && !hash.is_empty() && hash.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| hash.to_owned())
    }

    fn get_in(
        &self,
        engine: &Engine,
        content_hash: &str,
        path: &Path,
        own: bool,
    ) -> Option<Component> {
        let mut file = std::fs::File::open(path).ok()?;
        match self.read(engine, content_hash, &mut file) {
            Ok(component) => return Some(component),
            Err(Refused::Unusable(e)) => {
                tracing::warn!(entry = %path.display(), error = %format!("{e:#}"), "unusable cache entry; compiling again")
            }
            Err(Refused::NotAuthentic) => {
                tracing::warn!(entry = %path.display(), "cache entry refused (damaged, or not made with this server's key for this component); compiling again")
            }
        }
        if own {
            let _ = std::fs::remove_file(path);
        }
        None
    }

    /// The component in entry `file`, if its tag is this key's for
    /// `content_hash` (compared in constant time) over the payload read.
    fn read(
        &self,
        engine: &Engine,
        content_hash: &str,
        file: &mut std::fs::File,
    ) -> Result<Component, Refused> {
        let len = file.metadata().map_err(|_| Refused::NotAuthentic)?.len();
        let mut header = [0u8; HEADER];
        if len < HEADER as u64
            || file.read_exact(&mut header).is_err()
            || &header[..MAGIC.len()] != MAGIC
        {
            return Err(Refused::NotAuthentic);
        }
        let tag = blake3::Hash::from_bytes(header[MAGIC.len()..].try_into().expect("32 bytes"));
        let mut mac = self.key.mac(content_hash, &self.fingerprint);
        let len = len - HEADER as u64;
        let payload = match sealed::Unsealed::create() {
            Ok(memfd) => memfd.fill(file, len, &mut mac).map(Payload::Sealed),
            // No memfd here: read into memory, deserialized (copied) from there.
            Err(_) => {
                let mut bytes = Vec::new();
                sealed::copy_hashed(file, len, &mut mac, &mut bytes)
                    .map(|()| Payload::Memory(bytes))
            }
        }
        .map_err(|_| Refused::NotAuthentic)?;
        if mac.finalize() != tag {
            return Err(Refused::NotAuthentic);
        }
        // SAFETY (both calls below): the tag proves the payload was produced
        // by `Component::serialize` of an engine with this fingerprint, from
        // the component with this content hash, by a holder of the key (this
        // server, or `toolhost precompile` run for it), and that not a byte
        // changed since; the memfd or memory of ours holds exactly the bytes
        // the tag was checked over, and the memfd's seals keep them so.
        let bytes = match payload {
            Payload::Sealed(memfd) => {
                match unsafe { Component::deserialize_file(engine, memfd.path()) } {
                    Ok(component) => return Ok(component),
                    Err(e) => {
                        tracing::debug!(error = %format!("{e:#}"), "cannot map the sealed entry: deserialized from memory");
                        memfd.to_vec().map_err(|_| Refused::NotAuthentic)?
                    }
                }
            }
            Payload::Memory(bytes) => bytes,
        };
        unsafe { Component::deserialize(engine, &bytes) }.map_err(Refused::Unusable)
    }

    /// Delete the entry of the component with `content_hash`, if there is
    /// one (a version replaced in a plugins folder: its entry would stay
    /// there unused).
    pub fn forget(&self, content_hash: &str) {
        let _ = std::fs::remove_file(self.path(content_hash));
    }

    /// Store `component` under `content_hash` on `runtime`'s blocking pool,
    /// behind the load that compiled it (a swap does not wait for the disk);
    /// [`CompileCache::wait_written`] waits for every such write.
    pub fn put_behind(
        &self,
        runtime: &tokio::runtime::Handle,
        content_hash: String,
        component: Component,
    ) {
        *self.writing.0.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        let writing = Writing(self.writing.clone());
        let cache = self.clone();
        runtime.spawn_blocking(move || {
            cache.put(&content_hash, &component);
            drop(writing);
        });
    }

    /// Block until every write of [`CompileCache::put_behind`] is done:
    /// `toolhost build --cache-key` moves a component in only once its entry
    /// is there to be found.
    pub fn wait_written(&self) {
        let (count, done) = &*self.writing;
        let mut left = count.lock().unwrap_or_else(|e| e.into_inner());
        while *left > 0 {
            left = done.wait(left).unwrap_or_else(|e| e.into_inner());
        }
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
        let mut mac = self.key.mac(content_hash, &self.fingerprint);
        mac.update(&payload);
        tmp.write_all(MAGIC)?;
        tmp.write_all(mac.finalize().as_bytes())?;
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
        let mut deleted = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let stale = match self.entry_hash(name) {
                Some(hash) => !keep.contains(hash),
                // Another engine's entry, or a temporary file left by a
                // crash (not one a compile is writing now).
                None => name.ends_with(EXTENSION) || name.starts_with(".tmp") && left(&entry),
            };
            if stale && std::fs::remove_file(entry.path()).is_ok() {
                deleted += 1;
            }
        }
        deleted
    }
}

/// Whether a temporary file was left: untouched for a minute.
fn left(entry: &std::fs::DirEntry) -> bool {
    entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| {
        t.elapsed()
            .is_ok_and(|age| age > std::time::Duration::from_secs(60))
    })
}

/// An entry's payload, copied where its tag was checked.
enum Payload {
    /// Into a sealed memfd, which wasmtime maps.
    Sealed(sealed::Sealed),
    /// Into memory (where no memfd can be made).
    Memory(Vec<u8>),
}

/// Why an entry was not used.
enum Refused {
    /// Damaged, or not this key's for this component.
    NotAuthentic,
    /// Authentic, but wasmtime would not load it.
    Unusable(wasmtime::Error),
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
    // Entries of another format have other names: pruned from the cache,
    // never looked at in a seed.
    MAGIC.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAT: &str = r#"(component (core module (func (export "f"))))"#;

    fn engine() -> Engine {
        Engine::default()
    }

    fn key() -> CacheKey {
        CacheKey([7; 32])
    }

    /// The attack of issue #38: another component's authentic entry copied
    /// over this one's name, an entry made with another key, and a
    /// version-1 entry (a bare checksum, which anyone can compute) are all
    /// refused; the component is then compiled from its `.wasm`.
    #[test]
    fn only_this_keys_entry_for_this_component_is_read() {
        let (dir, seed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let engine = engine();
        let component = Component::new(&engine, WAT).unwrap();
        let other =
            Component::new(&engine, r#"(component (core module (func (export "g"))))"#).unwrap();
        let writer = CompileCache::open(seed.path(), &engine, key()).unwrap();
        writer.put("calc", &component);
        writer.put("checksum", &other);
        let cache = CompileCache::open(dir.path(), &engine, key()).unwrap();
        cache.add_seed(seed.path());
        assert!(cache.get(&engine, "calc").is_some(), "the authentic entry");

        // checksum's entry planted under calc's name, in the seed and in
        // the server's own cache.
        std::fs::copy(writer.path("checksum"), writer.path("calc")).unwrap();
        assert!(cache.get(&engine, "calc").is_none(), "planted in the seed");
        std::fs::copy(writer.path("checksum"), cache.path("calc")).unwrap();
        assert!(cache.get(&engine, "calc").is_none(), "planted in the cache");
        assert!(
            !cache.path("calc").exists(),
            "a refused own entry is deleted"
        );

        // Made with another key (by whoever cannot read this one).
        let foreign = CompileCache::open(seed.path(), &engine, CacheKey([8; 32])).unwrap();
        foreign.put("calc", &component);
        assert!(cache.get(&engine, "calc").is_none(), "another key's entry");

        // A version-1 entry: magic, SHA-256 of the payload, payload.
        let payload = component.serialize().unwrap();
        let mut v1 = b"THCWASM1".to_vec();
        v1.extend_from_slice(&<sha2::Sha256 as sha2::Digest>::digest(&payload));
        v1.extend_from_slice(&payload);
        std::fs::write(writer.path("calc"), v1).unwrap();
        assert!(cache.get(&engine, "calc").is_none(), "a checksummed entry");
        assert!(writer.path("calc").exists(), "a seed is never changed");

        // This version's entry under another version's magic.
        writer.put("calc", &component);
        let mut entry = std::fs::read(writer.path("calc")).unwrap();
        entry[..MAGIC.len()].copy_from_slice(b"THCWASM2");
        std::fs::write(writer.path("calc"), entry).unwrap();
        assert!(
            cache.get(&engine, "calc").is_none(),
            "another version's entry"
        );
    }

    /// An entry is run from its sealed copy (a memfd mapping, not memory
    /// deserialized from a read), and the entry rewritten in place after it
    /// was checked changes nothing that runs.
    #[test]
    fn an_entry_runs_from_its_sealed_copy_whatever_its_file_becomes() {
        const ANSWER: &str = r#"(component
            (core module $m (func (export "f") (result i32) i32.const 42))
            (core instance $i (instantiate $m))
            (func (export "f") (result u32) (canon lift (core func $i "f"))))"#;
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache = CompileCache::open(dir.path(), &engine, key()).unwrap();
        cache.put("abc", &Component::new(&engine, ANSWER).unwrap());
        let loaded = cache.get(&engine, "abc").unwrap();

        let code = loaded.image_range().start as usize;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mapping = maps.lines().find(|line| {
            let range = line.split(' ').next().unwrap();
            let (start, end) = range.split_once('-').unwrap();
            let start = usize::from_str_radix(start, 16).unwrap();
            let end = usize::from_str_radix(end, 16).unwrap();
            (start..end).contains(&code)
        });
        assert!(
            mapping.is_some_and(|line| line.contains("memfd:toolhost-cwasm")),
            "the code is mapped from the sealed memfd: {mapping:?}"
        );

        let path = cache.path("abc");
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(HEADER as u64)).unwrap();
        file.write_all(&vec![0xcc; len - HEADER]).unwrap();
        file.sync_all().unwrap();

        let mut store = wasmtime::Store::new(&engine, ());
        let linker = wasmtime::component::Linker::<()>::new(&engine);
        let instance = linker.instantiate(&mut store, &loaded).unwrap();
        let f = instance
            .get_typed_func::<(), (u32,)>(&mut store, "f")
            .unwrap();
        assert_eq!(f.call(&mut store, ()).unwrap(), (42,));
        assert!(cache.get(&engine, "abc").is_none(), "the rewritten entry");
    }

    /// A seed entry is loaded when it arrives, for its component's load to
    /// take (the entry file may be gone by then); only this engine's entries
    /// directly in a seed are, and a planted entry prepares nothing.
    #[test]
    fn a_seed_entry_is_prepared_on_arrival_for_its_component_only() {
        let (dir, seed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let engine = engine();
        let (calc, other) = ("ca1c", "0e7a");
        let writer = CompileCache::open(seed.path(), &engine, key()).unwrap();
        writer.put(calc, &Component::new(&engine, WAT).unwrap());
        let cache = CompileCache::open(dir.path(), &engine, key()).unwrap();

        assert_eq!(cache.seed_entry(&writer.path(calc)), None, "not a seed yet");
        cache.add_seed(seed.path());
        assert_eq!(cache.seed_entry(&writer.path(calc)).as_deref(), Some(calc));
        let elsewhere = seed
            .path()
            .join("sub")
            .join(writer.path(calc).file_name().unwrap());
        assert_eq!(cache.seed_entry(&elsewhere), None, "below a seed");
        let foreign = seed
            .path()
            .join(format!("{calc}-0123456789abcdef.{EXTENSION}"));
        assert_eq!(cache.seed_entry(&foreign), None, "another engine's");

        let preparing = cache.preparing(&writer.path(calc)).unwrap();
        assert!(cache.preparing(&writer.path(calc)).is_none(), "one reading");
        preparing.read(&engine);
        std::fs::remove_file(writer.path(calc)).unwrap();
        assert!(
            cache.get(&engine, other).is_none(),
            "not another component's"
        );
        assert!(cache.get(&engine, calc).is_some(), "taken as prepared");
        assert!(cache.get(&engine, calc).is_none(), "once");

        // Another component's authentic entry under this one's name.
        writer.put(other, &Component::new(&engine, WAT).unwrap());
        std::fs::rename(writer.path(other), writer.path(calc)).unwrap();
        cache.preparing(&writer.path(calc)).unwrap().read(&engine);
        std::fs::remove_file(writer.path(calc)).unwrap();
        assert!(cache.get(&engine, calc).is_none(), "a planted entry");
    }

    #[test]
    fn the_key_file_is_made_private_read_back_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/compile-cache.key");
        let made = CacheKey::load_or_create(&path).unwrap();
        assert_eq!(
            CacheKey::load_or_create(&path).unwrap().0,
            made.0,
            "read back"
        );
        assert_ne!(CacheKey::generate().0, made.0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
            let e = CacheKey::load(&path).unwrap_err().to_string();
            assert!(e.contains("writable by anyone"), "{e}");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        std::fs::write(&path, "not hex").unwrap();
        let e = CacheKey::load_or_create(&path).unwrap_err().to_string();
        assert!(e.contains("64 hex digits"), "{e}");
        assert!(format!("{made:?}").contains("hidden"));
    }

    #[test]
    fn round_trip_damage_and_prune() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache = CompileCache::open(dir.path(), &engine, key()).unwrap();
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
        // A temporary file a put is writing now stays; one a crash left goes.
        std::fs::write(dir.path().join(".tmpWriting"), b"x").unwrap();
        let left = std::fs::File::create(dir.path().join(".tmpLeft")).unwrap();
        let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
        left.set_modified(long_ago).unwrap();
        let keep: HashSet<String> = ["abc".to_owned()].into();
        assert_eq!(cache.prune(&keep), 3);
        assert!(cache.get(&engine, "abc").is_some());
        assert!(dir.path().join("unrelated.txt").exists());
        assert!(dir.path().join(".tmpWriting").exists());
        assert!(!dir.path().join(".tmpLeft").exists());
    }

    /// `wait_written` returns once every write handed to the blocking pool
    /// is done, also when the pool was busy and the write had to queue.
    #[test]
    fn writes_behind_are_waited_for() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache = CompileCache::open(dir.path(), &engine, key()).unwrap();
        let component = Component::new(&engine, WAT).unwrap();
        // The one blocking thread busy: the write queues behind it.
        runtime.spawn_blocking(|| std::thread::sleep(std::time::Duration::from_millis(300)));
        cache.put_behind(runtime.handle(), "abc".into(), component);
        assert!(!cache.path("abc").exists(), "written at once");
        cache.wait_written();
        assert!(cache.path("abc").exists(), "not written when waited for");
        assert!(cache.get(&engine, "abc").is_some());
        cache.wait_written(); // nothing pending: returns at once
    }

    #[test]
    fn seeds_are_read_after_the_cache_and_never_changed() {
        let (dir, seed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let engine = engine();
        let component = Component::new(&engine, WAT).unwrap();
        CompileCache::open(seed.path(), &engine, key())
            .unwrap()
            .put("abc", &component);
        let cache = CompileCache::open(dir.path(), &engine, key()).unwrap();
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
        CompileCache::open(seed.path(), &other, key())
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
        let cache_a = CompileCache::open(dir.path(), &a, key()).unwrap();
        let cache_b = CompileCache::open(dir.path(), &b, key()).unwrap();
        assert_ne!(cache_a.fingerprint, cache_b.fingerprint);
        cache_a.put("abc", &Component::new(&a, WAT).unwrap());
        assert!(cache_b.get(&b, "abc").is_none());
        assert!(cache_a.get(&a, "abc").is_some());
    }
}
