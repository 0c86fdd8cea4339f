//! The registry's writer thread: commits what has queued up in one
//! transaction. A write the database could not take for a while (a
//! PostgreSQL server restarting, a full disk) is kept and tried again every
//! second, with the statistics of one tool summed into one delta so the
//! queue stays as small as the tool set; meanwhile every wait for the
//! writes ([`super::Registry::sync`]) is answered with the reason at once.
//! After a commit with statistics (and at each refresh, on a database that
//! replicas share) the store's totals go to the statistics hook.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use super::replicas::{HEARTBEAT, Replicas};
use super::stats::StatsRow;
use super::store::{Store, Write};

/// How long the writer waits before trying a failed write again.
const RETRY: Duration = Duration::from_secs(1);

/// Most writes committed in one transaction.
const BATCH: usize = 4096;

pub(super) enum Job {
    Write(Write),
    /// Answered once everything queued before it is committed.
    Sync(tokio::sync::oneshot::Sender<Result<(), String>>),
    /// Read the statistics totals again (other replicas add to them).
    Refresh,
    /// Run on the store once what is queued before is written (a task
    /// held, the audit log read), or given why it cannot be.
    Read(Read),
}

/// A job on the store itself, after the writes queued before it.
pub(super) type Read = Box<dyn FnOnce(Result<&mut Store, &str>) + Send>;

/// Each tool's statistics totals as the store holds them, with this
/// process's counters they include when this commit brought them.
pub type StatsHook = Box<dyn Fn(Vec<(String, StatsRow, Option<StatsRow>)>) + Send>;

pub(super) fn run(
    mut store: Store,
    rx: mpsc::Receiver<Job>,
    hook: Arc<Mutex<Option<StatsHook>>>,
    replicas: Arc<Replicas>,
) {
    let mut pending: Vec<Write> = Vec::new();
    // The first at once: until its first reading a replica does not lead.
    let mut heartbeat = Instant::now();
    // Since when, and why, writes wait for the store.
    let mut away: Option<(Instant, String)> = None;
    let mut open = true;
    while open || !pending.is_empty() {
        // A shared database hears this replica is alive every HEARTBEAT.
        if store.shared() && Instant::now() >= heartbeat {
            heartbeat = Instant::now() + HEARTBEAT;
            match store.heartbeat() {
                Some(Ok(live)) => replicas.saw(live),
                Some(Err(e)) => {
                    tracing::debug!("registry heartbeat: {e}");
                    store.reconnect();
                }
                None => {}
            }
        }
        // A wait for the next job: until the next heartbeat on a shared
        // database, a second at most while writes wait to be tried again,
        // else for as long as it takes.
        let wait = match (store.shared(), pending.is_empty()) {
            (false, true) => None,
            (false, false) => Some(RETRY),
            (true, empty) => {
                let beat = heartbeat.saturating_duration_since(Instant::now());
                Some(if empty { beat } else { beat.min(RETRY) })
            }
        };
        let first = match wait {
            None => match rx.recv() {
                Ok(job) => Some(job),
                Err(_) => break,
            },
            Some(wait) => match rx.recv_timeout(wait) {
                Ok(job) => Some(job),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    open = false;
                    None
                }
            },
        };
        let mut syncs = Vec::new();
        let mut reads = Vec::new();
        let mut refresh = false;
        let mut next = first;
        while let Some(job) = next.take() {
            match job {
                Job::Write(w) => pending.push(w),
                Job::Sync(s) => syncs.push(s),
                Job::Refresh => refresh = true,
                Job::Read(read) => reads.push(read),
            }
            if pending.len() < BATCH {
                next = rx.try_recv().ok();
            }
        }
        let mut counted = HashMap::new();
        if !pending.is_empty() {
            // Tried again once a second, however often writes come.
            if let Some((since, reason)) = &away
                && since.elapsed() < RETRY
                && open
            {
                answer(syncs, reads, reason);
                coalesce(&mut pending);
                continue;
            }
            match store.apply(&pending) {
                Ok(()) => {
                    if away.take().is_some() {
                        tracing::info!(
                            writes = pending.len(),
                            "the registry is written again: the writes that waited are saved"
                        );
                    }
                    for w in pending.drain(..) {
                        if let Write::Stats {
                            tool_id,
                            counted: c,
                            ..
                        } = w
                        {
                            counted.insert(tool_id, c);
                        }
                    }
                }
                Err(failure) if failure.transient && open => {
                    if away.is_none() {
                        tracing::error!(error = %failure.message, writes = pending.len(), "the registry cannot be written: its writes are kept and tried again every second");
                    }
                    let reason = format!(
                        "the tool registry cannot be written now ({})",
                        failure.message
                    );
                    answer(syncs, reads, &reason);
                    away = Some((Instant::now(), reason));
                    coalesce(&mut pending);
                    store.reconnect();
                    continue;
                }
                Err(failure) => {
                    tracing::error!(error = %failure.message, writes = pending.len(), "registry writes failed and are dropped");
                    pending.clear();
                    answer(syncs, reads, &failure.message);
                    continue;
                }
            }
        }
        if !counted.is_empty() || (refresh && store.shared()) {
            report(&mut store, &hook, counted);
        }
        for s in syncs {
            let _ = s.send(Ok(()));
        }
        for read in reads {
            read(Ok(&mut store));
        }
    }
}

