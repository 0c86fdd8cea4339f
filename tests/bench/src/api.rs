//! An API tool's cost: the same request to the same local service (httpbinx,
//! FastAPI on uvicorn, one process) sent straight to it and through
//! toolhost's native invoke, both on kept-alive connections. Sequential
//! medians (the overhead per call), quiet and with the machine loaded, and
//! throughput under load, in alternating rounds so both see the same
//! machine.
//!
//! Where the added time goes: the same sequence also times a request toolhost
//! answers without a tool (`GET /health`: the HTTP hop and the router) and
//! a mock tool's invoke (the surface and dispatch: body parsing, schema
//! validation, admission, statistics, rendering, but no upstream), and reads
//! the server's CPU per API call from `/proc`; what is left of the overhead
//! is the outbound leg (the request built and sent on the pooled connection,
//! the answer read and turned into content).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;

use super::{Sender, ServerProcess, connect, percentiles};
use toolhost_e2e::services::{Kind, Service};

#[derive(Clone, Copy)]
enum Path {
    Direct,
    Toolhost,
    /// toolhost's liveness route: the HTTP hop and the router alone.
    Health,
    /// A mock tool: the surface and dispatch without an upstream.
    Mock,
}

struct Target {
    service: String,
    toolhost: String,
}

impl Target {
    fn addr(&self, path: Path) -> &str {
        match path {
            Path::Direct => &self.service,
            Path::Toolhost | Path::Health | Path::Mock => &self.toolhost,
        }
    }

