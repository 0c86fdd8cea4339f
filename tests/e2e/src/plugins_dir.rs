//! Plugins directories made for a test, and components under new versions.

use std::path::{Path, PathBuf};

use crate::repo_root;

/// A built example plugin (`target/plugins/<name>.wasm`) or fixture
/// (`target/fixtures/<name>.wasm`), with its manifest if it has one.
pub fn component(name: &str) -> (PathBuf, Option<PathBuf>) {
    for dir in ["target/plugins", "target/fixtures"] {
        let wasm = repo_root().join(dir).join(format!("{name}.wasm"));
        if wasm.is_file() {
            let toml = wasm.with_extension("toml");
            return (wasm, toml.is_file().then_some(toml));
        }
    }
    panic!("component `{name}` is not built: run `make plugins fixtures`");
}

/// A plugins directory for one test.
///
/// Its built components come with their precompiled entries (what `make
/// plugins fixtures` put in `target/{plugins,fixtures}/.compile-cache`),
/// linked into its own `.compile-cache/`, and its server reads them with
/// the key they were made with ([`seed_key`]): a test's server starts as a
/// user's `make run` does, warm, instead of compiling every component again
/// (what most of the suite's time went to). A new version, a component
/// written by the test, or a stale entry is compiled. The tests of compiling
/// and of the cache itself take a [`PluginsDir::cold`] one.
pub struct PluginsDir {
    pub dir: tempfile::TempDir,
    seeded: bool,
}

/// The folder of a plugins directory with compiled components in it.
const SEED: &str = ".compile-cache";

impl PluginsDir {
    pub fn new() -> Self {
        PluginsDir {
            dir: tempfile::tempdir().expect("tempdir"),
            seeded: true,
        }
    }

    /// A directory whose components are all compiled by its server (none of
    /// the build's precompiled entries linked in).
    pub fn cold() -> Self {
        PluginsDir {
            seeded: false,
            ..Self::new()
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Copy built component `name` (and its manifest) in, as `as_name`.
    pub fn add(self, name: &str, as_name: &str) -> Self {
        let (wasm, toml) = component(name);
        std::fs::copy(&wasm, self.path().join(format!("{as_name}.wasm"))).expect("copy wasm");
        if self.seeded {
            self.link_precompiled(&wasm);
        }
        if let Some(toml) = toml {
            std::fs::copy(&toml, self.path().join(format!("{as_name}.toml"))).expect("copy toml");
        }
        self
    }

    /// Copy the Docker toolkit `plugins/<name>/` (manifest + driver) in as a
    /// folder, its manifest passed through `edit` (e.g. to set `network`).
    pub fn add_toolkit_with(self, name: &str, edit: impl Fn(String) -> String) -> Self {
        let src = repo_root().join("plugins").join(name);
        let dst = self.path().join(name);
        std::fs::create_dir_all(&dst).expect("toolkit dir");
        for entry in std::fs::read_dir(&src).expect("toolkit source") {
            let path = entry.expect("entry").path();
            let file = path.file_name().unwrap().to_owned();
            if path.extension().is_some_and(|e| e == "py" || e == "toml") {
                let text = std::fs::read_to_string(&path).expect("read");
                let text = if path.extension().is_some_and(|e| e == "toml") {
                    edit(text)
                } else {
                    text
                };
                std::fs::write(dst.join(file), text).expect("write");
            }
        }
        self
    }

    /// Copy the Docker toolkit `plugins/<name>/` in unchanged.
    pub fn add_toolkit(self, name: &str) -> Self {
        self.add_toolkit_with(name, |t| t)
    }

    /// Write folder entry `name` (e.g. an API toolkit): each `(file, text)`
    /// as `<name>/<file>`.
    pub fn folder(self, name: &str, files: &[(&str, &str)]) -> Self {
        let dir = self.path().join(name);
        std::fs::create_dir_all(&dir).expect("folder");
        for (file, text) in files {
            std::fs::write(dir.join(file), text).expect("write");
        }
        self
    }

    /// Link the build's precompiled entries of component `wasm` (named by
    /// its content hash, one per engine fingerprint) into `.compile-cache/`.
    /// A symlink: the server reads it and never writes it (its own entries
    /// go to its data directory; one that refuses an entry deletes the link).
    fn link_precompiled(&self, wasm: &Path) {
        let Ok(entries) = std::fs::read_dir(wasm.with_file_name(SEED)) else {
            return;
        };
        let prefix = format!("{}-", sha256_hex(&std::fs::read(wasm).expect("read wasm")));
        let dir = self.path().join(SEED);
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with(&prefix) {
                std::fs::create_dir_all(&dir).expect("seed folder");
                let link = dir.join(&name);
                if !link.exists() {
                    std::os::unix::fs::symlink(entry.path(), link).expect("link entry");
                }
            }
        }
    }

    /// Write a file into the directory.
    pub fn write(self, file: &str, bytes: impl AsRef<[u8]>) -> Self {
        std::fs::write(self.path().join(file), bytes).expect("write");
        self
    }
}

impl Default for PluginsDir {
    fn default() -> Self {
        Self::new()
    }
}

/// `component` with a custom section `toolhost-test` holding `tag` appended:
/// the same code under a different content hash (a new plugin version).
pub fn tagged(component: &[u8], tag: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"toolhost-test";
    let mut payload = Vec::new();
    leb(name.len(), &mut payload);
    payload.extend_from_slice(name);
    payload.extend_from_slice(tag.as_bytes());
    let mut out = component.to_vec();
    out.push(0); // custom section id
    leb(payload.len(), &mut out);
    out.extend_from_slice(&payload);
    out
}

/// The key the build's precompiled entries were made with
/// (`target/data/compile-cache.key`, `make plugins`' `--data target/data`),
/// when `plugins` has entries of them linked in: the server is given it
/// (`TOOLHOST_CACHE_KEY`) unless the test gives one.
pub(crate) fn seed_key(plugins: &Path) -> Option<PathBuf> {
    let linked = std::fs::read_dir(plugins.join(SEED))
        .ok()?
        .flatten()
        .any(|e| e.file_type().is_ok_and(|t| t.is_symlink()));
    let key = repo_root().join("target/data/compile-cache.key");
    (linked && key.is_file()).then_some(key)
}

/// Hex SHA-256, as the server names plugin versions.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Write `bytes` to `path` the recommended way: a temporary file, then a rename.
pub fn write_then_rename(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("part");
    std::fs::write(&tmp, bytes).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}
