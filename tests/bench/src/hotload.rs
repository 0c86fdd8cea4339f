//! Hot-loading benchmarks against the real binary:
//!
//! 1. Swap latency: a new version of a plugin is renamed into the plugins
//!    directory of a running server; the time until a call is answered by the
//!    new version (its `x-toolhost-plugin-version` header). Every version is
//!    new bytes, so each swap compiles (the compile cache cannot help).
//! 2. Cold start with 20 plugins (distinct components), compile cache cold vs
//!    warm: the time from spawning the server until `/health` answers (the
//!    server listens once every plugin of the directory is loaded).
//!
//! A Python component (`target/plugins/textstats.wasm`, from `make plugins`)
//! joins both when it is there.

use std::path::Path;
use std::time::{Duration, Instant};

use toolhost_e2e::{sha256_hex, tagged, write_then_rename};

use crate::{ServerProcess, percentiles, request_version};

pub async fn run(plugins: &Path, swaps: usize) -> anyhow::Result<()> {
    let calc = std::fs::read(plugins.join("calc.wasm"))?;
    let python = plugins.join("textstats.wasm");
    let python = python
        .is_file()
        .then(|| std::fs::read(&python))
        .transpose()?;

    println!("\n== hot swap: rename of a new version -> first call answered by it ==");
    swap_latency(
        "calc",
        &calc,
        plugins,
        "calc_evaluate",
        r#"{"params":{"expression":"1+1"}}"#,
        swaps,
    )
    .await?;
    // A rebuild with a small change (another build of calc: some of its
    // functions differ, most do not), the first swap to it on a fresh
    // server: what a plugin author's edit-build-drop loop sees.
    if let Ok(rebuilt) = std::env::var("BENCH_REBUILT") {
        let rebuilt = std::fs::read(&rebuilt)?;
        let mut times = Vec::new();
        for i in 0..5 {
            times.push(first_swap(&calc, &rebuilt, plugins, i).await?);
        }
        let (median, _, _, max) = percentiles(&mut times);
        println!(
            "calc rebuilt ({} KB), first swap on a fresh server: median {:.0} ms, max {:.0} ms over 5 servers",
            rebuilt.len() / 1024,
            median / 1000.0,
            max / 1000.0
        );
    }
    if let Some(py) = &python {
        swap_latency(
            "textstats",
            py,
            plugins,
            "textstats_summary",
            r#"{"params":{"text":"a b c"}}"#,
            3,
        )
        .await?;
    } else {
        println!("(no target/plugins/textstats.wasm: the Python figure is skipped)");
    }

    println!("\n== cold start with 20 plugins: spawn -> every plugin ready (/health/ready) ==");
    let dir = tempfile::tempdir()?;
    let files = std::fs::read(plugins.join("files.wasm"))?;
    for i in 0..20 {
        let (name, bytes) = match (i, &python) {
            (0, Some(py)) => ("textstats".to_owned(), py.clone()),
            (i, _) if i % 2 == 0 => (format!("calc{i}"), tagged(&calc, &format!("start-{i}"))),
            (i, _) => (format!("files{i}"), tagged(&files, &format!("start-{i}"))),
        };
        std::fs::write(dir.path().join(format!("{name}.wasm")), bytes)?;
    }
    let textstats_toml = plugins.join("textstats.toml");
    if python.is_some() && textstats_toml.is_file() {
        std::fs::copy(textstats_toml, dir.path().join("textstats.toml"))?;
    }
    let data = tempfile::tempdir()?;
    for label in ["cache cold", "cache warm", "cache warm"] {
        let started = Instant::now();
        let server = ServerProcess::start_in(dir.path(), data.path())?;
        let elapsed = started.elapsed();
        let tools = server.tool_count().await?;
        // Cranelift's builds made (and written to the cache) before this
        // server stops: a warm start is one from a filled cache, not one
        // after a server stopped while its first answers ran on Winch's.
        server.wait_built()?;
        println!(
            "{label}: ready in {:>7.1} ms ({tools} tools{})",
            elapsed.as_secs_f64() * 1000.0,
            if python.is_some() {
                ", incl. an 18 MB Python component"
            } else {
                ""
            }
        );
    }
    Ok(())
}

/// A fresh server of `calc` (its own bytes, tagged `i`); the time from
/// renaming `rebuilt` in until a call is answered by it.
async fn first_swap(
    calc: &[u8],
    rebuilt: &[u8],
    plugins: &Path,
    i: usize,
) -> anyhow::Result<Duration> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("calc.wasm");
    std::fs::write(&file, tagged(calc, &format!("first-{i}")))?;
    std::fs::copy(plugins.join("calc.toml"), dir.path().join("calc.toml"))?;
    let data = tempfile::tempdir()?;
    let server = ServerProcess::start_in(dir.path(), data.path())?;
    let next = tagged(rebuilt, &format!("rebuilt-{i}-{}", std::process::id()));
    let version = sha256_hex(&next);
    let body = r#"{"params":{"expression":"1+1"}}"#;
    write_then_rename(&file, &next);
    let landed = Instant::now();
    while request_version(&server.addr, "/tools/calc_evaluate/invoke", body)
        .await?
        .as_deref()
        != Some(&version)
    {
        anyhow::ensure!(
            landed.elapsed() < Duration::from_secs(120),
            "the rebuild never answered"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(landed.elapsed())
}

async fn swap_latency(
    name: &str,
    bytes: &[u8],
    plugins: &Path,
    tool: &str,
    body: &'static str,
    swaps: usize,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join(format!("{name}.wasm")), bytes)?;
    let manifest = plugins.join(format!("{name}.toml"));
    if manifest.is_file() {
        std::fs::copy(&manifest, dir.path().join(format!("{name}.toml")))?;
    }
    let data = tempfile::tempdir()?;
    let server = ServerProcess::start_in(dir.path(), data.path())?;
    let path = format!("/tools/{tool}/invoke");
    let mut times = Vec::with_capacity(swaps);
    for i in 0..swaps {
        let next = tagged(bytes, &format!("bench-swap-{i}-{}", std::process::id()));
        let version = sha256_hex(&next);
        write_then_rename(&dir.path().join(format!("{name}.wasm")), &next);
        let landed = Instant::now();
        let deadline = landed + Duration::from_secs(120);
        loop {
            if request_version(&server.addr, &path, body).await?.as_deref() == Some(&version) {
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "version {i} never answered");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        times.push(landed.elapsed());
    }
    let (median, _, _, max) = percentiles(&mut times);
    println!(
        "{name} ({} KB): median {:.0} ms, max {:.0} ms over {swaps} swaps",
        bytes.len() / 1024,
        median / 1000.0,
        max / 1000.0
    );
    Ok(())
}
