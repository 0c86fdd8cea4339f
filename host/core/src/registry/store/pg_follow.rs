//! Replicas following each other through PostgreSQL: each change a
//! replica commits (a status, a task saved or forgotten, a billing entry)
//! is announced on [`CHANNEL`] and handed on to the others.

use super::postgres::{CHANNEL, connect, detail};
use crate::registry::ToolStatus;

/// A change one replica announces to the others: a tool's status, or a
/// task saved (read it from the table) or forgotten.
#[derive(serde::Serialize, serde::Deserialize, Default)]
#[serde(default)]
pub struct Notice {
    pub from: String,
    pub tool_id: String,
    pub status: String,
    pub task: Option<String>,
    pub forgotten: Option<String>,
    pub billing: Option<String>,
    pub fallback: Option<String>,
    /// A tool whose health the sender judged.
    pub health: Option<String>,
}

/// What the others changed, as [`follow`] hands it on.
pub enum Followed {
    Status(String, ToolStatus),
    /// A task, whole (JSON).
    Task(String),
    Forgotten(String),
    /// A billing log entry, whole (JSON).
    Billing(String),
    /// A tool's fallbacks set through the registry (JSON list, or null).
    Fallback(String, String),
    /// Another replica's verdict on a tool's health: tool id, replica, JSON.
    Health(String, String, String),
}

/// Follow the other replicas' status changes on `url` for as long as the
/// process lives, on a thread of its own: `on_status(tool id, status)` for
/// each, and for every saved status at each (re)connection (what changed
/// while the connection was down is not missed). Reconnects every second
/// while the database is away.
pub fn follow(
    url: String,
    password: Option<String>,
    replica: String,
    on: Box<dyn Fn(Followed) + Send>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("toolhost-registry-follow".into())
        .spawn(move || {
            let mut down = false;
            loop {
                let run = || -> Result<(), String> {
                    let e = |e: postgres::Error| detail(&e);
                    let mut client = connect(&url, password.as_deref())?;
                    client
                        .batch_execute(&format!("LISTEN {CHANNEL}"))
                        .map_err(e)?;
                    for row in client
                        .query("SELECT tool_id, status FROM statuses", &[])
                        .map_err(e)?
                    {
                        if let Some(status) = ToolStatus::parse(row.get(1)) {
                            on(Followed::Status(row.get(0), status));
                        }
                    }
                    for row in client
                        .query("SELECT body FROM tasks ORDER BY seq", &[])
                        .map_err(e)?
                    {
                        on(Followed::Task(row.get(0)));
                    }
                    for row in client
                        .query("SELECT tool_id, body FROM fallbacks", &[])
                        .map_err(e)?
                    {
                        on(Followed::Fallback(row.get(0), row.get(1)));
                    }
                    for row in client
                        .query("SELECT body FROM billing ORDER BY seq", &[])
                        .map_err(e)?
                    {
                        on(Followed::Billing(row.get(0)));
                    }
                    let mut reader = connect(&url, password.as_deref())?;
                    let mut notices = client.notifications();
                    let mut each = notices.blocking_iter();
                    while let Some(n) =
                        postgres::fallible_iterator::FallibleIterator::next(&mut each).map_err(e)?
                    {
                        let Ok(notice) = serde_json::from_str::<Notice>(n.payload()) else {
                            continue;
                        };
                        if notice.from == replica {
                            continue;
                        }
                        if let Some(id) = notice.task {
                            let row = reader
                                .query_opt("SELECT body FROM tasks WHERE task_id = $1", &[&id])
                                .map_err(e)?;
                            if let Some(row) = row {
                                on(Followed::Task(row.get(0)));
                            }
                        } else if let Some(id) = notice.health {
                            let row = reader
                                .query_opt(
                                    "SELECT body FROM health WHERE tool_id = $1 AND replica = $2",
                                    &[&id, &notice.from],
                                )
                                .map_err(e)?;
                            if let Some(row) = row {
                                on(Followed::Health(id, notice.from.clone(), row.get(0)));
                            }
                        } else if let Some(id) = notice.fallback {
                            let row = reader
                                .query_opt("SELECT body FROM fallbacks WHERE tool_id = $1", &[&id])
                                .map_err(e)?;
                            if let Some(row) = row {
                                on(Followed::Fallback(id, row.get(0)));
                            }
                        } else if let Some(id) = notice.billing {
                            let row = reader
                                .query_opt("SELECT body FROM billing WHERE id = $1", &[&id])
                                .map_err(e)?;
                            if let Some(row) = row {
                                on(Followed::Billing(row.get(0)));
                            }
                        } else if let Some(id) = notice.forgotten {
                            on(Followed::Forgotten(id));
                        } else if let Some(status) = ToolStatus::parse(&notice.status) {
                            on(Followed::Status(notice.tool_id, status));
                        }
                    }
                    Ok(())
                };
                if let Err(e) = run() {
                    if !down {
                        tracing::warn!(
                            "following the registry database: {e}; retrying every second"
                        );
                    }
                    down = true;
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        })
        .map(|_| ())
}
