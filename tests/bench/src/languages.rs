//! Per plugin language, in-process (no HTTP), one plugin loaded at a time:
//!
//! - component size;
//! - cold load: `Server::start` with an empty compile cache (compile included);
//! - cached load: the same with the on-disk compile cache filled;
//! - a trivial call through dispatch: median and p99 over `samples` calls
//!   (each a fresh sandboxed instance, as in production);
//! - fuel of that call (instantiation included), as the host counts it.
//!
//! Plugins that are not built (`make plugins`) are skipped with a note.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost::config::Config;
use toolhost::dispatch::CallOptions;
use toolhost::server::Server;

use crate::percentiles;

/// (language, plugin, tool, trivial input).
fn cases() -> Vec<(&'static str, &'static str, &'static str, Value)> {
    vec![
        (
            "Rust",
            "calc",
            "calc_evaluate",
            json!({"expression": "1+1"}),
        ),
        (
            "Python",
            "textstats",
            "textstats_summary",
            json!({"text": "a b"}),
        ),
        ("Python", "python", "python_run", json!({"code": "1+1"})),
        ("JS", "mdhtml", "mdhtml_render", json!({"markdown": "# Hi"})),
        (
            "C",
            "checksum",
            "checksum_hash",
            json!({"text": "abc", "algorithm": "sha256"}),
        ),
    ]
}

pub async fn run(plugins: &Path, samples: usize) -> anyhow::Result<()> {
    println!("\n== plugin languages: one trivial call each, in-process ==");
    println!(
        "{:<7} {:<20} {:>9} {:>10} {:>10} {:>10} {:>10} {:>14}",
        "lang", "tool", "size KB", "cold ms", "cached ms", "median us", "p99 us", "fuel/call"
    );
    for (lang, plugin, tool, input) in cases() {
        let wasm = plugins.join(format!("{plugin}.wasm"));
        if !wasm.is_file() {
            println!("{lang:<7} {tool:<20} (not built: run `make plugins`)");
            continue;
        }
        let size = std::fs::metadata(&wasm)?.len();
        let dir = tempfile::tempdir()?;
        for ext in ["wasm", "toml"] {
            let from = plugins.join(format!("{plugin}.{ext}"));
            if from.is_file() {
                std::fs::copy(from, dir.path().join(format!("{plugin}.{ext}")))?;
            }
        }
        let data = tempfile::tempdir()?;
        let config = Config::default();

        let started = Instant::now();
        let server = Server::start(&config, dir.path(), data.path()).await?;
        let cold = started.elapsed();
        server.shutdown().await;
        drop(server);

        let started = Instant::now();
        let server = Server::start(&config, dir.path(), data.path()).await?;
        let cached = started.elapsed();
        anyhow::ensure!(
            server.load_errors().is_empty(),
            "{plugin} did not load: {:?}",
            server.load_errors()
        );

        let (session, _) = server
            .dispatcher
            .sessions()
            .open(&toolhost::callers::Caller::anonymous(), Some("bench-lang"))?;
        let call = || {
            server
                .dispatcher
                .dispatch(&session, tool, input.clone(), CallOptions::default())
        };
        // Warm up, then time.
        let n = if lang == "Python" || lang == "JS" {
            samples.min(300)
        } else {
            samples
        };
        for _ in 0..n.min(50) {
            call().await?;
        }
        let mut times: Vec<Duration> = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            call().await?;
            times.push(t.elapsed());
        }
        let (median, _, p99, _) = percentiles(&mut times);

        let fuel = call().await?.fuel.unwrap_or(0);
        println!(
            "{lang:<7} {tool:<20} {:>9.0} {:>10.1} {:>10.1} {median:>10.1} {p99:>10.1} {fuel:>14}",
            size as f64 / 1024.0,
            cold.as_secs_f64() * 1000.0,
            cached.as_secs_f64() * 1000.0,
        );
        server.shutdown().await;
    }
    Ok(())
}
