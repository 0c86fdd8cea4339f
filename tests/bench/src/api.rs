//! An API tool's cost: the same request to the same local service (httpbinx,
//! FastAPI on uvicorn, one process) sent straight to it and through
//! toolhost's native invoke, both on kept-alive connections. Sequential
//! medians (the overhead per call) and throughput under load, in alternating
//! rounds so both see the same machine.

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
}

struct Target {
    service: String,
    toolhost: String,
}

impl Target {
    fn addr(&self, path: Path) -> &str {
        match path {
            Path::Direct => &self.service,
            Path::Toolhost => &self.toolhost,
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
    let server = ServerProcess::start(plugins.path())?;
    let target = Target {
        service: service.host(),
        toolhost: server.addr.clone(),
    };
    println!(
        "== API tool: GET /get of httpbinx (uvicorn) direct vs through toolhost, kept-alive connections =="
    );
    let samples = samples.min(3000);
    let mut direct = Vec::with_capacity(samples);
    let mut through = Vec::with_capacity(samples);
    let mut d = connect(target.addr(Path::Direct)).await?;
    let mut t = connect(target.addr(Path::Toolhost)).await?;
    for _ in 0..200 {
        call(&mut d, target.request(Path::Direct)).await?;
        call(&mut t, target.request(Path::Toolhost)).await?;
    }
    for _ in 0..samples {
        let started = Instant::now();
        call(&mut d, target.request(Path::Direct)).await?;
        direct.push(started.elapsed());
        let started = Instant::now();
        call(&mut t, target.request(Path::Toolhost)).await?;
        through.push(started.elapsed());
    }
    let (d50, _, d99, _) = percentiles(&mut direct);
    let (t50, _, t99, _) = percentiles(&mut through);
    println!("direct           median {d50:7.1} us   p99 {d99:7.1} us ({samples} sequential)");
    println!("through toolhost median {t50:7.1} us   p99 {t99:7.1} us");
    println!("overhead per call: median {:.1} us", t50 - d50);

    let round = Duration::from_secs(seconds.div_ceil(4).max(1));
    let (mut direct_rate, mut through_rate) = (0.0, 0.0);
    for i in 0..4 {
        let path = if i % 2 == 0 {
            Path::Direct
        } else {
            Path::Toolhost
        };
        let rate = load(&target, path, connections, round).await?;
        match path {
            Path::Direct => direct_rate += rate / 2.0,
            Path::Toolhost => through_rate += rate / 2.0,
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

async fn load(
    target: &Target,
    path: Path,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<f64> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let mut sender = connect(target.addr(path)).await?;
        let stop = stop.clone();
        let make = {
            let host = target.addr(path).to_owned();
            let t = Target {
                service: host.clone(),
                toolhost: host,
            };
            move || t.request(path)
        };
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if call(&mut sender, make()).await.is_ok() {
                    n += 1;
                }
            }
            n
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut calls = 0;
    for t in tasks {
        calls += t.await?;
    }
    Ok(calls as f64 / started.elapsed().as_secs_f64())
}
