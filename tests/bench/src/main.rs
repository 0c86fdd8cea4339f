//! Benchmarks for toolhost. Run with `make bench` (release build).
//!
//! 1. In-process: the cost of one `dispatch` of `calc_evaluate` (schema check,
//!    fresh Store + instance, fuel + epoch + memory limits, the call), no HTTP.
//! 2. Over loopback HTTP against the real binary (see [`surfaces`]): the same
//!    call through the native API, XAgent's protocol and MCP: sequential
//!    latency, then requests/s and p99 under load, against a bare
//!    `GET /health`; the median of XAgent's `POST /get_cookie`; and each
//!    surface's server CPU time per call, paired (a server per surface).
//!
//! 3. Hot loading (see [`hotload`]): swap latency and cold start with 20
//!    plugins, compile cache cold vs warm.
//!
//! 4. Docker nodes (see [`nodes`]): first shell call (hot pool / cold), shell
//!    round trip, notebook cell, browser open.
//!
//! 5. Plugin languages (see [`languages`]): per language, component size, cold
//!    and cached load, a trivial call's latency and fuel.
//!
//! 6. Start-up (see [`startup`]): process start to the first `/health` and to
//!    every shipped plugin ready, cold, precompiled and restarted
//!    (BENCH_STARTS warm runs, default 5; BENCH_COLD_STARTS, default 1).
//!
//! 7. API tools (see [`api`]): the same request to a local httpbinx straight
//!    and through toolhost (sequential medians, throughput ratio).
//!
//! 8. Service toolkits (see [`services`]): cold start to the first answer
//!    vs a bare `docker run` + health wait; a warm call vs straight to the
//!    service.
//!
//! 9. MCP gateway (see [`gateway`]): a `tools/call` straight to a real MCP
//!    server vs through toolhost's `/mcp`, which forwards it.
//!
//! 10. MCP sessions (see [`mcp_sessions`]): what an initialize-only session
//!     costs in memory, and whether closing them returns it.
//!
//! 11. The registry on PostgreSQL (see [`registry`]): a call's cost with
//!     each store, what two replicas under load write, status changes per
//!     second, the database stopped under load (skipped without Debian's
//!     PostgreSQL: `tests/pg/ensure-postgres.sh`).
//!
//! 12. Traces (see [`traces`]): the native invoke's server CPU per call
//!     and invoke / `/health` ratio with OTLP export off, on at 100 % and
//!     at 10 % sampling.
//!
//! `toolhost-bench [invoke|auth|paired|traces|hotload|nodes|languages|startup|api|services|gateway|mcp-sessions|registry]` runs one
//! part; no argument runs all (`auth`: the cost of caller auth + metrics
//! alone; `paired`: the surfaces' CPU time per call, paired, alone).
//! `toolhost-bench soak` (`make soak`) is separate: `SOAK_MINUTES` (default
//! 10) of mixed load (see [`soak`]).
//! Bounded: each load phase runs `BENCH_SECONDS` (default 10) and only targets
//! 127.0.0.1. Settings: BENCH_SECONDS, BENCH_CONNECTIONS (50), BENCH_SAMPLES
//! (5000), BENCH_SWAPS (20), BENCH_BIN (another toolhost binary, for a
//! before/after in one run), BENCH_CONFIG (a server config file, to compare
//! engine settings).

mod api;
mod gateway;
mod hotload;
mod languages;
mod mcp_sessions;
mod nodes;
mod registry;
mod services;
mod soak;
mod startup;
mod surfaces;
mod traces;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

