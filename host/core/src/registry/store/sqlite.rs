//! The registry's SQLite file (`<data>/registry.db`, WAL), the embedded
//! default. The file is held with an exclusive lock while the server runs,
//! so a second server on the same data directory is refused at start, as is
//! a file that is not a sound SQLite database: it is never reset silently.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, params};

use super::{
    AuditRow, Failure, PinRow, Saved, StoreError, ToolMeta, Write, deltas, histogram,
    histogram_json, now_ms,
};
use crate::registry::ToolStatus;
use crate::registry::stats::StatsRow;

use super::SCHEMA_VERSION;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tools (
    tool_id      TEXT PRIMARY KEY,
    toolkit      TEXT NOT NULL,
    name         TEXT NOT NULL,
    description  TEXT NOT NULL,
    category     TEXT NOT NULL,
    backend      TEXT NOT NULL,
    version      TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    created_ms   INTEGER NOT NULL,
    updated_ms   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS statuses (
    tool_id    TEXT PRIMARY KEY,
    status     TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tasks (
    task_id    TEXT PRIMARY KEY,
    body       TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS pins (
    tool_id    TEXT PRIMARY KEY,
    toolkit    TEXT NOT NULL,
    digest     TEXT NOT NULL,
    definition TEXT NOT NULL,
    pinned_ms  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS stats (
    tool_id          TEXT PRIMARY KEY,
    calls            INTEGER NOT NULL,
    errors           INTEGER NOT NULL,
    total_latency_us INTEGER NOT NULL,
    last_used_ms     INTEGER NOT NULL,
    latency          TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS fallbacks (
    tool_id    TEXT PRIMARY KEY,
    body       TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS billing (
    id         TEXT PRIMARY KEY,
    body       TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms   INTEGER NOT NULL,
    replica TEXT NOT NULL,
    actor   TEXT NOT NULL,
    action  TEXT NOT NULL,
    args    TEXT NOT NULL,
    outcome TEXT NOT NULL
);
";

pub struct SqliteStore {
    conn: Connection,
}

impl SqliteStore {
    /// Open (or create) the registry at `path`, locked for this process.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let classify = |e: rusqlite::Error| -> StoreError {
            use rusqlite::ErrorCode::*;
            match e.sqlite_error_code() {
                Some(DatabaseBusy | DatabaseLocked) => {
                    StoreError::Locked(path.display().to_string())
                }
                Some(NotADatabase | DatabaseCorrupt) => {
                    StoreError::Corrupt(path.display().to_string(), e.to_string())
                }
                _ => StoreError::Open(path.display().to_string(), e.to_string()),
            }
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(classify)?;
        conn.busy_timeout(Duration::from_millis(250))
            .map_err(classify)?;
        // Exclusive before WAL: the lock is held from the first write to the
        // end, and WAL then needs no shared-memory file.
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(classify)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(classify)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Open(
                path.display().to_string(),
                format!("WAL journal refused (journal_mode = {mode})"),
            ));
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(classify)?;
        let check: String = conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(classify)?;
        if check != "ok" {
            return Err(StoreError::Corrupt(path.display().to_string(), check));
        }
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(classify)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::Newer(path.display().to_string(), version));
        }
        // A write takes the exclusive lock now, not at the first flush.
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
        ))
        .map_err(classify)?;
        Ok(SqliteStore { conn })
    }

    /// Everything saved.
    pub fn load(&self) -> rusqlite::Result<Saved> {
        let mut saved = Saved::default();
        let mut q = self.conn.prepare("SELECT tool_id, status FROM statuses")?;
        for row in q.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
            let (id, status) = row?;
            if let Some(status) = ToolStatus::parse(&status) {
                saved.statuses.push((id, status));
            }
        }
        saved.stats = self.totals()?;
        let mut q = self.conn.prepare(
            "SELECT tool_id, toolkit, name, description, category, backend, version, input_schema FROM tools ORDER BY tool_id",
        )?;
        for row in q.query_map([], |r| {
            Ok(ToolMeta {
                tool_id: r.get(0)?,
                toolkit: r.get(1)?,
                name: r.get(2)?,
                description: r.get(3)?,
                category: r.get(4)?,
                backend: r.get(5)?,
                version: r.get(6)?,
                input_schema: r.get(7)?,
            })
        })? {
            saved.tools.push(row?);
        }
        let mut q = self
            .conn
            .prepare("SELECT tool_id, body FROM fallbacks ORDER BY tool_id")?;
        for row in q.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
            saved.fallbacks.push(row?);
        }
        let mut q = self
            .conn
            .prepare("SELECT body FROM billing ORDER BY rowid")?;
        for row in q.query_map([], |r| r.get::<_, String>(0))? {
            saved.billing.push(row?);
        }
        let mut q = self.conn.prepare("SELECT body FROM tasks ORDER BY rowid")?;
        for row in q.query_map([], |r| r.get::<_, String>(0))? {
            saved.tasks.push(row?);
        }
        let mut q = self
            .conn
            .prepare("SELECT tool_id, toolkit, digest, definition FROM pins ORDER BY tool_id")?;
        for row in q.query_map([], |r| {
            Ok(PinRow {
                tool_id: r.get(0)?,
                toolkit: r.get(1)?,
                digest: r.get(2)?,
                definition: r.get(3)?,
            })
        })? {
            saved.pins.push(row?);
        }
        Ok(saved)
    }

    /// Write `batch` in one transaction.
    pub fn apply(&mut self, batch: &[Write]) -> rusqlite::Result<()> {
        let now = now_ms();
        let tx = self.conn.transaction()?;
        for w in batch {
            match w {
                Write::Tool(m) => {
                    tx.execute(
                        "INSERT INTO tools (tool_id, toolkit, name, description, category, backend, version, input_schema, created_ms, updated_ms)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)
                         ON CONFLICT(tool_id) DO UPDATE SET toolkit = ?2, name = ?3, description = ?4,
                           category = ?5, backend = ?6, version = ?7, input_schema = ?8, updated_ms = ?9",
                        params![m.tool_id, m.toolkit, m.name, m.description, m.category, m.backend, m.version, m.input_schema, now],
                    )?;
                }
                Write::Status(id, status) => {
                    tx.execute(
                        "INSERT INTO statuses (tool_id, status, updated_ms) VALUES (?1, ?2, ?3)
                         ON CONFLICT(tool_id) DO UPDATE SET status = ?2, updated_ms = ?3",
                        params![id, status.as_str(), now],
                    )?;
                }
                Write::Task(id, body) => {
                    tx.execute(
                        "INSERT INTO tasks (task_id, body, updated_ms) VALUES (?1, ?2, ?3)
                         ON CONFLICT(task_id) DO UPDATE SET body = ?2, updated_ms = ?3",
                        params![id, body, now],
                    )?;
                }
                // A process on its own has no one to tell.
                Write::Health(..) => {}
                Write::Fallback(id, body) => {
                    tx.execute(
                        "INSERT INTO fallbacks (tool_id, body, updated_ms) VALUES (?1, ?2, ?3)
                         ON CONFLICT (tool_id) DO UPDATE SET body = ?2, updated_ms = ?3",
                        params![id, body, now],
                    )?;
                }
                Write::Billing(id, body) => {
                    tx.execute(
                        "INSERT INTO billing (id, body, updated_ms) VALUES (?1, ?2, ?3)
                         ON CONFLICT (id) DO UPDATE SET body = ?2, updated_ms = ?3",
                        params![id, body, now],
                    )?;
                }
                Write::ForgetTask(id) => {
                    tx.execute("DELETE FROM tasks WHERE task_id = ?1", [id])?;
                }
                Write::Pin(p) => {
                    tx.execute(
                        "INSERT INTO pins (tool_id, toolkit, digest, definition, pinned_ms) VALUES (?1, ?2, ?3, ?4, ?5)
                         ON CONFLICT(tool_id) DO UPDATE SET toolkit = ?2, digest = ?3, definition = ?4, pinned_ms = ?5",
                        params![p.tool_id, p.toolkit, p.digest, p.definition, now],
                    )?;
                }
                Write::Audit(a) => {
                    tx.execute(
                        "INSERT INTO audit (at_ms, replica, actor, action, args, outcome) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                        params![a.at, a.replica, a.actor, a.action, a.args.to_string(), a.outcome],
                    )?;
                }
                Write::Stats { .. } => {}
            }
        }
        for (id, delta) in deltas(batch) {
            let old = tx
                .query_row(
                    "SELECT calls, errors, total_latency_us, last_used_ms, latency FROM stats WHERE tool_id = ?1",
                    [id],
                    row,
                )
                .ok()
                .unwrap_or_default();
            let s = old.plus(&delta);
            tx.execute(
                "INSERT INTO stats (tool_id, calls, errors, total_latency_us, last_used_ms, latency)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(tool_id) DO UPDATE SET calls = ?2, errors = ?3,
                   total_latency_us = ?4, last_used_ms = ?5, latency = ?6",
                params![id, s.calls as i64, s.errors as i64, s.total_latency_us as i64, s.last_used_ms as i64, histogram_json(&s.latency)],
            )?;
        }
        tx.commit()
    }

    /// The latest `limit` audit entries, newest first.
    pub fn audit_log(&self, limit: i64) -> rusqlite::Result<Vec<AuditRow>> {
        let mut q = self.conn.prepare(
            "SELECT at_ms, replica, actor, action, args, outcome FROM audit ORDER BY seq DESC LIMIT ?1",
        )?;
        let rows = q.query_map([limit], |r| {
            Ok(AuditRow {
                at: r.get(0)?,
                replica: r.get(1)?,
                actor: r.get(2)?,
                action: r.get(3)?,
                args: serde_json::from_str(&r.get::<_, String>(4)?).unwrap_or_default(),
                outcome: r.get(5)?,
            })
        })?;
        rows.collect()
    }

    /// Every tool's statistics.
    pub fn totals(&self) -> rusqlite::Result<Vec<(String, StatsRow)>> {
        let mut q = self.conn.prepare(
            "SELECT calls, errors, total_latency_us, last_used_ms, latency, tool_id FROM stats",
        )?;
        let rows = q.query_map([], |r| Ok((r.get::<_, String>(5)?, row(r)?)))?;
        rows.collect()
    }
}

