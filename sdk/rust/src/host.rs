//! The host's imports: logging, progress reports, configuration values,
//! the workspace's changes.
//!
//! Outside wasm (a plugin's native unit tests) there is no host: records and
//! progress go nowhere and no configuration value is set.

use crate::LogLevel;
#[cfg(target_arch = "wasm32")]
use crate::bindings::toolhost::plugin::host as imports;

/// Write a log record into the host's log (tagged with plugin, tool and session).
pub fn log(level: LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    imports::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (level, message);
}

/// Log at info level.
pub fn info(message: &str) {
    log(LogLevel::Info, message);
}

/// Log at warn level.
pub fn warn(message: &str) {
    log(LogLevel::Warn, message);
}

/// Log at debug level.
pub fn debug(message: &str) {
    log(LogLevel::Debug, message);
}

/// Report progress of the current call; streaming clients receive it as it happens.
pub fn progress(message: &str, done: Option<f64>, total: Option<f64>) {
    #[cfg(target_arch = "wasm32")]
    imports::report_progress(&crate::Progress {
        message: message.to_owned(),
        done,
        total,
    });
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (message, done, total);
}

/// A value from the `[config]` table of this plugin's manifest.
pub fn config(key: &str) -> Option<String> {
    #[cfg(target_arch = "wasm32")]
    return imports::config(key);
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = key;
        None
    }
}

/// A token naming the state of the session workspace's files
/// (`toolhost:workspace/changes`), or none when the host cannot tell (no
/// workspace, no file watching there; outside wasm, always none).
///
/// The same token on two calls means no visible file or folder of the
/// workspace (hidden ones, under a dot name, left out) was made, written,
/// removed, renamed or touched in between, by anyone on the host's machine.
/// A plugin that keeps what it learned of the files under a hidden folder
/// (`.index/<plugin>/`), with the token it asked for *before* looking, may
/// skip looking again while the token is the same. A plugin that calls this
/// imports `toolhost:workspace/changes@0.1.0`: a host older than it refuses
/// the component at load, naming the missing import.
pub fn workspace_token() -> Option<String> {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::toolhost::workspace::changes::token();
    #[cfg(not(target_arch = "wasm32"))]
    None
}
