//! `[plugins]`: the plugins directory's watcher, compile cache and uploads.

use serde::{Deserialize, Serialize};

/// The plugins directory: hot loading and the admin API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginsConfig {
    /// Watch the plugins directory and load, reload and unload plugins as
    /// their files change.
    pub watch: bool,
    /// Quiet time after a plugin's last file event before it is loaded, ms.
    pub debounce_ms: u64,
    /// ... after a file of it was closed from writing or renamed into place
    /// (whole: only a companion file, a manifest moved in beside it, is
    /// waited for), ms; at most `debounce_ms`. A writer that closes a file
    /// between pieces wants it equal to `debounce_ms`.
    pub settle_ms: u64,
    /// Full rescan of the directory every this many seconds (0: never); a
    /// safety net for file events the kernel dropped.
    pub rescan_interval_s: u64,
    /// Keep compiled components in `<data>/compile-cache`, so restarts and
    /// reloads of known components skip the compiler.
    pub compile_cache: bool,
    /// The key that authenticates compile-cache entries (theirs and the
    /// plugins directory's `.compile-cache/`), a file of 64 hex digits that
    /// plugin authors must not be able to read [default:
    /// `<data>/compile-cache.key`, made when missing]. `toolhost precompile`
    /// must use the same key for its entries to be read.
    pub cache_key: Option<std::path::PathBuf>,
    /// Largest component `PUT /plugins/{name}` accepts, MiB.
    pub max_upload_mb: u32,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        PluginsConfig {
            watch: true,
            debounce_ms: 25,
            settle_ms: 5,
            rescan_interval_s: 30,
            compile_cache: true,
            cache_key: None,
            max_upload_mb: 64,
        }
    }
}
