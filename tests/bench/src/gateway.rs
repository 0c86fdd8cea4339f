//! toolhost as an MCP gateway: the same `tools/call` (the reference
//! server's `echo`) by an MCP client (rmcp's) straight to
//! `@modelcontextprotocol/server-everything` on 127.0.0.1, and through
//! toolhost's `/mcp`, which forwards it to that server as a mounted toolkit.
//! Sequential, one session each, medians.

use std::time::Instant;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;

use crate::{ServerProcess, percentiles};
use toolhost_e2e::services::Service;

async fn client(
    url: String,
) -> anyhow::Result<rmcp::service::RunningService<rmcp::RoleClient, ()>> {
    Ok(
        ().serve(StreamableHttpClientTransport::from_uri(url))
            .await?,
    )
}

pub async fn run(samples: usize) -> anyhow::Result<()> {
    if std::process::Command::new("npm")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("\n(no npm: MCP gateway benchmark skipped)");
        return Ok(());
    }
    let everything = tokio::task::block_in_place(Service::everything);
    let plugins = tempfile::tempdir()?;
    let folder = plugins.path().join("every");
    std::fs::create_dir_all(&folder)?;
    std::fs::write(
        folder.join("every.toml"),
        format!(
            "[mcp]\nurl = \"{}\"\nallow = [\"{}\"]\n",
            everything.url("/mcp"),
            everything.host()
        ),
    )?;
    let server = ServerProcess::start(plugins.path())?;
    let direct = client(everything.url("/mcp")).await?;
    let through = client(format!("http://{}/mcp", server.addr)).await?;
    let call = |name: &'static str| {
        let mut params = CallToolRequestParams::new(name);
        params.arguments = serde_json::json!({"message": "bench"}).as_object().cloned();
        params
    };
    println!(
        "\n== MCP gateway: tools/call echo, straight to server-everything vs through toolhost =="
    );
    let samples = samples.min(2000);
    let (mut d, mut t) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for i in 0..samples + 100 {
        let started = Instant::now();
        direct.peer().call_tool(call("echo")).await?;
        if i >= 100 {
            d.push(started.elapsed());
        }
        let started = Instant::now();
        through.peer().call_tool(call("every_echo")).await?;
        if i >= 100 {
            t.push(started.elapsed());
        }
    }
    let (d50, _, d99, _) = percentiles(&mut d);
    let (t50, _, t99, _) = percentiles(&mut t);
    println!(
        "straight to the server   median {d50:7.1} us   p99 {d99:7.1} us ({samples} sequential)"
    );
    println!("through toolhost         median {t50:7.1} us   p99 {t99:7.1} us");
    println!("gateway overhead per call: median {:.1} us", t50 - d50);
    drop((direct, through, server, everything));
    stdio_start()
}

/// A stdio server's start in a node on a warm image: a server process with
/// the reference server as a command toolkit, from spawn to ready (container
/// created and started, Node.js started, initialize, tools/list).
fn stdio_start() -> anyhow::Result<()> {
    let engine = std::process::Command::new("docker")
        .arg("info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !engine {
        println!("(no Docker engine: the stdio start is not measured)");
        return Ok(());
    }
    let bin = toolhost_e2e::services::mcp_servers_bin();
    let install = bin.parent().and_then(|p| p.parent()).expect("the install");
    let plugins = tempfile::tempdir()?;
    let folder = plugins.path().join("evs");
    std::fs::create_dir_all(&folder)?;
    std::fs::write(
        folder.join("evs.toml"),
        format!(
            "[mcp]\ncommand = [\"node\", \"/opt/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js\", \"stdio\"]\nmount = \"{}\"\n",
            install.display()
        ),
    )?;
    let mut times = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let server = ServerProcess::start(plugins.path())?;
        times.push(started.elapsed());
        drop(server);
    }
    let (median, ..) = percentiles(&mut times);
    println!(
        "stdio server in a node (warm image), spawn to ready: median {:.0} ms (3 runs)",
        median / 1e3
    );
    Ok(())
}