    fn request(&self, path: Path) -> Request<Full<Bytes>> {
        let builder = Request::builder().header("host", self.addr(path));
        match path {
            Path::Direct => builder.uri("/get").body(Full::new(Bytes::new())),
            Path::Toolhost => builder
                .method("POST")
                .uri("/tools/hbx_get_get_get/invoke")
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from_static(br#"{"params":{}}"#))),
            Path::Health => builder.uri("/health").body(Full::new(Bytes::new())),
            Path::Mock => builder
                .method("POST")
                .uri("/tools/mk_get/invoke")
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from_static(br#"{"params":{}}"#))),
        }
        .expect("a request")
    }
}

async fn call(sender: &mut Sender, request: Request<Full<Bytes>>) -> anyhow::Result<()> {
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    anyhow::ensure!(
        status.is_success(),
        "{status}: {}",
        String::from_utf8_lossy(&body)
    );
    Ok(())
}

pub async fn run(samples: usize, connections: usize, seconds: u64) -> anyhow::Result<()> {
    let service = tokio::task::block_in_place(|| Service::start(Kind::Httpbinx));
    let plugins = tempfile::tempdir()?;
    let folder = plugins.path().join("hbx");
    std::fs::create_dir_all(&folder)?;
    std::fs::write(
        folder.join("hbx.toml"),
        format!(
            "[api]\nspec = \"{}\"\nbase_url = \"{}\"\nallow = [\"{}\"]\npaths = [\"/get\"]\n",
            service.url("/openapi.json"),
            service.url(""),
            service.host()
        ),
    )?;
    // A mock tool answering about what httpbinx's /get does.
    let mock = plugins.path().join("mk");
    std::fs::create_dir_all(&mock)?;
    std::fs::write(
        mock.join("mk.toml"),
        "[mock]\n[[mock.tools]]\nname = \"get\"\ndescription = \"A canned answer.\"\n\
         input_schema = { type = \"object\", properties = {} }\n\
         answer = { args = {}, headers = { host = \"127.0.0.1\", accept = \"*/*\" }, origin = \"127.0.0.1\", url = \"http://127.0.0.1/get\" }\n",
    )?;
    let server = ServerProcess::start(plugins.path())?;
    let pid = server.child.id();
    let target = Target {
        service: service.host(),
        toolhost: server.addr.clone(),
    };
    println!(
        "== API tool: GET /get of httpbinx (uvicorn) direct vs through toolhost, kept-alive connections =="
    );
    let samples = samples.min(3000);
    let mut conns = Vec::new();
    for path in [Path::Direct, Path::Toolhost, Path::Health, Path::Mock] {
        let mut sender = connect(target.addr(path)).await?;
        for _ in 0..200 {
            call(&mut sender, target.request(path)).await?;
        }
        conns.push((path, sender));
    }
    let quiet = sequential(&target, &mut conns, samples).await?;
    // The server's CPU per API call, alone.
    let before = super::surfaces::cpu_seconds(pid)?;
    let (path, sender) = &mut conns[1];
    for _ in 0..samples {
        call(sender, target.request(*path)).await?;
    }
    let cpu_us = (super::surfaces::cpu_seconds(pid)? - before) * 1e6 / samples as f64;
    let [direct, through, health, mock] = quiet;
    println!("sequential medians ({samples} each, interleaved), quiet machine:");
    println!("  direct to the service         {direct:7.1} us");
    println!(
        "  through toolhost (API tool)   {through:7.1} us   overhead {:6.1} us",
        through - direct
    );
    println!("  toolhost GET /health         {health:7.1} us   (the HTTP hop and the router)");
    println!(
        "  toolhost mock tool invoke     {mock:7.1} us   (+{:.1} us over the hop: surface and dispatch)",
        mock - health
    );
    println!(
        "  the outbound leg              {:7.1} us   (API tool minus mock tool: the upstream request, pooled connection, answer to content)",
        through - mock
    );
    println!("  server CPU per API call       {cpu_us:7.1} us");
    // The same, with the machine loaded: toolhost and the service busy with
    // other callers' API calls.
    let stop = Arc::new(AtomicBool::new(false));
    let background = tokio::spawn({
        let stop = stop.clone();
        let host = target.toolhost.clone();
        async move { load_until(host, Path::Toolhost, connections / 4, stop).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let loaded = sequential(&target, &mut conns, samples / 2).await?;
    stop.store(true, Ordering::Relaxed);
    let background = background.await??;
    let [direct, through, health, mock] = loaded;
    println!(
        "sequential medians, loaded ({} connections calling the API tool meanwhile, {background:.0} req/s):",
        connections / 4
    );
    println!(
        "  direct {direct:.1} us, through {through:.1} us, overhead {:.1} us; hop {health:.1} us, mock {mock:.1} us, outbound leg {:.1} us",
        through - direct,
        through - mock
    );

    let round = Duration::from_secs(seconds.div_ceil(4).max(1));
    let (mut direct_rate, mut through_rate) = (0.0, 0.0);
    for i in 0..4 {
        let path = if i % 2 == 0 {
            Path::Direct
        } else {
            Path::Toolhost
        };
        let rate = load(&target, path, connections, round).await?;
        if i % 2 == 0 {
            direct_rate += rate / 2.0;
        } else {
            through_rate += rate / 2.0;
        }
    }
    println!(
        "under load ({connections} connections, 2 alternating rounds of {} s each): direct {direct_rate:.0} req/s, through toolhost {through_rate:.0} req/s, ratio {:.2}",
        round.as_secs(),
        through_rate / direct_rate
    );
    drop(server);
    drop(service);
    Ok(())
}

/// Median latency of each of `conns`' paths over `samples` rounds, the
/// paths interleaved within each round.
async fn sequential(
    target: &Target,
    conns: &mut [(Path, Sender)],
    samples: usize,
) -> anyhow::Result<[f64; 4]> {
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(samples); conns.len()];
    for _ in 0..samples {
        for (i, (path, sender)) in conns.iter_mut().enumerate() {
            let started = Instant::now();
            call(sender, target.request(*path)).await?;
            times[i].push(started.elapsed());
        }
    }
    let mut medians = [0.0; 4];
    for (m, t) in medians.iter_mut().zip(times.iter_mut()) {
        *m = percentiles(t).0;
    }
    Ok(medians)
}

/// Call `path` on `connections` connections until `stop`; returns req/s.
async fn load_until(
    host: String,
    path: Path,
    connections: usize,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..connections.max(1) {
        let mut sender = connect(&host).await?;
        let stop = stop.clone();
        let t = Target {
            service: host.clone(),
            toolhost: host.clone(),
        };
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if call(&mut sender, t.request(path)).await.is_ok() {
                    n += 1;
                }
            }
            n
        }));
    }
    let mut calls = 0;
    for t in tasks {
        calls += t.await?;
    }
    Ok(calls as f64 / started.elapsed().as_secs_f64())
}

/// Throughput of `path` on `connections` connections for `duration`.
async fn load(
    target: &Target,
    path: Path,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<f64> {
    let stop = Arc::new(AtomicBool::new(false));
    let running = tokio::spawn(load_until(
        target.addr(path).to_owned(),
        path,
        connections,
        stop.clone(),
    ));
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    running.await?
}
