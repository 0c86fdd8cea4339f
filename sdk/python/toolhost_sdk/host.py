"""What the host offers a plugin: logging, progress reports, configuration.

    from toolhost_sdk import host

    host.log("info", "parsed 120 rows")      # or host.info("parsed 120 rows")
    host.progress("chunk 2 of 5", done=2, total=5)
    limit = host.config("max_rows")          # a string from the manifest's [config], or None

Outside a component (plain CPython) log records and progress go to stderr and
`config` reads `LOCAL_CONFIG`, so tools can be tried locally.
"""

import sys
from typing import Dict, Optional, Union

from ._wit import IN_COMPONENT, wit_host, wit_types

__all__ = [
    "log",
    "trace",
    "debug",
    "info",
    "warn",
    "error",
    "progress",
    "config",
    "LOCAL_CONFIG",
]

#: `[config]` values seen by `config()` outside a component.
LOCAL_CONFIG: Dict[str, str] = {}

_LEVELS = {
    "trace": wit_types.LogLevel.TRACE,
    "debug": wit_types.LogLevel.DEBUG,
    "info": wit_types.LogLevel.INFO,
    "warn": wit_types.LogLevel.WARN,
    "warning": wit_types.LogLevel.WARN,
    "error": wit_types.LogLevel.ERROR,
}


def _level(level: Union[str, object]):
    if isinstance(level, wit_types.LogLevel):
        return level
    try:
        return _LEVELS[str(level).lower()]
    except KeyError:
        raise ValueError(
            f"unknown log level {level!r} (one of: trace, debug, info, warn, error)"
        ) from None


def log(level: Union[str, object], message: str) -> None:
    """Write a record into the host's log, tagged with plugin, tool and session.

    `level` is "trace", "debug", "info", "warn" (or "warning") or "error". The
    host drops records beyond a per-call budget.
    """
    lvl = _level(level)
    message = str(message)
    if IN_COMPONENT:
        try:
            wit_host.log(lvl, message)
            return
        except NotImplementedError:  # generated bindings imported outside a component
            pass
    print(f"[{lvl.name.lower()}] {message}", file=sys.stderr)


def trace(message: str) -> None:
    """Log at trace level."""
    log("trace", message)


def debug(message: str) -> None:
    """Log at debug level."""
    log("debug", message)


def info(message: str) -> None:
    """Log at info level."""
    log("info", message)


def warn(message: str) -> None:
    """Log at warn level."""
    log("warn", message)


def error(message: str) -> None:
    """Log at error level."""
    log("error", message)


def progress(
    message: str, done: Optional[float] = None, total: Optional[float] = None
) -> None:
    """Report progress of the current call; streaming clients see it as it happens.

    `done` and `total` are amounts of work in any one unit, when known.
    """
    update = wit_types.Progress(
        str(message),
        None if done is None else float(done),
        None if total is None else float(total),
    )
    if IN_COMPONENT:
        try:
            wit_host.report_progress(update)
            return
        except NotImplementedError:
            pass
    of = "" if done is None else f" ({done:g}{'' if total is None else f'/{total:g}'})"
    print(f"[progress] {update.message}{of}", file=sys.stderr)


def config(key: str, default: Optional[str] = None) -> Optional[str]:
    """A value of this plugin's manifest `[config]` table, or `default` when unset.

    The manifest's `[config]` holds strings only; convert as needed.
    """
    value = None
    if IN_COMPONENT:
        try:
            value = wit_host.config(str(key))
        except NotImplementedError:
            value = LOCAL_CONFIG.get(key)
    else:
        value = LOCAL_CONFIG.get(key)
    return default if value is None else value
