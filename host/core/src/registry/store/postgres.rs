//! The registry on PostgreSQL (`[registry] url = "postgres://…"`): the
//! store replicas share. Its schema is the SQLite one with PostgreSQL's
//! types, versioned in `toolhost_schema`; a database of a newer schema is
//! refused at start. A database that cannot be reached at start is an
//! error, never a fallback to a private SQLite file (that would split the
//! state between replicas without anyone noticing).

use super::pg_follow::Notice;
use super::{
    AuditRow, Failure, PinRow, SCHEMA_VERSION, Saved, StoreError, ToolMeta, Write, deltas,
    histogram, histogram_json, now_ms,
};
use crate::registry::ToolStatus;
use crate::registry::replicas::LEASE;
use crate::registry::stats::StatsRow;
use postgres::Client;

/// The schema's migrations, in order: version `i + 1` is `MIGRATIONS[i]`.
const MIGRATIONS: [&str; 4] = [
    "
CREATE TABLE tools (
    tool_id      TEXT PRIMARY KEY,
    toolkit      TEXT NOT NULL,
    name         TEXT NOT NULL,
    description  TEXT NOT NULL,
    category     TEXT NOT NULL,
    backend      TEXT NOT NULL,
    version      TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    created_ms   BIGINT NOT NULL,
    updated_ms   BIGINT NOT NULL
);
CREATE TABLE statuses (
    tool_id    TEXT PRIMARY KEY,
    status     TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE TABLE tasks (
    task_id    TEXT PRIMARY KEY,
    seq        BIGSERIAL,
    body       TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE TABLE pins (
    tool_id    TEXT PRIMARY KEY,
    toolkit    TEXT NOT NULL,
    digest     TEXT NOT NULL,
    definition TEXT NOT NULL,
    pinned_ms  BIGINT NOT NULL
);
CREATE TABLE stats (
    tool_id          TEXT PRIMARY KEY,
    calls            BIGINT NOT NULL,
    errors           BIGINT NOT NULL,
    total_latency_us BIGINT NOT NULL,
    last_used_ms     BIGINT NOT NULL,
    latency          TEXT NOT NULL
);
",
    "
CREATE TABLE replicas (
    replica      TEXT PRIMARY KEY,
    started_ms   BIGINT NOT NULL,
    heartbeat_ms BIGINT NOT NULL
);
ALTER TABLE tasks ADD COLUMN runner TEXT;
",
    "
CREATE TABLE audit (
    seq     BIGSERIAL PRIMARY KEY,
    at_ms   BIGINT NOT NULL,
    replica TEXT NOT NULL,
    actor   TEXT NOT NULL,
    action  TEXT NOT NULL,
    args    TEXT NOT NULL,
    outcome TEXT NOT NULL
);
",
    "
CREATE TABLE billing (
    id         TEXT PRIMARY KEY,
    seq        BIGSERIAL,
    body       TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE TABLE fallbacks (
    tool_id    TEXT PRIMARY KEY,
    body       TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE TABLE health (
    tool_id    TEXT NOT NULL,
    replica    TEXT NOT NULL,
    body       TEXT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (tool_id, replica)
);
",
];

/// The database's clock, ms: every replica's heartbeat is read against the
/// one clock.
const DB_NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

pub struct PostgresStore {
    client: Client,
    /// This process among the replicas: its own notices are not followed.
    replica: String,
    /// Where to connect again.
    url: String,
    password: Option<String>,
}

/// The channel status changes are announced on.
pub const CHANNEL: &str = "toolhost_registry";

/// `url` with its password hidden, for messages.
pub fn shown(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let user = &url[scheme + 3..at];
            let user = user.split_once(':').map_or(user, |(u, _)| u);
            format!("{}{user}@{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// A connection to `url`, with `password` if given apart, over TLS when
/// the URL's `sslmode` asks for it ([`super::pg_tls`]).
pub fn connect(url: &str, password: Option<&str>) -> Result<Client, String> {
    let target = super::pg_tls::target(url)?;
    let mut config: postgres::Config = target.url.parse().map_err(|e| detail(&e))?;
    if let Some(password) = password {
        config.password(password);
    }
    config.connect_timeout(std::time::Duration::from_secs(3));
    super::pg_tls::connect(&config, &target.tls)
}

impl PostgresStore {
    /// Connect to `url` (with `password`, if given apart) and bring its
    /// schema up to this build's.
    pub fn open(
        url: &str,
        password: Option<&str>,
        replica: &str,
    ) -> Result<PostgresStore, StoreError> {
        let at = shown(url);
        let open = |e: postgres::Error| StoreError::Open(at.clone(), detail(&e));
        let mut client = connect(url, password).map_err(|e| StoreError::Open(at.clone(), e))?;
        let mut tx = client.transaction().map_err(open)?;
        // One replica migrates at a time; the others wait, then see it done.
        tx.batch_execute(
            "SELECT pg_advisory_xact_lock(7263902);
             CREATE TABLE IF NOT EXISTS toolhost_schema (version BIGINT NOT NULL);",
        )
        .map_err(open)?;
        let version: i64 = tx
            .query_opt("SELECT version FROM toolhost_schema", &[])
            .map_err(open)?
            .map_or(0, |row| row.get(0));
        if version > SCHEMA_VERSION {
            return Err(StoreError::Newer(at, version));
        }
        for (i, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.batch_execute(migration).map_err(open)?;
            tracing::info!(schema = i + 1, "registry database migrated");
        }
        tx.execute("DELETE FROM toolhost_schema", &[])
            .map_err(open)?;
        tx.execute(
            "INSERT INTO toolhost_schema (version) VALUES ($1)",
            &[&SCHEMA_VERSION],
        )
        .map_err(open)?;
        tx.commit().map_err(open)?;
        let mut store = PostgresStore {
            client,
            replica: replica.to_owned(),
            url: url.to_owned(),
            password: password.map(str::to_owned),
        };
        // Alive before it makes anything the others could take for a
        // leftover.
        store
            .heartbeat()
            .map_err(|e| StoreError::Open(at.clone(), e.to_string()))?;
        Ok(store)
    }

    /// Say this replica is alive; the replicas alive (a heartbeat within
    /// [`LEASE`]), this one included. Replicas gone for a day are
    /// forgotten.
    pub fn heartbeat(&mut self) -> Result<Vec<(String, i64)>, postgres::Error> {
        let lease = LEASE.as_millis() as i64;
        let mut tx = self.client.transaction()?;
        tx.execute(
            &format!(
                "INSERT INTO replicas (replica, started_ms, heartbeat_ms) VALUES ($1, {DB_NOW_MS}, {DB_NOW_MS})
                 ON CONFLICT (replica) DO UPDATE SET heartbeat_ms = {DB_NOW_MS}"
            ),
            &[&self.replica],
        )?;
        tx.execute(
            &format!("DELETE FROM replicas WHERE heartbeat_ms < {DB_NOW_MS} - 86400000"),
            &[],
        )?;
        let live = tx
            .query(
                &format!(
                    "SELECT replica, started_ms FROM replicas WHERE heartbeat_ms > {DB_NOW_MS} - $1"
                ),
                &[&lease],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        tx.commit()?;
        Ok(live)
    }

    /// Announce `notice` to the other replicas when `tx` commits.
    fn notify(
        tx: &mut postgres::Transaction,
        from: &str,
        mut notice: Notice,
    ) -> Result<(), postgres::Error> {
        notice.from = from.to_owned();
        let notice = serde_json::to_string(&notice).unwrap_or_default();
        tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &notice])
            .map(|_| ())
    }

    /// Hold task `id` for this replica: whether no other live replica
    /// holds it (then this one does).
    pub fn hold_task(&mut self, id: &str) -> Result<bool, postgres::Error> {
        let lease = LEASE.as_millis() as i64;
        let held = self.client.execute(
            &format!(
                "UPDATE tasks SET runner = $2 WHERE task_id = $1 AND (runner IS NULL OR runner = $2
                   OR runner NOT IN (SELECT replica FROM replicas WHERE heartbeat_ms > {DB_NOW_MS} - $3))"
            ),
            &[&id, &self.replica, &lease],
        )?;
        Ok(held == 1)
    }

    /// Connect again if the connection was lost.
    pub fn reconnect(&mut self) {
        if !self.client.is_closed() {
            return;
        }
        match connect(&self.url, self.password.as_deref()) {
            Ok(client) => {
                tracing::info!("the registry database is back");
                self.client = client;
            }
            Err(e) => tracing::debug!("the registry database is still away: {e}"),
        }
    }

    /// Every tool's statistics.
    pub fn totals(&mut self) -> Result<Vec<(String, StatsRow)>, postgres::Error> {
        let rows = self.client.query(
            "SELECT calls, errors, total_latency_us, last_used_ms, latency, tool_id FROM stats",
            &[],
        )?;
        Ok(rows.iter().map(|r| (r.get(5), row(r))).collect())
    }

    /// The latest `limit` audit entries of every replica, newest first.
    pub fn audit_log(&mut self, limit: i64) -> Result<Vec<AuditRow>, postgres::Error> {
        let rows = self.client.query(
            "SELECT at_ms, replica, actor, action, args, outcome FROM audit ORDER BY seq DESC LIMIT $1",
            &[&limit],
        )?;
        Ok(rows
            .iter()
            .map(|r| AuditRow {
                at: r.get(0),
                replica: r.get(1),
                actor: r.get(2),
                action: r.get(3),
                args: serde_json::from_str(r.get(4)).unwrap_or_default(),
                outcome: r.get(5),
            })
            .collect())
    }

    pub fn load(&mut self) -> Result<Saved, String> {
        let e = |e: postgres::Error| e.to_string();
        let mut saved = Saved::default();
        for row in self
            .client
            .query("SELECT tool_id, status FROM statuses", &[])
            .map_err(e)?
        {
            if let Some(status) = ToolStatus::parse(row.get(1)) {
                saved.statuses.push((row.get(0), status));
            }
        }
        saved.stats = self.totals().map_err(e)?;
        for row in self
            .client
            .query(
                "SELECT tool_id, toolkit, name, description, category, backend, version, input_schema
                 FROM tools ORDER BY tool_id",
                &[],
            )
            .map_err(e)?
        {
            saved.tools.push(ToolMeta {
                tool_id: row.get(0),
                toolkit: row.get(1),
                name: row.get(2),
                description: row.get(3),
                category: row.get(4),
                backend: row.get(5),
                version: row.get(6),
                input_schema: row.get(7),
            });
        }
        for row in self
            .client
            .query("SELECT tool_id, body FROM fallbacks ORDER BY tool_id", &[])
            .map_err(e)?
        {
            saved.fallbacks.push((row.get(0), row.get(1)));
        }
        for row in self
            .client
            .query("SELECT body FROM billing ORDER BY seq", &[])
            .map_err(e)?
        {
            saved.billing.push(row.get(0));
        }
        for row in self
            .client
            .query("SELECT body FROM tasks ORDER BY seq", &[])
            .map_err(e)?
        {
            saved.tasks.push(row.get(0));
        }
        for row in self
            .client
            .query(
                "SELECT tool_id, toolkit, digest, definition FROM pins ORDER BY tool_id",
                &[],
            )
            .map_err(e)?
        {
            saved.pins.push(PinRow {
                tool_id: row.get(0),
                toolkit: row.get(1),
                digest: row.get(2),
                definition: row.get(3),
            });
        }
        Ok(saved)
    }

    pub fn apply(&mut self, batch: &[Write]) -> Result<(), Failure> {
        let e = failure;
        let now = now_ms();
        let replica = self.replica.clone();
        let mut tx = self.client.transaction().map_err(e)?;
        for w in batch {
            match w {
                Write::Tool(m) => {
                    tx.execute(
                        "INSERT INTO tools (tool_id, toolkit, name, description, category, backend, version, input_schema, created_ms, updated_ms)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
                         ON CONFLICT (tool_id) DO UPDATE SET toolkit = $2, name = $3, description = $4,
                           category = $5, backend = $6, version = $7, input_schema = $8, updated_ms = $9",
                        &[&m.tool_id, &m.toolkit, &m.name, &m.description, &m.category, &m.backend, &m.version, &m.input_schema, &now],
                    )
                    .map_err(e)?;
                }
                Write::Status(id, status) => {
                    tx.execute(
                        "INSERT INTO statuses (tool_id, status, updated_ms) VALUES ($1, $2, $3)
                         ON CONFLICT (tool_id) DO UPDATE SET status = $2, updated_ms = $3",
                        &[id, &status.as_str(), &now],
                    )
                    .map_err(e)?;
                    // Delivered to the other replicas when this commits.
                    let notice = Notice {
                        tool_id: id.clone(),
                        status: status.as_str().to_owned(),
                        ..Default::default()
                    };
                    Self::notify(&mut tx, &replica, notice).map_err(e)?;
                }
                Write::Task(id, body) => {
                    tx.execute(
                        "INSERT INTO tasks (task_id, body, updated_ms) VALUES ($1, $2, $3)
                         ON CONFLICT (task_id) DO UPDATE SET body = $2, updated_ms = $3",
                        &[id, body, &now],
                    )
                    .map_err(e)?;
                    let notice = Notice {
                        task: Some(id.clone()),
                        ..Default::default()
                    };
                    Self::notify(&mut tx, &replica, notice).map_err(e)?;
                }
                Write::Health(id, of, body) => {
                    tx.execute(
                        "INSERT INTO health (tool_id, replica, body, updated_ms) VALUES ($1, $2, $3, $4)
                         ON CONFLICT (tool_id, replica) DO UPDATE SET body = $3, updated_ms = $4",
                        &[id, of, body, &now],
                    )
                    .map_err(e)?;
                    let notice = Notice {
                        health: Some(id.clone()),
                        ..Default::default()
                    };
                    Self::notify(&mut tx, &replica, notice).map_err(e)?;
                }
                Write::Fallback(id, body) => {
                    tx.execute(
                        "INSERT INTO fallbacks (tool_id, body, updated_ms) VALUES ($1, $2, $3)
                         ON CONFLICT (tool_id) DO UPDATE SET body = $2, updated_ms = $3",
                        &[id, body, &now],
                    )
                    .map_err(e)?;
                    let notice = Notice {
                        fallback: Some(id.clone()),
                        ..Default::default()
                    };
                    Self::notify(&mut tx, &replica, notice).map_err(e)?;
                }
                Write::Billing(id, body) => {
                    tx.execute(
                        "INSERT INTO billing (id, body, updated_ms) VALUES ($1, $2, $3)
                         ON CONFLICT (id) DO UPDATE SET body = $2, updated_ms = $3",
                        &[id, body, &now],
                    )
                    .map_err(e)?;
                    let notice = Notice {
                        billing: Some(id.clone()),
                        ..Default::default()
                    };
                    Self::notify(&mut tx, &replica, notice).map_err(e)?;
                }
                Write::ForgetTask(id) => {
                    tx.execute("DELETE FROM tasks WHERE task_id = $1", &[id])
                        .map_err(e)?;
                    let notice = Notice {
                        forgotten: Some(id.clone()),
                        ..Default::default()
                    };
                    Self::notify(&mut tx, &replica, notice).map_err(e)?;
                }
                Write::Pin(p) => {
                    tx.execute(
                        "INSERT INTO pins (tool_id, toolkit, digest, definition, pinned_ms) VALUES ($1, $2, $3, $4, $5)
                         ON CONFLICT (tool_id) DO UPDATE SET toolkit = $2, digest = $3, definition = $4, pinned_ms = $5",
                        &[&p.tool_id, &p.toolkit, &p.digest, &p.definition, &now],
                    )
                    .map_err(e)?;
                }
                Write::Audit(a) => {
                    tx.execute(
                        "INSERT INTO audit (at_ms, replica, actor, action, args, outcome) VALUES ($1, $2, $3, $4, $5, $6)",
                        &[&a.at, &a.replica, &a.actor, &a.action, &a.args.to_string(), &a.outcome],
                    )
                    .map_err(e)?;
                }
                Write::Stats { .. } => {}
            }
        }
        // Added under the row's lock, rows locked in tool-id order: replicas
        // adding to the same tools at once wait for each other, never lose
        // a count, and never deadlock.
        for (id, delta) in deltas(batch) {
            tx.execute(
                "INSERT INTO stats (tool_id, calls, errors, total_latency_us, last_used_ms, latency)
                 VALUES ($1, 0, 0, 0, 0, '[]') ON CONFLICT (tool_id) DO NOTHING",
                &[&id],
            )
            .map_err(e)?;
            let old = tx
                .query_one(
                    "SELECT calls, errors, total_latency_us, last_used_ms, latency FROM stats
                     WHERE tool_id = $1 FOR UPDATE",
                    &[&id],
                )
                .map_err(e)?;
            let s = row(&old).plus(&delta);
            tx.execute(
                "UPDATE stats SET calls = $2, errors = $3, total_latency_us = $4, last_used_ms = $5, latency = $6
                 WHERE tool_id = $1",
                &[&id, &(s.calls as i64), &(s.errors as i64), &(s.total_latency_us as i64), &(s.last_used_ms as i64), &histogram_json(&s.latency)],
            )
            .map_err(e)?;
        }
        tx.commit().map_err(e)
    }
}

/// A stats row from its first five columns.
fn row(r: &postgres::Row) -> StatsRow {
    StatsRow {
        calls: r.get::<_, i64>(0) as u64,
        errors: r.get::<_, i64>(1) as u64,
        total_latency_us: r.get::<_, i64>(2) as u64,
        last_used_ms: r.get::<_, i64>(3) as u64,
        latency: histogram(r.get(4)),
    }
}

/// What went wrong, with the server's own message when it gave one
/// (`postgres::Error` alone says "db error").
pub fn detail(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {} ({})", db.severity(), db.message(), db.code().code()),
        None => match std::error::Error::source(e) {
            // The cause (a refused certificate, a closed port), not only
            // "error performing TLS handshake".
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

/// A failed write: worth trying again when the connection is lost, the
/// server shutting down or short of resources, or the transaction lost a
/// race (a deadlock, a serialization failure).
fn failure(e: postgres::Error) -> Failure {
    let class = e.code().map(|c| c.code()[..2].to_owned());
    Failure {
        transient: e.is_closed()
            || e.as_db_error().is_none()
            || matches!(class.as_deref(), Some("08" | "40" | "53" | "57")),
        message: detail(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(
            shown("postgres://toolhost:s3cret@db.example.com:5432/toolhost"),
            "postgres://toolhost@db.example.com:5432/toolhost"
        );
        assert_eq!(shown("postgres://db/toolhost"), "postgres://db/toolhost");
    }
}
