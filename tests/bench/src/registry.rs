//! The registry on PostgreSQL (#39 item 5), against Debian's PostgreSQL on a
//! throwaway loopback cluster (`tests/pg/cluster.sh`, fsync off) and two
//! toolhost replicas on it:
//!
//! 1. the database's cost on a call: `calc_evaluate` under load on one
//!    server with the embedded SQLite registry and on a PostgreSQL replica,
//!    in alternating rounds (a call never waits on either: the figures
//!    should agree within the noise);
//! 2. what calls cost the database: both replicas under load, the
//!    transactions and rows the database took per second (from its own
//!    `pg_stat_database`);
//! 3. the registry's write capacity: status changes (each saved before its
//!    answer) by writers on both replicas at once, under the same call load;
//! 4. the database stopped under load: calls go on at the same pace, a
//!    status change answers 503, and when it is back the first change saved.
//!
//! Loopback only; every phase runs `seconds` and stops by itself.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use toolhost_e2e::pg::Postgres;

use super::surfaces::{Load, Surface, load};
use super::{ServerProcess, connect, percentiles};

const ADMIN: &str = "bench-admin-0123456789";

/// Transactions committed and rows written, as the database counts them.
fn written(pg: &Postgres) -> (u64, u64) {
    // The counters are reported by each backend at most once a second.
    std::thread::sleep(Duration::from_millis(1200));
    let row = pg.query(
        "select xact_commit, tup_inserted + tup_updated + tup_deleted \
         from pg_stat_database where datname = current_database()",
    );
    let (commits, rows) = row.split_once('|').unwrap_or(("0", "0"));
    (commits.parse().unwrap_or(0), rows.parse().unwrap_or(0))
}

/// `PUT /tools/{id}/status` on a kept-alive connection: the HTTP status.
async fn put_status(
    sender: &mut super::Sender,
    addr: &str,
    tool: &str,
    status: &str,
) -> anyhow::Result<u16> {
    let req = Request::put(format!("/tools/{tool}/status"))
        .header("host", addr)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {ADMIN}"))
        .body(Full::new(Bytes::from(format!(
            r#"{{"status":"{status}"}}"#
        ))))?;
    sender.ready().await?;
    let resp = sender.send_request(req).await?;
    let code = resp.status().as_u16();
    resp.into_body().collect().await?;
    Ok(code)
}

/// Status changes by one writer per `(replica, tool)` until `stop`: the
/// latency of each change saved, and the changes refused.
async fn change_statuses(
    writers: Vec<(String, String)>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<(Vec<Duration>, usize)> {
    let mut tasks = Vec::new();
    for (addr, tool) in writers {
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&addr).await?;
            let (mut times, mut refused) = (Vec::new(), 0);
            let mut active = true;
            while !stop.load(Ordering::Relaxed) {
                let to = if active { "inactive" } else { "active" };
                let t = Instant::now();
                match put_status(&mut sender, &addr, &tool, to).await? {
                    200 => {
                        times.push(t.elapsed());
                        active = !active;
                    }
                    _ => refused += 1,
                }
            }
            put_status(&mut sender, &addr, &tool, "active").await?;
            anyhow::Ok((times, refused))
        }));
    }
    let (mut times, mut refused) = (Vec::new(), 0);
    for t in tasks {
        let (t, r) = t.await??;
        times.extend(t);
        refused += r;
    }
    Ok((times, refused))
}