/// A stats row from its first five columns.
fn row(r: &rusqlite::Row) -> rusqlite::Result<StatsRow> {
    Ok(StatsRow {
        calls: r.get::<_, i64>(0)? as u64,
        errors: r.get::<_, i64>(1)? as u64,
        total_latency_us: r.get::<_, i64>(2)? as u64,
        last_used_ms: r.get::<_, i64>(3)? as u64,
        latency: histogram(&r.get::<_, String>(4)?),
    })
}

/// A failed write: worth trying again when the disk was full, the file
/// busy or an I/O failed.
pub fn failure(e: rusqlite::Error) -> Failure {
    use rusqlite::ErrorCode::*;
    Failure {
        transient: matches!(
            e.sqlite_error_code(),
            Some(DiskFull | DatabaseBusy | DatabaseLocked | SystemIoFailure)
        ),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_opener_and_a_damaged_file_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.db");
        let first = SqliteStore::open(&path).unwrap();
        let err = SqliteStore::open(&path).err().expect("locked");
        assert!(matches!(err, StoreError::Locked(_)), "{err}");
        drop(first);
        assert!(SqliteStore::open(&path).is_ok(), "free again");

        let garbage = dir.path().join("garbage.db");
        std::fs::write(&garbage, vec![0x5a; 8192]).unwrap();
        let err = SqliteStore::open(&garbage).err().expect("not a database");
        assert!(matches!(err, StoreError::Corrupt(..)), "{err}");
        assert!(err.to_string().contains("move it away"), "{err}");
        // Nothing was reset.
        assert_eq!(std::fs::read(&garbage).unwrap(), vec![0x5a; 8192]);
    }
}
