//! Start-up of the release binary on the shipped wasm plugins
//! (`target/plugins`, the Docker toolkit folders left out: their hot pool
//! would start containers): from process start to the first `/health` answer
//! (liveness) and to `/health/ready` (every plugin loaded), in three cases:
//!
//! - cold: a fresh data directory and no precompiled components (every
//!   plugin compiled);
//! - precompiled: a fresh data directory holding only the compile-cache key
//!   `make plugins` precompiled with (`target/data`), beside the build's
//!   `.compile-cache` (as the first `make run` after `make plugins`);
//! - restart: the same data directory again (its own compile cache).
//!
//! Each server is stopped with SIGTERM. Goals (issue 17): first `/health`
//! under 200 ms always; every shipped tool ready under 1 s when warm.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::root;

/// The compile-cache key's file in a data directory (the server's
/// `wasm::cache::KEY_FILE`).
const KEY_FILE: &str = "compile-cache.key";

/// Milliseconds to the first `/health` and to `/health/ready`.
struct Start {
    health_ms: f64,
    ready_ms: f64,
    /// To every plugin on its optimised (Cranelift) build: none served on
    /// Winch's quick build any more.
    optimised_ms: f64,
}

/// `GET path` sent to `addr` (the connection closed after the answer),
/// its answer left to read.
fn get(addr: &str, path: &str) -> Option<TcpStream> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    Some(s)
}