fn show(what: &str, l: &Load) {
    println!(
        "  {what:<44} {:>8.0} calls/s   p50 {:>5.2} ms   p99 {:>5.2} ms",
        l.rate,
        l.p50 / 1000.0,
        l.p99 / 1000.0
    );
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub(crate) async fn run(plugins: &Path, connections: usize, seconds: u64) -> anyhow::Result<()> {
    println!("== the registry: embedded SQLite vs PostgreSQL, two replicas ==");
    let Some(pg) = Postgres::start() else {
        println!("  skipped: no PostgreSQL (tests/pg/ensure-postgres.sh)");
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let sqlite_cfg = dir.path().join("sqlite.toml");
    std::fs::write(&sqlite_cfg, format!("[auth]\nadmin_token = \"{ADMIN}\"\n"))?;
    let pg_cfg = dir.path().join("pg.toml");
    std::fs::write(
        &pg_cfg,
        format!(
            "[registry]\nurl = \"{}\"\n[auth]\nadmin_token = \"{ADMIN}\"\n",
            pg.url
        ),
    )?;
    let sqlite = ServerProcess::start_with(plugins, Some(&sqlite_cfg), &[])?;
    let a = ServerProcess::start_with(plugins, Some(&pg_cfg), &[])?;
    let b = ServerProcess::start_with(plugins, Some(&pg_cfg), &[])?;
    let round = Duration::from_secs(seconds.div_ceil(3).max(1));
    let phase = Duration::from_secs(seconds.max(1));

    // 1. The same load on one server of each kind, alternating.
    let (mut on_sqlite, mut on_pg) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        on_sqlite.push(load(&sqlite.addr, Surface::Native, connections, round).await?);
        on_pg.push(load(&a.addr, Surface::Native, connections, round).await?);
    }
    for (what, rounds) in [
        ("SQLite registry", &on_sqlite),
        ("PostgreSQL registry", &on_pg),
    ] {
        println!(
            "  {what:<44} {:>8.0} calls/s   p50 {:>5.2} ms   p99 {:>5.2} ms   (median of 3 rounds of {} s, {connections} connections)",
            median(rounds.iter().map(|l| l.rate).collect()),
            median(rounds.iter().map(|l| l.p50).collect()) / 1000.0,
            median(rounds.iter().map(|l| l.p99).collect()) / 1000.0,
            round.as_secs()
        );
    }
    let ratio = median(on_pg.iter().map(|l| l.rate).collect())
        / median(on_sqlite.iter().map(|l| l.rate).collect());
    println!("  PostgreSQL / SQLite throughput: {ratio:.2}");
    drop(sqlite);

    // 2. Both replicas under load: what reaches the database.
    let half = (connections / 2).max(1);
    let before = written(&pg);
    let started = Instant::now();
    let (la, lb) = tokio::join!(
        load(&a.addr, Surface::Native, half, phase),
        load(&b.addr, Surface::Native, half, phase)
    );
    let (la, lb) = (la?, lb?);
    let after = written(&pg);
    let span = started.elapsed().as_secs_f64();
    show("replica A (calls only)", &la);
    show("replica B (calls only)", &lb);
    println!(
        "  the database took {:.1} transactions/s and {:.1} rows/s for {:.0} calls/s (a flush a second and a heartbeat every 2 s per replica)",
        (after.0 - before.0) as f64 / span,
        (after.1 - before.1) as f64 / span,
        la.rate + lb.rate
    );

    // 3. Status changes through both replicas under the same load.
    let tools = super::tool_ids(&a.addr).await?;
    let others: Vec<_> = tools.iter().filter(|t| *t != "calc_evaluate").collect();
    anyhow::ensure!(!others.is_empty(), "the bench needs a second tool");
    let writers: Vec<_> = others
        .iter()
        .take(4)
        .enumerate()
        .map(|(i, t)| {
            let addr = if i % 2 == 0 { &a.addr } else { &b.addr };
            (addr.clone(), t.to_string())
        })
        .collect();
    let n = writers.len();
    let stop = Arc::new(AtomicBool::new(false));
    let before = written(&pg);
    let started = Instant::now();
    let changes = tokio::spawn(change_statuses(writers, stop.clone()));
    let (la, lb) = tokio::join!(
        load(&a.addr, Surface::Native, half, phase),
        load(&b.addr, Surface::Native, half, phase)
    );
    stop.store(true, Ordering::Relaxed);
    let (mut times, refused) = changes.await??;
    let span = started.elapsed().as_secs_f64();
    let after = written(&pg);
    let (la, lb) = (la?, lb?);
    show("replica A (calls + status changes)", &la);
    show("replica B (calls + status changes)", &lb);
    let saved = times.len();
    let (p50, _, p99, _) = percentiles(&mut times);
    println!(
        "  status changes: {:.0}/s saved by {n} writers on two replicas (p50 {:.2} ms, p99 {:.2} ms, {refused} refused); the database took {:.0} transactions/s",
        saved as f64 / span,
        p50 / 1000.0,
        p99 / 1000.0,
        (after.0 - before.0) as f64 / span
    );

    // 4. The database stopped under load.
    pg.stop();
    let away = load(&a.addr, Surface::Native, connections, round).await?;
    show("replica A, the database stopped", &away);
    let mut sender = connect(&a.addr).await?;
    let tool = others[0];
    let code = put_status(&mut sender, &a.addr, tool, "inactive").await?;
    println!("  a status change meanwhile: HTTP {code}");
    anyhow::ensure!(
        code == 503,
        "a status change with the database away answered {code}"
    );
    pg.resume();
    let back = Instant::now();
    loop {
        let code = put_status(&mut sender, &a.addr, tool, "inactive").await?;
        if code == 200 {
            break;
        }
        anyhow::ensure!(
            back.elapsed() < Duration::from_secs(30),
            "still {code} 30 s after"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "  the database back: the first status change saved {:.2} s after its start",
        back.elapsed().as_secs_f64()
    );
    Ok(())
}
