//! What an MCP session costs the server (#37 item 3): `BENCH_MCP_SESSIONS`
//! (default 10,000) `initialize` requests that never finish the handshake,
//! from 8 connections; the server's RSS before, with them all open, and
//! after `DELETE /mcp` closed each; and how long the opening and closing
//! took. Unfinished sessions would otherwise be closed by the server after
//! `[sessions] mcp_unfinished_timeout_s`; the bench sets it to 600 s so
//! that none goes while it measures.

use std::time::Instant;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;

use super::{ServerProcess, connect};

const CONNECTIONS: usize = 8;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;

pub(crate) async fn run(plugins: &std::path::Path, count: usize) -> anyhow::Result<()> {
    println!("== MCP sessions: {count} initialize-only sessions ==");
    let config = tempfile::NamedTempFile::new()?;
    std::fs::write(
        config.path(),
        format!(
            "[sessions]\nmax_mcp_sessions = {}\nmcp_unfinished_timeout_s = 600\n",
            count + 100
        ),
    )?;
    // calc alone: no Docker pool, no other plugin compiling.
    let calc_only = tempfile::tempdir()?;
    for f in ["calc.wasm", "calc.toml"] {
        std::fs::copy(plugins.join(f), calc_only.path().join(f))?;
    }
    let server = ServerProcess::start_with(calc_only.path(), Some(config.path()), &[])?;
    let pid = server.child.id();
    let settle = || std::thread::sleep(std::time::Duration::from_secs(2));
    settle();
    let before = super::soak::rss_kib(pid);

    // Rounds (`BENCH_MCP_ROUNDS`, 2): memory kept after the first round and
    // reused by the next is the allocator's; memory added again, a leak.
    let rounds = super::env_num("BENCH_MCP_ROUNDS", 2);
    for round in 1..=rounds {
        let (open, closed) = round_trip(&server, pid, count).await?;
        let each = (open.saturating_sub(before)) as f64 / count as f64;
        println!(
            "round {round}: server RSS {before} KiB -> {open} KiB with {count} open ({each:.1} KiB each) -> {closed} KiB after closing them"
        );
    }
    Ok(())
}

/// Open `count` sessions and close them: RSS with them open, and after.
async fn round_trip(server: &ServerProcess, pid: u32, count: usize) -> anyhow::Result<(u64, u64)> {
    let settle = || std::thread::sleep(std::time::Duration::from_secs(2));
    let started = Instant::now();
    let per = count.div_ceil(CONNECTIONS);
    let mut tasks = Vec::new();
    for c in 0..CONNECTIONS {
        let addr = server.addr.clone();
        let n = per.min(count.saturating_sub(c * per));
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&addr).await?;
            let mut ids = Vec::with_capacity(n);
            for _ in 0..n {
                let req = Request::post("/mcp")
                    .header("host", &addr)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(Full::new(Bytes::from_static(INITIALIZE.as_bytes())))?;
                sender.ready().await?;
                let resp = sender.send_request(req).await?;
                let status = resp.status();
                let id = resp
                    .headers()
                    .get("mcp-session-id")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let _ = resp.into_body().collect().await?;
                anyhow::ensure!(status.is_success(), "initialize answered {status}");
                ids.push(id.context("no mcp-session-id")?);
            }
            anyhow::Ok((addr, ids))
        }));
    }
    let mut opened = Vec::new();
    for t in tasks {
        opened.push(t.await??);
    }
    let open_time = started.elapsed();
    settle();
    let open = super::soak::rss_kib(pid);

    let started = Instant::now();
    let mut tasks = Vec::new();
    for (addr, ids) in opened {
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&addr).await?;
            for id in ids {
                let req = Request::delete("/mcp")
                    .header("host", &addr)
                    .header("mcp-session-id", &id)
                    .header("mcp-protocol-version", "2025-11-25")
                    .body(Full::new(Bytes::new()))?;
                sender.ready().await?;
                let resp = sender.send_request(req).await?;
                let _ = resp.into_body().collect().await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let close_time = started.elapsed();
    settle();
    let closed = super::soak::rss_kib(pid);

    println!(
        "opening: {:.0} sessions/s ({CONNECTIONS} connections); closing: {:.0} sessions/s",
        count as f64 / open_time.as_secs_f64(),
        count as f64 / close_time.as_secs_f64()
    );
    Ok((open, closed))
}
