//! Where the registry keeps what it knows: an embedded SQLite file
//! (`<data>/registry.db`, [`sqlite`]) by default, or a PostgreSQL database
//! ([`postgres`], `[registry] url = "postgres://…"`) that replicas share.
//! One schema for both, versioned: a database written by a newer toolhost
//! is refused at start, named. One connection, on a writer thread of its
//! own that commits whatever has queued up in one transaction: nothing on
//! the call path waits for the database.

mod pg_follow;
mod pg_tls;
mod postgres;
mod sqlite;
#[cfg(test)]
pub(crate) mod testing;

use std::time::{SystemTime, UNIX_EPOCH};

pub use self::pg_follow::{Followed, follow};
pub use self::postgres::{PostgresStore, shown as postgres_shown};
pub use sqlite::SqliteStore;

use super::ToolStatus;
use super::stats::StatsRow;

/// The schema this build writes.
const SCHEMA_VERSION: i64 = 4;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64
}

/// Why the registry cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the tool registry {0} is locked by another process (is another toolhost using this data directory?)"
    )]
    Locked(String),
    #[error(
        "the tool registry {0} is not a sound SQLite database ({1}): move it away to start with an empty registry (tool statuses and statistics are then lost), or put back a copy"
    )]
    Corrupt(String, String),
    #[error(
        "the tool registry {0} was written by a newer toolhost (schema {1}, this one knows {SCHEMA_VERSION})"
    )]
    Newer(String, i64),
    #[error("cannot open the tool registry {0}: {1}")]
    Open(String, String),
}

/// A tool as the registry keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolMeta {
    pub tool_id: String,
    pub toolkit: String,
    pub name: String,
    pub description: String,
    pub category: String,
    pub backend: String,
    pub version: String,
    pub input_schema: String,
}

/// One change to write.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    Tool(ToolMeta),
    Status(String, ToolStatus),
    /// Calls to add to a tool's totals, and the counters of this process
    /// they bring the store up to ([`crate::registry::ToolStats::delta`]).
    Stats {
        tool_id: String,
        delta: StatsRow,
        counted: StatsRow,
    },
    /// A tool-request task, whole (JSON).
    Task(String, String),
    /// A task forgotten (the oldest ended ones beyond what is kept).
    ForgetTask(String),
    /// A tool's pinned definition ([`crate::pins`]).
    Pin(PinRow),
    /// An entry of the audit log.
    Audit(AuditRow),
    /// A billing log entry, whole (JSON; seed 004 §11's transaction).
    Billing(String, String),
    /// A tool's fallbacks set through the registry (JSON: a list, or null).
    Fallback(String, String),
    /// A replica's verdict on a tool's health: tool id, replica, JSON.
    Health(String, String, String),
}

/// An admin's or a builder's action, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AuditRow {
    /// When, ms since the epoch.
    pub at: i64,
    /// The replica that did it.
    pub replica: String,
    /// The caller who asked.
    pub actor: String,
    pub action: String,
    /// Its arguments (JSON; file contents replaced by their size).
    pub args: serde_json::Value,
    /// `ok`, or the refusal's status and reason.
    pub outcome: String,
}

/// Audit entries [`Store::audit_log`] gives at most.
pub const AUDIT_READ: usize = 1000;

/// A pinned definition as the registry keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct PinRow {
    pub tool_id: String,
    pub toolkit: String,
    pub digest: String,
    /// The definition, JSON.
    pub definition: String,
}

/// What the registry held at start: per tool id, its status and statistics.
#[derive(Debug, Default)]
pub struct Saved {
    pub statuses: Vec<(String, ToolStatus)>,
    pub stats: Vec<(String, StatsRow)>,
    pub tools: Vec<ToolMeta>,
    /// Tool-request tasks (JSON), oldest first.
    pub tasks: Vec<String>,
    pub pins: Vec<PinRow>,
    /// The billing log's entries (JSON), oldest first.
    pub billing: Vec<String>,
    /// Tools' fallbacks set through the registry: (tool id, JSON list).
    pub fallbacks: Vec<(String, String)>,
}

/// A write that failed, and whether trying again may succeed (the
/// database away, a deadlock, a full disk) or not (then it is dropped).
#[derive(Debug, Clone)]
pub struct Failure {
    pub message: String,
    pub transient: bool,
}