pub(crate) const INVOKE_BODY: &str = r#"{"params":{"expression":"2 * (3 + 4) - sqrt(16) / 2"}}"#;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds = env_num("BENCH_SECONDS", 10);
    let connections = env_num("BENCH_CONNECTIONS", 50) as usize;
    let samples = env_num("BENCH_SAMPLES", 5000) as usize;
    let plugins = root().join("target/plugins");
    anyhow::ensure!(
        plugins.join("calc.wasm").is_file(),
        "run `make plugins` first"
    );
    let part = std::env::args().nth(1).unwrap_or_default();
    if part == "hotload" {
        return hotload::run(&plugins, env_num("BENCH_SWAPS", 20) as usize).await;
    }
    if part == "nodes" {
        return nodes::run(&plugins).await;
    }
    if part == "soak" {
        return soak::run(&plugins, env_num("SOAK_MINUTES", 10)).await;
    }
    if part == "api" {
        return api::run(samples, 16, seconds).await;
    }
    if part == "services" {
        return services::run(samples).await;
    }
    if part == "gateway" {
        return gateway::run(samples).await;
    }
    if part == "mcp-sessions" {
        return mcp_sessions::run(&plugins, env_num("BENCH_MCP_SESSIONS", 10_000) as usize).await;
    }
    if part == "languages" {
        return languages::run(&plugins, samples).await;
    }
    let startup_runs = (
        env_num("BENCH_STARTS", 5) as usize,
        env_num("BENCH_COLD_STARTS", 1) as usize,
    );
    if part == "startup" {
        return tokio::task::block_in_place(|| {
            startup::run(&plugins, startup_runs.0, startup_runs.1)
        });
    }

    // The invoke figures are of calc alone: no other plugin compiling, no
    // Docker pool starting, in the same process.
    let calc_only = tempfile::tempdir()?;
    for f in ["calc.wasm", "calc.toml"] {
        std::fs::copy(plugins.join(f), calc_only.path().join(f))?;
    }
    if part == "paired" {
        return paired(calc_only.path(), connections, seconds).await;
    }
    if part == "registry" {
        return registry_part(&plugins, connections, seconds).await;
    }
    if part == "traces" {
        return traces::run(calc_only.path(), connections, seconds).await;
    }
    if part != "auth" {
        println!("== in-process dispatch of calc_evaluate (no HTTP) ==");
        in_process(calc_only.path(), samples).await?;

        let server = ServerProcess::start(calc_only.path())?;
        surfaces::run(
            &server.addr,
            samples,
            connections,
            Duration::from_secs(seconds),
        )
        .await?;
        drop(server);

        paired(calc_only.path(), connections, seconds).await?;
    }

    // The cost of caller auth + metrics on the same call.
    let off_config = tempfile::NamedTempFile::new()?;
    std::fs::write(off_config.path(), "[server]\nmetrics = false\n")?;
    let plain = ServerProcess::start_with(calc_only.path(), Some(off_config.path()), &[])?;
    const TOKEN: &str = "bench-token-0123456789";
    let secured = ServerProcess::start_with(calc_only.path(), None, &[("TOOLHOST_TOKEN", TOKEN)])?;
    surfaces::auth_metrics_cost(
        (&plain.addr, plain.child.id()),
        (&secured.addr, secured.child.id()),
        TOKEN,
        connections,
        Duration::from_secs(seconds.div_ceil(3)),
    )
    .await?;
    drop((plain, secured));
    if part != "auth" {
        traces::run(calc_only.path(), connections, seconds).await?;
    }

    if part.is_empty() {
        tokio::task::block_in_place(|| startup::run(&plugins, startup_runs.0, startup_runs.1))?;
        hotload::run(&plugins, env_num("BENCH_SWAPS", 20) as usize).await?;
        languages::run(&plugins, samples).await?;
        api::run(samples, 16, seconds).await?;
        nodes::run(&plugins).await?;
        services::run(samples).await?;
        gateway::run(samples).await?;
        mcp_sessions::run(&plugins, env_num("BENCH_MCP_SESSIONS", 10_000) as usize).await?;
        registry_part(&plugins, connections, seconds).await?;
    }
    Ok(())
}

/// The registry's part, on calc and a second plugin whose tools' statuses
/// change under the load.
async fn registry_part(plugins: &Path, connections: usize, seconds: u64) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for f in ["calc.wasm", "calc.toml", "checksum.wasm", "checksum.toml"] {
        std::fs::copy(plugins.join(f), dir.path().join(f))?;
    }
    registry::run(dir.path(), connections, seconds).await
}