/// Every wait answered with `reason`: the writes were not saved.
fn answer(
    syncs: Vec<tokio::sync::oneshot::Sender<Result<(), String>>>,
    reads: Vec<Read>,
    reason: &str,
) {
    for s in syncs {
        let _ = s.send(Err(reason.to_owned()));
    }
    for read in reads {
        read(Err(reason));
    }
}

/// The totals to the hook: every tool's on a shared database, else those
/// just written.
fn report(
    store: &mut Store,
    hook: &Mutex<Option<StatsHook>>,
    mut counted: HashMap<String, StatsRow>,
) {
    let shared = store.shared();
    let totals = match store.totals() {
        Ok(totals) => totals,
        Err(e) => {
            tracing::debug!("cannot read the statistics totals: {e}");
            return;
        }
    };
    let mut rows = Vec::new();
    for (id, total) in totals {
        let c = counted.remove(&id);
        if shared || c.is_some() {
            rows.push((id, total, c));
        }
    }
    if let Some(hook) = hook.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        hook(rows);
    }
}

/// One statistics write per tool: the deltas summed, the latest counters.
fn coalesce(pending: &mut Vec<Write>) {
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut kept: Vec<Write> = Vec::with_capacity(pending.len());
    for w in pending.drain(..) {
        match w {
            Write::Stats {
                tool_id,
                delta,
                counted,
            } => match at.get(&tool_id) {
                Some(&i) => {
                    if let Write::Stats {
                        delta: sum,
                        counted: latest,
                        ..
                    } = &mut kept[i]
                    {
                        *sum = sum.plus(&delta);
                        *latest = counted;
                    }
                }
                None => {
                    at.insert(tool_id.clone(), kept.len());
                    kept.push(Write::Stats {
                        tool_id,
                        delta,
                        counted,
                    });
                }
            },
            other => kept.push(other),
        }
    }
    *pending = kept;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(id: &str, calls: u64) -> Write {
        let row = StatsRow {
            calls,
            ..Default::default()
        };
        Write::Stats {
            tool_id: id.into(),
            delta: row.clone(),
            counted: row,
        }
    }

    #[test]
    fn waiting_statistics_are_summed_per_tool_and_other_writes_kept_in_order() {
        let mut pending = vec![
            stats("a", 1),
            Write::ForgetTask("t1".into()),
            stats("b", 2),
            stats("a", 3),
            Write::ForgetTask("t2".into()),
        ];
        coalesce(&mut pending);
        assert_eq!(pending.len(), 4);
        assert!(
            matches!(&pending[0], Write::Stats { tool_id, delta, counted } if tool_id == "a" && delta.calls == 4 && counted.calls == 3)
        );
        assert_eq!(pending[1], Write::ForgetTask("t1".into()));
        assert!(matches!(&pending[2], Write::Stats { delta, .. } if delta.calls == 2));
        assert_eq!(pending[3], Write::ForgetTask("t2".into()));
    }
}