/// The batch's statistics, one delta per tool (summed), by tool id: the
/// order rows are locked in, so that replicas adding at once never
/// deadlock.
fn deltas(batch: &[Write]) -> std::collections::BTreeMap<&str, StatsRow> {
    let mut deltas = std::collections::BTreeMap::<&str, StatsRow>::new();
    for w in batch {
        if let Write::Stats { tool_id, delta, .. } = w {
            let sum = deltas.entry(tool_id).or_default();
            *sum = sum.plus(delta);
        }
    }
    deltas
}

/// A stored histogram (JSON) read back; an unreadable one counts as empty.
fn histogram(json: &str) -> Vec<(usize, u64)> {
    serde_json::from_str(json).unwrap_or_default()
}

/// A histogram as stored.
fn histogram_json(latency: &[(usize, u64)]) -> String {
    serde_json::to_string(latency).unwrap_or_else(|_| "[]".into())
}

/// A store, whichever kind.
pub enum Store {
    Sqlite(SqliteStore),
    Postgres(Box<PostgresStore>),
}

impl Store {
    /// Everything saved.
    pub fn load(&mut self) -> Result<Saved, String> {
        match self {
            Store::Sqlite(s) => s.load().map_err(|e| e.to_string()),
            Store::Postgres(s) => s.load(),
        }
    }

    /// Write `batch` in one transaction.
    pub fn apply(&mut self, batch: &[Write]) -> Result<(), Failure> {
        match self {
            Store::Sqlite(s) => s.apply(batch).map_err(sqlite::failure),
            Store::Postgres(s) => s.apply(batch),
        }
    }

    /// Every tool's statistics totals.
    pub fn totals(&mut self) -> Result<Vec<(String, StatsRow)>, String> {
        match self {
            Store::Sqlite(s) => s.totals().map_err(|e| e.to_string()),
            Store::Postgres(s) => s.totals().map_err(|e| postgres::detail(&e)),
        }
    }

    /// Whether other processes write to it too.
    pub fn shared(&self) -> bool {
        matches!(self, Store::Postgres(_))
    }

    /// On a shared database: say this replica is alive, and read which are.
    pub fn heartbeat(&mut self) -> Option<Result<Vec<(String, i64)>, String>> {
        match self {
            Store::Sqlite(_) => None,
            Store::Postgres(s) => Some(s.heartbeat().map_err(|e| postgres::detail(&e))),
        }
    }

    /// Hold task `id` for this process: whether no other live replica
    /// holds it (always, on a store of its own).
    pub fn hold_task(&mut self, id: &str) -> Result<bool, String> {
        match self {
            Store::Sqlite(_) => Ok(true),
            Store::Postgres(s) => s.hold_task(id).map_err(|e| postgres::detail(&e)),
        }
    }

    /// The latest `limit` audit entries (of every replica), newest first.
    pub fn audit_log(&mut self, limit: usize) -> Result<Vec<AuditRow>, String> {
        let limit = limit.min(AUDIT_READ) as i64;
        match self {
            Store::Sqlite(s) => s.audit_log(limit).map_err(|e| e.to_string()),
            Store::Postgres(s) => s.audit_log(limit).map_err(|e| postgres::detail(&e)),
        }
    }

