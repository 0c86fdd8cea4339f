//! Docker node benchmarks against the real binary and the real node image:
//! a new session's first shell call (cold start, and with a warm hot pool),
//! the shell round trip, a trivial notebook cell and a browser open of a
//! page served on 127.0.0.1. Skipped when no Docker engine answers.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::{ServerProcess, percentiles, post_json};

pub async fn run(plugins: &Path) -> anyhow::Result<()> {
    let engine = std::process::Command::new("docker")
        .args(["info"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !engine {
        println!("\n(no Docker engine: node benchmarks skipped; `make docker node-image`)");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    for (toolkit, edit) in [
        ("shell", None),
        ("notebook", None),
        (
            "browser",
            Some(("network = \"none\"", "network = \"host\"")),
        ),
    ] {
        let dst = dir.path().join(toolkit);
        std::fs::create_dir_all(&dst)?;
        std::fs::copy(
            plugins.join(toolkit).join("driver.py"),
            dst.join("driver.py"),
        )?;
        let mut manifest =
            std::fs::read_to_string(plugins.join(toolkit).join(format!("{toolkit}.toml")))?;
        if let Some((from, to)) = edit {
            manifest = manifest.replace(from, to);
        }
        std::fs::write(dst.join(format!("{toolkit}.toml")), manifest)?;
    }
    let data = tempfile::tempdir()?;
    let server = ServerProcess::start_in(dir.path(), data.path())?;
    let addr = server.addr.clone();
    let shell = |session: &str, command: &str| {
        let body = serde_json::json!({"params": {"command": command}}).to_string();
        let (addr, session) = (addr.clone(), session.to_owned());
        async move { post_json(&addr, "/tools/shell_run/invoke", &session, body).await }
    };

    println!("\n== Docker nodes ==");
    // Let the hot pool fill, then: first call of new sessions (pooled).
    tokio::time::sleep(Duration::from_secs(8)).await;
    let mut hot = Vec::new();
    for i in 0..5 {
        let t = Instant::now();
        shell(&format!("hot-{i}"), "true").await?;
        hot.push(t.elapsed());
        tokio::time::sleep(Duration::from_secs(4)).await; // refill
    }
    let (med, _, _, max) = percentiles(&mut hot);
    println!(
        "first shell call, warm hot pool: median {:.0} ms, max {:.0} ms (5 sessions)",
        med / 1e3,
        max / 1e3
    );

    // Cold scheduling: a second server whose shell toolkit keeps no pool.
    {
        let cold_dir = tempfile::tempdir()?;
        let dst = cold_dir.path().join("shell");
        std::fs::create_dir_all(&dst)?;
        std::fs::copy(dir.path().join("shell/driver.py"), dst.join("driver.py"))?;
        let manifest = std::fs::read_to_string(dir.path().join("shell/shell.toml"))?
            .replace("scheduling = \"hot\"", "scheduling = \"cold\"");
        std::fs::write(dst.join("shell.toml"), manifest)?;
        let cold_data = tempfile::tempdir()?;
        let cold_server = ServerProcess::start_in(cold_dir.path(), cold_data.path())?;
        let mut cold = Vec::new();
        for i in 0..5 {
            let body = serde_json::json!({"params": {"command": "true"}}).to_string();
            let t = Instant::now();
            post_json(
                &cold_server.addr,
                "/tools/shell_run/invoke",
                &format!("cold-{i}"),
                body,
            )
            .await?;
            cold.push(t.elapsed());
        }
        let (med, _, _, max) = percentiles(&mut cold);
        println!(
            "first shell call, cold (container create + start + driver): median {:.0} ms, max {:.0} ms",
            med / 1e3,
            max / 1e3
        );
    }

    let mut rt = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        shell("hot-0", "true").await?;
        rt.push(t.elapsed());
    }
    let (med, _, p99, _) = percentiles(&mut rt);
    println!(
        "shell round trip (`true`, over HTTP): median {:.2} ms, p99 {:.2} ms",
        med / 1e3,
        p99 / 1e3
    );

    let cell = |code: &str| {
        let body = serde_json::json!({"params": {"code": code}}).to_string();
        let addr = addr.clone();
        async move { post_json(&addr, "/tools/notebook_execute/invoke", "nb", body).await }
    };
    let t = Instant::now();
    cell("1+1").await?;
    println!(
        "notebook first cell (container + kernel start): {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let mut cells = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        cell("1+1").await?;
        cells.push(t.elapsed());
    }
    let (med, _, p99, _) = percentiles(&mut cells);
    println!(
        "notebook trivial cell `1+1`: median {:.1} ms, p99 {:.1} ms",
        med / 1e3,
        p99 / 1e3
    );

    let page = serve_page();
    let open = || {
        let body = serde_json::json!({"params": {"url": page}}).to_string();
        let addr = addr.clone();
        async move { post_json(&addr, "/tools/browser_open/invoke", "br", body).await }
    };
    let t = Instant::now();
    open().await?;
    println!(
        "browser first open (container + Chromium start): {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let mut opens = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        open().await?;
        opens.push(t.elapsed());
    }
    let (med, _, _, max) = percentiles(&mut opens);
    println!(
        "browser open of a local page: median {:.0} ms, max {:.0} ms",
        med / 1e3,
        max / 1e3
    );
    Ok(())
}

/// A tiny page on 127.0.0.1, served from a thread for the rest of the run.
fn serve_page() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let html = "<html><head><title>Bench</title></head><body><h1>Bench page</h1><p>Text.</p><a href=\"/x\">x</a></body></html>";
        for mut stream in listener.incoming().flatten().take(1000) {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}",
                html.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}/")
}