/// The status code of `GET path` on `addr`, if it answered (read from the
/// status line alone: the start-up timings do not wait for the body).
fn status(addr: &str, path: &str) -> Option<u16> {
    let mut head = [0u8; 12];
    get(addr, path)?.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// How many plugins the server at `addr` serves on Winch's quick build
/// (`GET /plugins`, `source: "winch"`); `None` when it does not say (a
/// caller token needed, no answer).
pub(crate) fn quick_builds(addr: &str) -> Option<usize> {
    let mut answer = Vec::new();
    get(addr, "/plugins")?.read_to_end(&mut answer).ok()?;
    let answer = String::from_utf8(answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    Some(
        v["plugins"]
            .as_array()?
            .iter()
            .filter(|p| p["source"] == "winch")
            .count(),
    )
}

/// Whether the server at `addr` says every plugin is loaded.
pub(crate) fn is_ready(addr: &str) -> bool {
    // 401: a server with caller tokens; its plugins load behind it and a
    // call waits for them.
    matches!(status(addr, "/health/ready"), Some(200 | 401))
}

fn start_once(plugins: &Path, data: &Path) -> anyhow::Result<Start> {
    let bin = root().join("target/release/toolhost");
    anyhow::ensure!(
        bin.is_file(),
        "run `cargo build --release -p toolhost` first"
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let addr = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let mut child = Command::new(&bin)
        .args(["serve", "--bind", &addr])
        .arg("--plugins")
        .arg(plugins)
        .arg("--data")
        .arg(data)
        // The Docker engine's state says nothing of the wasm plugins' start
        // (no toolkit folder is served here): its warning is left out.
        .env(
            "TOOLHOST_LOG",
            "warn,toolhost_core::nodes::docker::engines=error",
        )
        .env_remove("TOOLHOST_TOKEN")
        .stdout(Stdio::null())
        .spawn()
        .context("failed to start toolhost")?;
    let deadline = started + Duration::from_secs(600);
    // The stages in order, each polled (pausing so many ms between tries)
    // until it holds: `/health` answers, every plugin is loaded, every one
    // is on Cranelift's build.
    let stages: [(&dyn Fn() -> bool, u64); 3] = [
        (&|| status(&addr, "/health") == Some(200), 1),
        (&|| status(&addr, "/health/ready") == Some(200), 5),
        (&|| quick_builds(&addr) == Some(0), 20),
    ];
    let mut reached = Vec::new();
    let result = loop {
        if Instant::now() > deadline {
            break Err(anyhow::anyhow!("not ready within 10 minutes"));
        }
        let (holds, pause_ms) = stages[reached.len()];
        if !holds() {
            std::thread::sleep(Duration::from_millis(pause_ms));
            continue;
        }
        reached.push(started.elapsed().as_secs_f64() * 1e3);
        if let [health_ms, ready_ms, optimised_ms] = reached[..] {
            break Ok(Start {
                health_ms,
                ready_ms,
                optimised_ms,
            });
        }
    };
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    result
}

fn report(case: &str, runs: &[Start]) {
    let stat = |f: fn(&Start) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        (v[0], v[v.len() / 2], v[v.len() - 1])
    };
    let (h_min, h_med, h_max) = stat(|s| s.health_ms);
    let (r_min, r_med, r_max) = stat(|s| s.ready_ms);
    let (o_min, o_med, o_max) = stat(|s| s.optimised_ms);
    println!(
        "{case:<12} runs {:>2}  first /health median {h_med:>7.1} ms (min {h_min:.1}, max {h_max:.1})  all ready median {r_med:>8.1} ms (min {r_min:.1}, max {r_max:.1})  all optimised median {o_med:>8.1} ms (min {o_min:.1}, max {o_max:.1})",
        runs.len()
    );
}

pub fn run(plugins: &Path, warm_runs: usize, cold_runs: usize) -> anyhow::Result<()> {
    println!("== start-up: the shipped wasm plugins, release binary ==");
    let without_seed = tempfile::tempdir()?;
    let with_seed = tempfile::tempdir()?;
    let mut names = Vec::new();
    for entry in std::fs::read_dir(plugins)? {
        let path = entry?.path();
        let file = path.file_name().unwrap_or_default().to_owned();
        if path.is_file() && !file.to_string_lossy().starts_with('.') {
            std::fs::copy(&path, without_seed.path().join(&file))?;
            std::fs::copy(&path, with_seed.path().join(&file))?;
            if path.extension().is_some_and(|e| e == "wasm") {
                names.push(file.to_string_lossy().into_owned());
            }
        }
    }
    names.sort();
    // doc's embedding model, mounted from the plugins folder (`[assets]`).
    let models = plugins.join(".models");
    if models.is_dir() {
        std::os::unix::fs::symlink(&models, without_seed.path().join(".models"))?;
        std::os::unix::fs::symlink(&models, with_seed.path().join(".models"))?;
    }
    // The key `make plugins` precompiled with: a data directory without it
    // makes a key of its own and refuses every entry.
    let key = root().join("target/data").join(KEY_FILE);
    anyhow::ensure!(
        key.is_file(),
        "no {}: run `make plugins` (it precompiles with target/data's key)",
        key.display()
    );
    let seed = plugins.join(".compile-cache");
    anyhow::ensure!(
        seed.is_dir(),
        "no {}: run `make plugins` (it precompiles)",
        seed.display()
    );
    let copy = with_seed.path().join(".compile-cache");
    std::fs::create_dir_all(&copy)?;
    for entry in std::fs::read_dir(&seed)? {
        let path = entry?.path();
        std::fs::copy(&path, copy.join(path.file_name().unwrap_or_default()))?;
    }
    println!("plugins: {}", names.join(", "));

    // The restarts reuse the data directory of the first cold start.
    let primed = tempfile::tempdir()?;
    let mut cold = vec![start_once(without_seed.path(), primed.path())?];
    for _ in 1..cold_runs.max(1) {
        let data = tempfile::tempdir()?;
        cold.push(start_once(without_seed.path(), data.path())?);
    }
    let mut precompiled = Vec::new();
    let mut restart = Vec::new();
    for _ in 0..warm_runs {
        let data = tempfile::tempdir()?;
        std::fs::copy(&key, data.path().join(KEY_FILE))?;
        precompiled.push(start_once(with_seed.path(), data.path())?);
        restart.push(start_once(without_seed.path(), primed.path())?);
    }
    report("cold", &cold);
    report("precompiled", &precompiled);
    report("restart", &restart);
    Ok(())
}
