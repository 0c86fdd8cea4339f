//! Service toolkits against a bare `docker run` of the same image and
//! service: the cold start to the first answer (toolhost: a new session's
//! first call; bare: `docker run` + polling the health path), and a warm
//! call's latency through toolhost vs straight to the service (the bare one
//! runs with `--network host` on 127.0.0.1 so the host can reach it; the
//! toolhost one has no network and is reached in its namespace).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;

use crate::{ServerProcess, connect, percentiles, post_json};

/// The service (`tests/fixtures/services/tiny.py`): its POST /ok echoes.
const ECHO: &str = include_str!("../../fixtures/services/tiny.py");

const RUNS: usize = 5;

fn docker(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("docker")
        .args(args)
        .stderr(Stdio::inherit())
        .output()?;
    anyhow::ensure!(out.status.success(), "docker {args:?} failed");
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Poll `GET /health` on 127.0.0.1:`port` until it answers 200.
async fn wait_health(port: u16, within: Duration) -> anyhow::Result<()> {
    let addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(mut sender) = connect(&addr).await {
            let request = Request::get("/health")
                .header("host", &addr)
                .body(Full::new(Bytes::new()))?;
            if let Ok(r) = sender.send_request(request).await
                && r.status().is_success()
            {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("the bare service did not answer within {within:?}")
}

pub async fn run(samples: usize) -> anyhow::Result<()> {
    let engine = Command::new("docker")
        .arg("info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !engine {
        println!("\n(no Docker engine: service benchmarks skipped)");
        return Ok(());
    }
    let plugins = tempfile::tempdir()?;
    let folder = plugins.path().join("echo");
    std::fs::create_dir_all(&folder)?;
    std::fs::write(folder.join("echo.py"), ECHO)?;
    std::fs::write(
        folder.join("echo.toml"),
        "[docker]\nimage = \"toolhost-node:latest\"\ncommand = [\"python3\", \"-u\", \"/toolkit/echo.py\"]\n\
         internal_port = 9000\nscheduling = \"cold\"\nmax_containers = 16\ncpus = 0.5\nmemory_mb = 128\n\
         [[tools]]\nname = \"ok\"\ndescription = \"Echo.\"\ninput_schema = { type = \"object\" }\n",
    )?;
    let data = tempfile::tempdir()?;
    let server = ServerProcess::start_in(plugins.path(), data.path())?;
    let call = |session: String| {
        let addr = server.addr.clone();
        async move {
            post_json(
                &addr,
                "/tools/echo_ok/invoke",
                &session,
                "{\"params\":{\"n\":1}}".into(),
            )
            .await
        }
    };
    println!("\n== Service toolkits: a Python http.server on the node image ==");

    let (mut cold, mut bare, mut isolated, mut shared) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // What a network namespace of its own costs `docker run` here (the
    // bare service below shares the host's, so the host can reach it).
    for _ in 0..RUNS {
        for (net, times) in [("none", &mut isolated), ("host", &mut shared)] {
            let t = Instant::now();
            let id = docker(&[
                "run",
                "-d",
                "--network",
                net,
                "--init",
                "toolhost-node:latest",
                "sleep",
                "60",
            ])?;
            times.push(t.elapsed());
            docker(&["rm", "-f", &id])?;
        }
    }
    let mount = format!("{}:/toolkit:ro", folder.display());
    for i in 0..RUNS {
        let t = Instant::now();
        call(format!("cold-{i}")).await?;
        cold.push(t.elapsed());
        // Closed at once: its CPUs count against the host's allocation.
        close(&server.addr, &format!("cold-{i}")).await?;

        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let t = Instant::now();
        let id = docker(&[
            "run",
            "-d",
            "--network",
            "host",
            // The same limits and hardening toolhost gives its containers.
            "--init",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--memory",
            "128m",
            "--memory-swap",
            "128m",
            "--cpus",
            "0.5",
            "--pids-limit",
            "256",
            "-e",
            &format!("PORT={port}"),
            "-v",
            &mount,
            "toolhost-node:latest",
            "python3",
            "-u",
            "/toolkit/echo.py",
        ])?;
        let up = wait_health(port, Duration::from_secs(30)).await;
        bare.push(t.elapsed());
        if i + 1 < RUNS {
            docker(&["rm", "-f", &id])?;
            up?;
            continue;
        }
        up?;
        // The last bare container stays for the warm comparison.
        let result = warm(&server.addr, port, samples).await;
        docker(&["rm", "-f", &id])?;
        result?;
    }
    let (c50, ..) = percentiles(&mut cold);
    let (b50, ..) = percentiles(&mut bare);
    let (i50, ..) = percentiles(&mut isolated);
    let (s50, ..) = percentiles(&mut shared);
    println!(
        "docker run -d alone: --network none median {:.0} ms, --network host median {:.0} ms (a network namespace of its own: +{:.0} ms)",
        i50 / 1e3,
        s50 / 1e3,
        (i50 - s50) / 1e3
    );
    println!(
        "cold start to the first answer: toolhost (new session, --network none) median {:.0} ms, bare docker run --network host + health wait median {:.0} ms ({RUNS} each), ratio {:.2}",
        c50 / 1e3,
        b50 / 1e3,
        c50 / b50
    );
    drop(server);
    Ok(())
}

async fn close(addr: &str, session: &str) -> anyhow::Result<()> {
    let mut sender = connect(addr).await?;
    let r = sender
        .send_request(
            Request::delete(format!("/sessions/{session}"))
                .header("host", addr)
                .body(Full::new(Bytes::new()))?,
        )
        .await?;
    anyhow::ensure!(r.status().is_success(), "closing {session}: {}", r.status());
    Ok(())
}

/// Sequential warm calls: through toolhost (one session's container) and
/// straight to the bare container on 127.0.0.1:`port`.
async fn warm(toolhost: &str, port: u16, samples: usize) -> anyhow::Result<()> {
    let samples = samples.min(2000);
    let direct_addr = format!("127.0.0.1:{port}");
    // The same quick acknowledgements toolhost's own link asks for (see
    // `toolhost::nodes::QuickAck`): without them this Python server's
    // kept-alive answers stall 40 ms on either path.
    let stream = tokio::net::TcpStream::connect(&direct_addr).await?;
    stream.set_nodelay(true)?;
    let (mut direct, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(
        toolhost::nodes::QuickAck(stream),
    ))
    .await?;
    tokio::spawn(conn);
    let mut through = connect(toolhost).await?;
    let body = Bytes::from_static(b"{\"params\":{\"n\":1}}");
    let direct_body = Bytes::from_static(b"{\"n\":1}");
    let (mut d, mut t) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for i in 0..samples + 100 {
        let started = Instant::now();
        let r = direct
            .send_request(
                Request::post("/ok")
                    .header("host", &direct_addr)
                    .header("content-type", "application/json")
                    .body(Full::new(direct_body.clone()))?,
            )
            .await?;
        anyhow::ensure!(r.status().is_success());
        r.into_body().collect().await?;
        if i >= 100 {
            d.push(started.elapsed());
        }
        let started = Instant::now();
        let r = through
            .send_request(
                Request::post("/tools/echo_ok/invoke")
                    .header("host", toolhost)
                    .header("content-type", "application/json")
                    .header("x-toolhost-session", "warm")
                    .body(Full::new(body.clone()))?,
            )
            .await?;
        anyhow::ensure!(r.status().is_success());
        r.into_body().collect().await?;
        if i >= 100 {
            t.push(started.elapsed());
        }
    }
    let (d50, _, d99, _) = percentiles(&mut d);
    let (t50, _, t99, _) = percentiles(&mut t);
    println!(
        "warm call, direct to the service  median {d50:7.1} us   p99 {d99:7.1} us ({samples} sequential)"
    );
    println!("warm call, through toolhost       median {t50:7.1} us   p99 {t99:7.1} us");
    println!("overhead per warm call: median {:.1} us", t50 - d50);
    Ok(())
}
