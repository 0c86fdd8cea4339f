//! Soak: `SOAK_MINUTES` (default 10) of mixed load against the release
//! binary on 127.0.0.1, bounded and self-stopping:
//!
//! - 4 workers calling `calc_evaluate` (checking every answer);
//! - a hot swap of `calc` every 5 s (a new version each time);
//! - hostile calls every 250 ms (infinite loop, memory bomb, 100 MB output):
//!   each must end with its own error kind;
//! - when a Docker engine answers: every 3 s a new session runs a shell
//!   command and a notebook cell, then is closed (its nodes removed).
//!
//! Reported: calls by outcome (expected errors apart from unexpected ones),
//! server RSS after a one-minute warm-up and at the end, and the Docker
//! containers left once the server has stopped.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use serde_json::{Value, json};
use toolhost_e2e::{tagged, write_then_rename};

use crate::{ServerProcess, connect};

type Tally = Arc<Mutex<BTreeMap<String, u64>>>;

fn count(tally: &Tally, key: impl Into<String>) {
    *tally.lock().unwrap().entry(key.into()).or_default() += 1;
}

/// One request on a fresh connection: the status and the JSON body.
async fn request(
    addr: &str,
    method: &str,
    path: &str,
    session: &str,
    body: Value,
) -> anyhow::Result<(u16, Value)> {
    let mut sender = connect(addr).await?;
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr)
        .header("content-type", "application/json")
        .header("x-toolhost-session", session)
        .body(Full::new(Bytes::from(body.to_string())))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await?.to_bytes();
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