/// Per-call cost of dispatch through the real wasm backend, in-process.
async fn in_process(plugins: &Path, samples: usize) -> anyhow::Result<()> {
    use toolhost::config::Config;
    let data = tempfile::tempdir()?;
    let config = match std::env::var_os("BENCH_CONFIG") {
        Some(path) => Config::from_file(Path::new(&path))?,
        None => Config::default(),
    };
    let server = toolhost::server::Server::start(&config, plugins, data.path()).await?;
    // The build that is kept (Cranelift's), with no compile beside the
    // calls: a plugin the cache lacks answers on Winch's build first.
    let waiting = Instant::now();
    while server
        .plugins
        .list()
        .iter()
        .any(|p| p.source == Some("winch"))
    {
        anyhow::ensure!(
            waiting.elapsed() < Duration::from_secs(600),
            "calc still runs its quick build after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (session, _) = server
        .dispatcher
        .sessions()
        .open(&toolhost::callers::Caller::anonymous(), Some("bench"))?;
    let input: serde_json::Value =
        serde_json::from_str::<serde_json::Value>(INVOKE_BODY)?["params"].clone();
    for _ in 0..500 {
        server
            .dispatcher
            .dispatch(&session, "calc_evaluate", input.clone(), Default::default())
            .await?;
    }
    let mut times = Vec::with_capacity(samples);
    let started = Instant::now();
    for _ in 0..samples {
        let t = Instant::now();
        server
            .dispatcher
            .dispatch(&session, "calc_evaluate", input.clone(), Default::default())
            .await?;
        times.push(t.elapsed());
    }
    let total = started.elapsed();
    let (med, p90, p99, _) = percentiles(&mut times);
    println!(
        "dispatch: median {med:.1} us, p90 {p90:.1} us, p99 {p99:.1} us; {:.0} calls/s on one task",
        samples as f64 / total.as_secs_f64()
    );
    Ok(())
}

pub(crate) fn percentiles(times: &mut [Duration]) -> (f64, f64, f64, f64) {
    times.sort();
    let at = |q: f64| {
        times[((times.len() as f64 * q) as usize).min(times.len() - 1)].as_secs_f64() * 1e6
    };
    (at(0.5), at(0.9), at(0.99), at(1.0))
}

pub(crate) type Sender = http1::SendRequest<Full<Bytes>>;

pub(crate) async fn connect(addr: &str) -> anyhow::Result<Sender> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

struct ServerProcess {
    child: Child,
    addr: String,
    _data: Option<tempfile::TempDir>,
}

impl ServerProcess {
    fn start(plugins: &Path) -> anyhow::Result<Self> {
        Self::start_with(plugins, None, &[])
    }

    /// Start with a config file (else `BENCH_CONFIG`, if set) and extra
    /// environment variables.
    fn start_with(
        plugins: &Path,
        config: Option<&Path>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let data = tempfile::tempdir()?;
        let mut server = Self::spawn(plugins, data.path(), config, env)?;
        server._data = Some(data);
        server.wait_built()?;
        Ok(server)
    }

    /// Start on `plugins` with data directory `data`; returns once the server
    /// accepts connections (after loading every plugin).
    fn start_in(plugins: &Path, data: &Path) -> anyhow::Result<Self> {
        Self::spawn(plugins, data, None, &[])
    }

    fn spawn(
        plugins: &Path,
        data: &Path,
        config: Option<&Path>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        Self::spawn_bin(plugins, data, config, env, None)
    }

    /// [`ServerProcess::start_with`] of binary `bin` (a before/after side
    /// by side in one run).
    fn start_bin(plugins: &Path, config: Option<&Path>, bin: &Path) -> anyhow::Result<Self> {
        let data = tempfile::tempdir()?;
        let mut server = Self::spawn_bin(plugins, data.path(), config, &[], Some(bin))?;
        server._data = Some(data);
        server.wait_built()?;
        Ok(server)
    }

    /// Wait until every plugin runs its optimised build: a server serves a
    /// plugin its compile cache lacks on Winch's quick build first and
    /// compiles Cranelift's behind it (docs/plugins.md), and what a bench
    /// of calls measures is the build that is kept, with no compile beside
    /// it. A server that keeps `GET /plugins` from an anonymous caller is
    /// not waited for.
    fn wait_built(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(600);
        while let Some(quick) = startup::quick_builds(&self.addr) {
            if quick == 0 {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{quick} plugins still run their quick build after 10 minutes"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    fn spawn_bin(
        plugins: &Path,
        data: &Path,
        config: Option<&Path>,
        env: &[(&str, &str)],
        bin: Option<&Path>,
    ) -> anyhow::Result<Self> {
        // BENCH_BIN: another build to measure (a before/after in one run).
        let bin = bin
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("BENCH_BIN").map(PathBuf::from))
            .unwrap_or_else(|| root().join("target/release/toolhost"));
        anyhow::ensure!(
            bin.is_file(),
            "no {}: run `cargo build --release -p toolhost` first",
            bin.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let addr = format!("127.0.0.1:{port}");
        let mut cmd = Command::new(&bin);
        let config = config
            .map(|p| p.as_os_str().to_owned())
            .or_else(|| std::env::var_os("BENCH_CONFIG"));
        cmd.arg("serve")
            .env_remove("TOOLHOST_TOKEN")
            .envs(env.iter().copied());
        if let Some(config) = config {
            cmd.arg("--config").arg(config);
        }
        let child = cmd
            .args(["--bind", &addr])
            .arg("--plugins")
            .arg(plugins)
            .arg("--data")
            .arg(data)
            .env("TOOLHOST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .context("failed to start toolhost")?;
        // The server answers at once; measure only once every plugin loaded.
        let deadline = Instant::now() + Duration::from_secs(300);
        while !startup::is_ready(&addr) {
            anyhow::ensure!(Instant::now() < deadline, "the server did not get ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(ServerProcess {
            child,
            addr,
            _data: None,
        })
    }

    /// How many tools `GET /tools` lists.
    async fn tool_count(&self) -> anyhow::Result<usize> {
        Ok(tool_ids(&self.addr).await?.len())
    }
}

/// The ids of the tools `GET /tools` lists.
pub(crate) async fn tool_ids(addr: &str) -> anyhow::Result<Vec<String>> {
    let mut sender = connect(addr).await?;
    let req = Request::get("/tools")
        .header("host", addr)
        .body(Full::new(Bytes::new()))?;
    let resp = sender.send_request(req).await?;
    let body = resp.into_body().collect().await?.to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&body)?;
    Ok(v["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["tool_id"].as_str().map(str::to_owned))
        .collect())
}

/// POST a JSON `body` to `path` in `session` on a new connection; fails
/// unless the answer is a success.
pub(crate) async fn post_json(
    addr: &str,
    path: &str,
    session: &str,
    body: String,
) -> anyhow::Result<serde_json::Value> {
    let mut sender = connect(addr).await?;
    let req = Request::post(path)
        .header("host", addr)
        .header("content-type", "application/json")
        .header("x-toolhost-session", session)
        .body(Full::new(Bytes::from(body)))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let bytes = resp.into_body().collect().await?.to_bytes();
    if !status.is_success() {
        bail!("{path}: {status}: {}", String::from_utf8_lossy(&bytes));
    }
    Ok(serde_json::from_slice(&bytes)?)
}

/// POST `body` to `path` on a new connection; the version header of a
/// successful answer.
pub(crate) async fn request_version(
    addr: &str,
    path: &str,
    body: &'static str,
) -> anyhow::Result<Option<String>> {
    let mut sender = connect(addr).await?;
    let req = Request::post(path)
        .header("host", addr)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(body.as_bytes())))?;
    let resp = sender.send_request(req).await?;
    let version = resp
        .headers()
        .get("x-toolhost-plugin-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let ok = resp.status().is_success();
    let _ = resp.into_body().collect().await?;
    Ok(version.filter(|_| ok))
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Graceful: the server removes its Docker nodes on SIGTERM.
        toolhost_e2e::stop_gracefully(&mut self.child, Duration::from_secs(15));
    }
}

/// The surfaces' cost paired: a server per surface (see
/// [`surfaces::paired_surfaces`]).
async fn paired(plugins: &Path, connections: usize, seconds: u64) -> anyhow::Result<()> {
    let servers = surfaces::SURFACES
        .iter()
        .map(|_| ServerProcess::start(plugins))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let targets: Vec<_> = servers
        .iter()
        .map(|s| (s.addr.as_str(), s.child.id()))
        .collect();
    surfaces::paired_surfaces(&targets, connections, Duration::from_secs(seconds)).await
}
