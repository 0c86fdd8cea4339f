//! The host's imports: logging, progress reports, configuration values.

use crate::bindings::toolhost::plugin::host as imports;
use crate::{LogLevel, Progress};

/// Write a log record into the host's log (tagged with plugin, tool and session).
pub fn log(level: LogLevel, message: &str) {
    imports::log(level, message);
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
    imports::report_progress(&Progress {
        message: message.to_owned(),
        done,
        total,
    });
}

/// A value from the `[config]` table of this plugin's manifest.
pub fn config(key: &str) -> Option<String> {
    imports::config(key)
}