    /// Connect again if the connection was lost (a database server that
    /// restarted).
    pub fn reconnect(&mut self) {
        if let Store::Postgres(s) = self {
            s.reconnect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(calls: u64) -> StatsRow {
        StatsRow {
            calls,
            errors: 1,
            total_latency_us: 2500,
            last_used_ms: 1_700_000_000_000,
            latency: vec![(40, calls)],
        }
    }

    fn audit(action: &str) -> AuditRow {
        AuditRow {
            at: 1_700_000_000_000,
            replica: "r1".into(),
            actor: "admin".into(),
            action: action.into(),
            args: serde_json::json!({"tool_id": "calc_evaluate", "n": 1}),
            outcome: "ok".into(),
        }
    }

    /// What one store wrote, another opening of it reads back: for both
    /// kinds.
    fn written_and_read_back(open: &dyn Fn() -> Store) {
        {
            let mut store = open();
            store
                .apply(&[
                    Write::Status("calc_evaluate".into(), ToolStatus::Inactive),
                    Write::Stats {
                        tool_id: "calc_evaluate".into(),
                        delta: row(3),
                        counted: row(3),
                    },
                    Write::Stats {
                        tool_id: "calc_evaluate".into(),
                        delta: row(4),
                        counted: row(7),
                    },
                    Write::Task("t1".into(), "{\"n\":1}".into()),
                    Write::Task("t2".into(), "{\"n\":2}".into()),
                    Write::Task("t1".into(), "{\"n\":3}".into()),
                    Write::Task("t3".into(), "{}".into()),
                    Write::ForgetTask("t3".into()),
                    Write::Tool(ToolMeta {
                        tool_id: "calc_evaluate".into(),
                        toolkit: "calc".into(),
                        name: "evaluate".into(),
                        description: "d".into(),
                        category: "calc".into(),
                        backend: "wasm".into(),
                        version: "v1".into(),
                        input_schema: "{}".into(),
                    }),
                    Write::Pin(PinRow {
                        tool_id: "fs_read".into(),
                        toolkit: "fs".into(),
                        digest: "ab".into(),
                        definition: "{}".into(),
                    }),
                    Write::Audit(audit("first")),
                    Write::Audit(audit("second")),
                    Write::Billing("b1".into(), "{\"a\":1}".into()),
                    Write::Billing("b2".into(), "{\"a\":2}".into()),
                    Write::Billing("b1".into(), "{\"a\":3}".into()),
                    Write::Fallback("calc_evaluate".into(), "[\"x_y\"]".into()),
                    Write::Fallback("calc_evaluate".into(), "[\"y_z\"]".into()),
                ])
                .unwrap();
        }
        // The audit log, newest first, as written.
        let log = open().audit_log(10).unwrap();
        assert_eq!(log, vec![audit("second"), audit("first")]);
        assert_eq!(open().audit_log(1).unwrap(), vec![audit("second")]);
        let saved = open().load().unwrap();
        // The billing log: oldest first, an update (an approval) in place.
        assert_eq!(saved.billing, ["{\"a\":3}", "{\"a\":2}"]);
        assert_eq!(
            saved.fallbacks,
            [("calc_evaluate".to_owned(), "[\"y_z\"]".to_owned())]
        );
        assert_eq!(
            saved.statuses,
            vec![("calc_evaluate".to_owned(), ToolStatus::Inactive)]
        );
        // Deltas add up.
        assert_eq!(
            saved.stats,
            vec![("calc_evaluate".to_owned(), row(3).plus(&row(4)))]
        );
        // Oldest first, an update keeping its place, a forgotten one gone.
        assert_eq!(
            saved.tasks,
            vec!["{\"n\":3}".to_owned(), "{\"n\":2}".to_owned()]
        );
        assert_eq!(saved.tools.len(), 1);
        assert_eq!(saved.tools[0].version, "v1");
        assert_eq!(saved.pins.len(), 1);
        assert_eq!(saved.pins[0].digest, "ab");
    }

    #[test]
    fn sqlite_keeps_what_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.db");
        written_and_read_back(&|| Store::Sqlite(SqliteStore::open(&path).unwrap()));
    }

    #[test]
    fn postgres_keeps_what_is_written_and_refuses_a_newer_schema_or_no_server() {
        let Some(pg) = testing::Postgres::start() else {
            return;
        };
        written_and_read_back(&|| {
            Store::Postgres(Box::new(PostgresStore::open(&pg.url, None, "r1").unwrap()))
        });
        // A second opener (another replica) migrates nothing and reads the same.
        let mut other = PostgresStore::open(&pg.url, None, "r2").unwrap();
        assert_eq!(other.load().unwrap().statuses.len(), 1);
        // Written by a newer toolhost: refused, named.
        let mut admin = ::postgres::Client::connect(&pg.url, ::postgres::NoTls).unwrap();
        admin
            .execute("UPDATE toolhost_schema SET version = 99", &[])
            .unwrap();
        let newer = PostgresStore::open(&pg.url, None, "r3").err().unwrap();
        assert!(matches!(newer, StoreError::Newer(_, 99)), "{newer}");
        // No server there: an error naming it (password hidden), no fallback.
        let gone = "postgres://toolhost:pw@127.0.0.1:1/postgres";
        let err = PostgresStore::open(gone, None, "r4")
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("cannot open the tool registry postgres://toolhost@"),
            "{err}"
        );
        assert!(!err.contains("pw"), "{err}");
    }
}
