//! What traces cost a call (`toolhost-bench traces`): three servers of
//! calc, export off, on with every trace sampled, on with one in ten, to a
//! receiver that takes every export and keeps nothing (its own cost is not
//! toolhost's); with `BENCH_BASE_BIN`, a fourth of that build (one from
//! before traces) beside them. Paired: each connection calls the three in turn, and each
//! server's CPU time per call is read from /proc. Then each server's
//! native invoke / bare `/health` throughput ratio, in interleaved rounds.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::ServerProcess;
use crate::surfaces::{Surface, load, paired_cpu};

/// An OTLP/HTTP receiver that answers every export with 200 and counts them.
struct Sink {
    addr: String,
    exports: Arc<AtomicU64>,
}

impl Sink {
    fn start() -> anyhow::Result<Sink> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let exports = Arc::new(AtomicU64::new(0));
        let count = exports.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let count = count.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream);
                    loop {
                        let mut length = 0usize;
                        loop {
                            let mut line = String::new();
                            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                            if line == "\r\n" {
                                break;
                            }
                            if let Some((name, value)) = line.split_once(':')
                                && name.eq_ignore_ascii_case("content-length")
                            {
                                length = value.trim().parse().unwrap_or(0);
                            }
                        }
                        let mut body = vec![0; length];
                        if reader.read_exact(&mut body).is_err() {
                            return;
                        }
                        count.fetch_add(1, Ordering::Relaxed);
                        let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                        if reader.get_mut().write_all(answer).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Ok(Sink { addr, exports })
    }
}

pub(crate) async fn run(plugins: &Path, connections: usize, seconds: u64) -> anyhow::Result<()> {
    let sink = Sink::start()?;
    let mut settings = vec![
        ("export off", None),
        ("on, 100 %", Some(1.0)),
        ("on, 10 %", Some(0.1)),
    ];
    let mut files = Vec::new();
    let mut servers = Vec::new();
    // BENCH_BASE_BIN: a build from before traces, side by side (what "off"
    // costs against no traces at all).
    if let Some(base) = std::env::var_os("BENCH_BASE_BIN") {
        settings.insert(0, ("before", None));
        servers.push(ServerProcess::start_bin(plugins, None, Path::new(&base))?);
    }
    for (name, ratio) in &settings {
        if *name == "before" {
            continue;
        }
        let file = tempfile::NamedTempFile::new()?;
        let text = match ratio {
            None => String::new(),
            Some(r) => format!(
                "[telemetry]\nendpoint = \"http://{}\"\nsample_ratio = {r}\n",
                sink.addr
            ),
        };
        std::fs::write(file.path(), text)?;
        servers.push(ServerProcess::start_with(plugins, Some(file.path()), &[])?);
        files.push(file);
    }
    let duration = Duration::from_secs(seconds);
    println!(
        "\n== traces: native invoke of calc, export off / on (100 % sampled) / on (10 %), each on a server of its own; {connections} connections calling all three in turn, {seconds} s =="
    );
    let targets: Vec<_> = servers
        .iter()
        .map(|s| (s.addr.as_str(), s.child.id(), Surface::Native))
        .collect();
    let (per_call, calls) = paired_cpu(&targets, connections, duration).await?;
    for ((name, _), us) in settings.iter().zip(&per_call) {
        println!(
            "{name:<12} server CPU per call {us:>5.1} us, {:+5.1}% vs {} ({calls} calls each)",
            (us / per_call[0] - 1.0) * 100.0,
            settings[0].0
        );
    }
    // Throughput ratios, each server alone in turn, the first rotating.
    const ROUNDS: usize = 3;
    let slice = (duration / 2).max(Duration::from_secs(2));
    println!(
        "\n== traces: native invoke / GET /health throughput on each server, {connections} connections, {ROUNDS} rounds of {} s each (medians) ==",
        slice.as_secs()
    );
    let mut ratios = vec![Vec::new(); servers.len()];
    let mut p99s = vec![Vec::new(); servers.len()];
    for round in 0..ROUNDS {
        for k in 0..servers.len() {
            let i = (k + round) % servers.len();
            let addr = &servers[i].addr;
            let health = load(addr, Surface::Health, connections, slice).await?;
            let invoke = load(addr, Surface::Native, connections, slice).await?;
            ratios[i].push(invoke.rate / health.rate);
            p99s[i].push(invoke.p99 / 1000.0);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (i, (name, _)) in settings.iter().enumerate() {
        println!(
            "{name:<12} ratio native invoke / health {:.2}, invoke p99 {:.2} ms",
            median(&mut ratios[i]),
            median(&mut p99s[i])
        );
    }
    println!(
        "exports received by the receiver: {}",
        sink.exports.load(Ordering::Relaxed)
    );
    Ok(())
}