/// Ids of every container a toolhost made (label `toolhost.scope`); none
/// without a Docker engine.
fn toolhost_containers() -> Vec<String> {
    std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter", "label=toolhost.scope"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn docker_available() -> bool {
    std::process::Command::new("docker")
        .arg("info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub async fn run(plugins: &Path, minutes: u64) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for f in ["calc.wasm", "calc.toml"] {
        std::fs::copy(plugins.join(f), dir.path().join(f))?;
    }
    let fixtures = plugins.join("../fixtures");
    std::fs::copy(
        fixtures.join("hostile.wasm"),
        dir.path().join("hostile.wasm"),
    )?;
    std::fs::copy(
        fixtures.join("hostile.toml"),
        dir.path().join("hostile.toml"),
    )?;
    let docker = docker_available();
    if docker {
        for toolkit in ["shell", "notebook"] {
            let dst = dir.path().join(toolkit);
            std::fs::create_dir_all(&dst)?;
            for f in ["driver.py".to_owned(), format!("{toolkit}.toml")] {
                std::fs::copy(plugins.join(toolkit).join(&f), dst.join(&f))?;
            }
        }
    }
    // Containers of other toolhost runs (a killed server's) are not this one's.
    let before = toolhost_containers();
    let data = tempfile::tempdir()?;
    let mut server = ServerProcess::start_in(dir.path(), data.path())?;
    let addr = server.addr.clone();
    let pid = server.child.id();
    let total = Duration::from_secs(minutes * 60);
    let warmup = Duration::from_secs(60).min(total / 3);
    println!(
        "\n== soak: {minutes} min of mixed load (Docker sessions: {}) ==",
        if docker { "yes" } else { "no engine, skipped" }
    );
    let started = Instant::now();
    let deadline = started + total;
    let ok: Tally = Arc::default();
    let expected: Tally = Arc::default();
    let unexpected: Tally = Arc::default();
    let mut tasks = Vec::new();

    for w in 0..4u64 {
        let (addr, ok, unexpected) = (addr.clone(), ok.clone(), unexpected.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while Instant::now() < deadline {
                i += 1;
                let n = w * 1_000_000 + i;
                let body = json!({"params": {"expression": format!("{n} + 1")}});
                match request(&addr, "POST", "/tools/calc_evaluate/invoke", "soak", body).await {
                    Ok((200, v)) if v["result"]["value"] == json!((n + 1) as f64) => {
                        count(&ok, "calc");
                    }
                    Ok((status, v)) => {
                        count(&unexpected, format!("calc {status} {}", v["error"]["kind"]))
                    }
                    Err(e) => count(&unexpected, format!("calc transport: {e}")),
                }
            }
        }));
    }

    {
        let (plugins_dir, ok) = (dir.path().to_owned(), ok.clone());
        let calc = std::fs::read(plugins.join("calc.wasm"))?;
        tasks.push(tokio::spawn(async move {
            let mut v = 0;
            while Instant::now() + Duration::from_secs(5) < deadline {
                tokio::time::sleep(Duration::from_secs(5)).await;
                v += 1;
                write_then_rename(
                    &plugins_dir.join("calc.wasm"),
                    &tagged(&calc, &format!("soak-{v}")),
                );
                count(&ok, "hot swap");
            }
        }));
    }

    {
        let (addr, expected, unexpected) = (addr.clone(), expected.clone(), unexpected.clone());
        tasks.push(tokio::spawn(async move {
            let cases = [
                (
                    "hostile_spin",
                    json!({}),
                    json!({"timeout_ms": 200}),
                    "timeout",
                ),
                (
                    "hostile_hog",
                    json!({}),
                    json!({"memory_mb": 32}),
                    "out_of_memory",
                ),
                (
                    "hostile_big_output",
                    json!({"mb": 100}),
                    json!({}),
                    "output_too_large",
                ),
            ];
            let mut i = 0;
            while Instant::now() < deadline {
                let (tool, params, limits, want) = &cases[i % cases.len()];
                i += 1;
                let body = json!({"params": params, "limits": limits});
                match request(
                    &addr,
                    "POST",
                    &format!("/tools/{tool}/invoke"),
                    "soak-bad",
                    body,
                )
                .await
                {
                    Ok((_, v)) if v["error"]["kind"] == *want => count(&expected, *want),
                    Ok((status, v)) => count(
                        &unexpected,
                        format!("{tool} {status} {}", v["error"]["kind"]),
                    ),
                    Err(e) => count(&unexpected, format!("{tool} transport: {e}")),
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }));
    }

    if docker {
        let (addr, ok, unexpected) = (addr.clone(), ok.clone(), unexpected.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while Instant::now() + Duration::from_secs(10) < deadline {
                i += 1;
                let session = format!("soak-node-{i}");
                let shell = json!({"params": {"command": format!("echo {i}")}});
                match request(&addr, "POST", "/tools/shell_run/invoke", &session, shell).await {
                    Ok((200, v)) if v["result"]["stdout"] == json!(format!("{i}\n")) => {
                        count(&ok, "shell")
                    }
                    Ok((status, v)) => count(&unexpected, format!("shell {status} {}", v["error"])),
                    Err(e) => count(&unexpected, format!("shell transport: {e}")),
                }
                let cell = json!({"params": {"code": format!("{i} * 2")}});
                match request(
                    &addr,
                    "POST",
                    "/tools/notebook_execute/invoke",
                    &session,
                    cell,
                )
                .await
                {
                    Ok((200, _)) => count(&ok, "notebook"),
                    Ok((status, v)) => {
                        count(&unexpected, format!("notebook {status} {}", v["error"]))
                    }
                    Err(e) => count(&unexpected, format!("notebook transport: {e}")),
                }
                match request(
                    &addr,
                    "DELETE",
                    &format!("/sessions/{session}"),
                    &session,
                    json!({}),
                )
                .await
                {
                    Ok((s, _)) if s < 300 => count(&ok, "session closed"),
                    Ok((status, v)) => count(&unexpected, format!("close {status} {v}")),
                    Err(e) => count(&unexpected, format!("close transport: {e}")),
                }
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
        }));
    }

    tokio::time::sleep(warmup).await;
    // RSS every 5 s from the end of the warm-up: the first is the base, the
    // median of the last three the end (one sample is noise).
    let samples = Arc::new(Mutex::new(vec![rss_kib(pid)]));
    let sampler = {
        let samples = samples.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                samples.lock().unwrap().push(rss_kib(pid));
            }
        })
    };
    for t in tasks {
        t.await?;
    }
    sampler.abort();
    let samples = samples.lock().unwrap().clone();
    let rss_warm = samples[0];
    let mut last: Vec<u64> = samples.iter().rev().take(3).copied().collect();
    last.sort_unstable();
    let rss_end = last[last.len() / 2];
    let rss_max = samples.iter().copied().max().unwrap_or(0);
    let elapsed = started.elapsed();
    toolhost_e2e::stop_gracefully(&mut server.child, Duration::from_secs(30));
    let left = if docker {
        toolhost_containers()
            .iter()
            .filter(|c| !before.contains(c))
            .count()
    } else {
        0
    };

    let show = |name: &str, t: &Tally| {
        let t = t.lock().unwrap();
        let sum: u64 = t.values().sum();
        println!("{name}: {sum} {t:?}");
    };
    println!("ran {:.1} min", elapsed.as_secs_f64() / 60.0);
    show("ok", &ok);
    show("expected errors (hostile calls)", &expected);
    show("UNEXPECTED errors", &unexpected);
    let growth = (rss_end as f64 / rss_warm.max(1) as f64 - 1.0) * 100.0;
    println!(
        "server RSS: {rss_warm} KiB after {} s warm-up, {rss_end} KiB at the end ({growth:+.1}%), \
         at most {rss_max} KiB ({} samples, 5 s apart)",
        warmup.as_secs(),
        samples.len()
    );
    println!("Docker containers left after the server stopped: {left}");
    // `make soak` fails past SOAK_MAX_GROWTH_PCT (5) after the warm-up.
    let limit = crate::env_num("SOAK_MAX_GROWTH_PCT", 5) as f64;
    anyhow::ensure!(
        growth <= limit,
        "server RSS grew {growth:+.1}% after the warm-up, over the {limit}% allowed (SOAK_MAX_GROWTH_PCT)"
    );
    Ok(())
}
