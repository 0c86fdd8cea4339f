//! The same `calc_evaluate` call through each API surface, in one run: the
//! native REST API, the XAgent ToolServer protocol and MCP (streamable HTTP,
//! a session per connection). For each: sequential latency on one
//! connection, then requests/s and latency percentiles under load. Plus the
//! median of `POST /get_cookie` (XAgent's session opener).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;

use super::{INVOKE_BODY, Sender, connect, percentiles};

const EXPRESSION: &str = "2 * (3 + 4) - sqrt(16) / 2";

/// What a 2026-07-28 request carries in `_meta` instead of a session.
const STATELESS_META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"}}"#;

/// The bearer token every request carries, when the server wants one.
static TOKEN: OnceLock<std::sync::Mutex<Option<String>>> = OnceLock::new();

fn token() -> Option<String> {
    TOKEN.get_or_init(Default::default).lock().unwrap().clone()
}

pub(crate) fn set_token(token: Option<&str>) {
    *TOKEN.get_or_init(Default::default).lock().unwrap() = token.map(str::to_owned);
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Surface {
    Health,
    Native,
    XAgent,
    /// MCP 2025-11-25: a session per connection (initialize, then calls).
    Mcp,
    /// MCP 2026-07-28: no session; each request carries its version.
    McpStateless,
}

impl Surface {
    fn name(self) -> &'static str {
        match self {
            Surface::Health => "GET /health",
            Surface::Native => "native invoke",
            Surface::XAgent => "XAgent execute_tool",
            Surface::Mcp => "MCP tools/call",
            Surface::McpStateless => "MCP 2026-07-28 call",
        }
    }
}

/// One connection speaking one surface, with its session.
pub(crate) struct Conn {
    sender: Sender,
    addr: String,
    surface: Surface,
    /// XAgent: the `node_id` cookie; MCP: the `Mcp-Session-Id`.
    session: Option<String>,
    next_id: u64,
}

impl Conn {
    pub(crate) async fn open(addr: &str, surface: Surface) -> anyhow::Result<Conn> {
        let mut conn = Conn {
            sender: connect(addr).await?,
            addr: addr.to_owned(),
            surface,
            session: None,
            next_id: 1,
        };
        match surface {
            Surface::XAgent => {
                let (headers, _) = conn.post("/get_cookie", &[], Bytes::new()).await?;
                let cookie = headers
                    .get_all("set-cookie")
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .find_map(|v| v.split(';').next().filter(|c| c.starts_with("node_id=")))
                    .context("no node_id cookie")?
                    .to_owned();
                conn.session = Some(cookie);
            }
            Surface::Mcp => {
                let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;
                let (headers, _) = conn.mcp(Bytes::from_static(init.as_bytes())).await?;
                let id = headers
                    .get("mcp-session-id")
                    .and_then(|v| v.to_str().ok())
                    .context("no Mcp-Session-Id")?
                    .to_owned();
                conn.session = Some(id);
                let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
                conn.mcp(Bytes::from_static(note.as_bytes())).await?;
            }
            Surface::Health | Surface::Native | Surface::McpStateless => {}
        }
        Ok(conn)
    }

    async fn send(
        &mut self,
        req: Request<Full<Bytes>>,
    ) -> anyhow::Result<(hyper::HeaderMap, Bytes)> {
        self.sender.ready().await?;
        let resp = self.sender.send_request(req).await?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await?.to_bytes();
        if !status.is_success() {
            bail!("{status}: {}", String::from_utf8_lossy(&body));
        }
        Ok((headers, body))
    }

    async fn post(
        &mut self,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> anyhow::Result<(hyper::HeaderMap, Bytes)> {
        let mut req = Request::post(path)
            .header("host", &self.addr)
            .header("content-type", "application/json");
        if let Some(token) = token() {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        self.send(req.body(Full::new(body))?).await
    }

    async fn mcp(&mut self, body: Bytes) -> anyhow::Result<(hyper::HeaderMap, Bytes)> {
        let session = self.session.clone();
        let mut headers = vec![("accept", "application/json, text/event-stream")];
        if let Some(s) = &session {
            headers.push(("mcp-session-id", s));
            headers.push(("mcp-protocol-version", "2025-11-25"));
        }
        self.post("/mcp", &headers, body).await
    }

    /// One `calc_evaluate` call (or health check); fails unless it succeeded.
    pub(crate) async fn call(&mut self) -> anyhow::Result<()> {
        match self.surface {
            Surface::Health => {
                let req = Request::get("/health")
                    .header("host", &self.addr)
                    .body(Full::new(Bytes::new()))?;
                self.send(req).await?;
            }
            Surface::Native => {
                self.post(
                    "/tools/calc_evaluate/invoke",
                    &[("x-toolhost-session", "bench")],
                    Bytes::from_static(INVOKE_BODY.as_bytes()),
                )
                .await?;
            }
            Surface::XAgent => {
                let cookie = self.session.clone().unwrap_or_default();
                let body = format!(
                    r#"{{"tool_name":"calc_evaluate","arguments":{{"expression":"{EXPRESSION}"}}}}"#
                );
                self.post("/execute_tool", &[("cookie", &cookie)], Bytes::from(body))
                    .await?;
            }
            Surface::Mcp | Surface::McpStateless => {
                let id = self.next_id;
                self.next_id += 1;
                let stateless = matches!(self.surface, Surface::McpStateless);
                let meta = if stateless {
                    format!(r#","_meta":{STATELESS_META}"#)
                } else {
                    String::new()
                };
                let body = Bytes::from(format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"calc_evaluate","arguments":{{"expression":"{EXPRESSION}"}}{meta}}}}}"#
                ));
                let answer = if stateless {
                    // The same toolhost session as the native calls.
                    let headers = [
                        ("accept", "application/json, text/event-stream"),
                        ("mcp-protocol-version", "2026-07-28"),
                        ("mcp-method", "tools/call"),
                        ("mcp-name", "calc_evaluate"),
                        ("x-toolhost-session", "bench"),
                    ];
                    self.post("/mcp", &headers, body).await?.1
                } else {
                    self.mcp(body).await?.1
                };
                let text = String::from_utf8_lossy(&answer);
                if !text.contains(r#""isError":false"#) {
                    bail!("MCP call failed: {text}");
                }
            }
        }
        Ok(())
    }
}

/// Median and p99 of sequential calls on one connection, in microseconds.
async fn sequential(addr: &str, surface: Surface, samples: usize) -> anyhow::Result<(f64, f64)> {
    let mut conn = Conn::open(addr, surface).await?;
    for _ in 0..samples.min(500) {
        conn.call().await?;
    }
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        conn.call().await?;
        times.push(t.elapsed());
    }
    let (p50, _, p99, _) = percentiles(&mut times);
    Ok((p50, p99))
}

/// What a [`load`] phase measured.
pub(crate) struct Load {
    /// Requests/s.
    pub(crate) rate: f64,
    pub(crate) p50: f64,
    pub(crate) p99: f64,
    /// Calls that succeeded.
    pub(crate) calls: usize,
}

/// Load with `connections` connections for `duration`: requests/s, the
/// median and p99 latency of the calls, and how many there were.
pub(crate) async fn load(
    addr: &str,
    surface: Surface,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<Load> {
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let mut conn = Conn::open(addr, surface).await?;
        conn.call().await?; // warm
        let (stop, errors) = (stop.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                match conn.call().await {
                    Ok(()) => times.push(t.elapsed()),
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            times
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut times = Vec::new();
    for t in tasks {
        times.extend(t.await?);
    }
    let elapsed = started.elapsed();
    let errors = errors.load(Ordering::Relaxed);
    if errors > 0 {
        println!("  ({errors} failed requests)");
    }
    anyhow::ensure!(!times.is_empty(), "no call succeeded");
    let calls = times.len();
    let rate = calls as f64 / elapsed.as_secs_f64();
    let (p50, _, p99, _) = percentiles(&mut times);
    Ok(Load {
        rate,
        p50,
        p99,
        calls,
    })
}

/// Median of `POST /get_cookie`, each on a fresh connection like XAgent's
/// client (which opens one per session), and on a kept-alive one.
async fn get_cookie(addr: &str, samples: usize) -> anyhow::Result<(f64, f64)> {
    let mut fresh = Vec::with_capacity(samples);
    let mut kept = Vec::with_capacity(samples);
    let mut conn = Conn::open(addr, Surface::Native).await?;
    for _ in 0..samples {
        let t = Instant::now();
        let mut c = Conn::open(addr, Surface::Native).await?;
        c.post("/get_cookie", &[], Bytes::new()).await?;
        fresh.push(t.elapsed());
        let t = Instant::now();
        conn.post("/get_cookie", &[], Bytes::new()).await?;
        kept.push(t.elapsed());
    }
    Ok((percentiles(&mut fresh).0, percentiles(&mut kept).0))
}

/// The cost of caller auth and metrics on native invoke: `plain` (off) and
/// `secured` (on) are two servers on the same plugins (started by the caller,
/// each with its pid), measured in turn over alternating rounds (throughput
/// and the server's CPU time per call), then paired (see [`paired_cpu`]).
pub(crate) async fn auth_metrics_cost(
    (plain, plain_pid): (&str, u32),
    (secured, secured_pid): (&str, u32),
    token: &str,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<()> {
    const ROUNDS: usize = 6;
    println!(
        "\n== native invoke, caller token + metrics off vs on: {connections} connections, {ROUNDS} rounds of {} s each ==",
        duration.as_secs()
    );
    // The same request bytes to both (the plain server ignores the token), so
    // the client's share of the 2 cores is the same in both runs. The order
    // alternates (off-on, on-off, ...) so neither side always goes first, and
    // the cost is the median of the rounds: this machine drifts between runs.
    //
    // Throughput swings with whatever else the machine runs, so each round
    // also reads the server's own CPU time per call (user + system, from
    // /proc): the work auth + metrics add, whatever the client got.
    set_token(Some(token));
    let (mut off, mut on, mut costs) = (Vec::new(), Vec::new(), Vec::new());
    let mut cpu_costs = Vec::new();
    for round in 0..ROUNDS {
        let order = if round % 2 == 0 {
            [(plain, plain_pid), (secured, secured_pid)]
        } else {
            [(secured, secured_pid), (plain, plain_pid)]
        };
        let (mut a, mut b, mut cpu_a, mut cpu_b) = (0.0, 0.0, 0.0, 0.0);
        for (addr, pid) in order {
            let before = cpu_seconds(pid)?;
            let measured = load(addr, Surface::Native, connections, duration).await?;
            let per_call_us = (cpu_seconds(pid)? - before) / measured.calls as f64 * 1e6;
            if addr == plain {
                (a, cpu_a) = (measured.rate, per_call_us);
            } else {
                (b, cpu_b) = (measured.rate, per_call_us);
            }
        }
        println!(
            "round {round}: off {a:>7.0}  on {b:>7.0} req/s; server CPU per call off {cpu_a:>5.1}  on {cpu_b:>5.1} us"
        );
        off.push(a);
        on.push(b);
        costs.push((1.0 - b / a) * 100.0);
        cpu_costs.push((cpu_b / cpu_a - 1.0) * 100.0);
    }
    set_token(None);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let median_of = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[ROUNDS / 2 - 1] + v[ROUNDS / 2]) / 2.0
    };
    let median = median_of(&mut costs);
    let cpu_median = median_of(&mut cpu_costs);
    println!(
        "off (no token, [server] metrics = false): {:>9.0} req/s (mean)",
        mean(&off)
    );
    println!(
        "on  (Bearer token checked, metrics):      {:>9.0} req/s (mean)",
        mean(&on)
    );
    println!(
        "cost of auth + metrics: median {median:.1}% of throughput (rounds {:.1}% .. {:.1}%)",
        costs[0],
        costs[ROUNDS - 1]
    );
    println!(
        "server CPU per call, on vs off: median {cpu_median:+.1}% (rounds {:+.1}% .. {:+.1}%)",
        cpu_costs[0],
        cpu_costs[ROUNDS - 1]
    );

    // Paired: every connection alternates between the two servers, so both
    // get the same number of calls under the same conditions at every moment
    // (whatever else the machine does), and their CPU time per call compares
    // like with like.
    set_token(Some(token));
    let paired = paired_cpu(
        &[
            (plain, plain_pid, Surface::Native),
            (secured, secured_pid, Surface::Native),
        ],
        connections,
        duration * ROUNDS as u32,
    )
    .await;
    set_token(None);
    let (cpu, calls) = paired?;
    let (cpu_off, cpu_on) = (cpu[0], cpu[1]);
    println!(
        "paired ({calls} calls each, alternating per connection): server CPU per call off {cpu_off:.1} us, on {cpu_on:.1} us: auth + metrics cost {:+.1}%",
        (cpu_on / cpu_off - 1.0) * 100.0
    );
    Ok(())
}

/// The servers' CPU time per call (us) while each connection sends one call
/// to each target in turn (a server and the surface to call it by), for
/// `duration`; and the number of calls each got.
pub(crate) async fn paired_cpu(
    targets: &[(&str, u32, Surface)],
    connections: usize,
    duration: Duration,
) -> anyhow::Result<(Vec<f64>, u64)> {
    let stop = Arc::new(AtomicBool::new(false));
    let turns = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let mut conns = Vec::with_capacity(targets.len());
        for &(addr, _, surface) in targets {
            let mut c = Conn::open(addr, surface).await?;
            c.call().await?; // warm
            conns.push(c);
        }
        let (stop, turns) = (stop.clone(), turns.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                for c in &mut conns {
                    c.call().await?;
                }
                turns.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    let cpu = || -> anyhow::Result<Vec<f64>> {
        targets
            .iter()
            .map(|&(_, pid, _)| cpu_seconds(pid))
            .collect()
    };
    let before = cpu()?;
    let counted = turns.load(Ordering::Relaxed);
    tokio::time::sleep(duration).await;
    let calls = turns.load(Ordering::Relaxed) - counted;
    let after = cpu()?;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await??;
    }
    anyhow::ensure!(calls > 0, "no call succeeded");
    let per_call = before
        .iter()
        .zip(&after)
        .map(|(b, a)| (a - b) / calls as f64 * 1e6)
        .collect();
    Ok((per_call, calls))
}

/// What each surface costs the server, paired: each on a server of its own
/// (`servers`, in the order of [`SURFACES`]), every connection calling them
/// in turn, so all get the same calls under the same conditions at every
/// moment, whatever else the machine does. Throughput under load depends on
/// the client's share of the cores too; this does not.
pub(crate) async fn paired_surfaces(
    servers: &[(&str, u32)],
    connections: usize,
    duration: Duration,
) -> anyhow::Result<()> {
    println!(
        "\n== paired: each surface on a server of its own, each of {connections} connections calling all in turn, {} s ==",
        duration.as_secs()
    );
    let targets: Vec<_> = servers
        .iter()
        .zip(SURFACES)
        .map(|(&(addr, pid), surface)| (addr, pid, surface))
        .collect();
    let (per_call, calls) = paired_cpu(&targets, connections, duration).await?;
    let cheapest = per_call.iter().cloned().fold(f64::MAX, f64::min);
    for (surface, us) in SURFACES.iter().zip(&per_call) {
        println!(
            "{:<22} server CPU per call {us:>5.1} us, {:+5.1}% vs the cheapest ({calls} calls each)",
            surface.name(),
            (us / cheapest - 1.0) * 100.0
        );
    }
    Ok(())
}

/// User + system CPU time of a process so far, from `/proc/<pid>/stat`.
pub(crate) fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name (which may hold spaces), which ends
    // with the last ')': state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("unreadable /proc stat")?
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 = fields
        .get(11..13)
        .context("short /proc stat")?
        .iter()
        .map(|f| f.parse::<f64>().unwrap_or(0.0))
        .sum();
    // In USER_HZ, which Linux fixes at 100 for /proc on every architecture
    // it runs on here.
    Ok(ticks / 100.0)
}

/// The surfaces a call can go through, compared in [`run`].
pub(crate) const SURFACES: [Surface; 4] = [
    Surface::Native,
    Surface::XAgent,
    Surface::Mcp,
    Surface::McpStateless,
];

pub(crate) async fn run(
    addr: &str,
    samples: usize,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<()> {
    let surfaces = SURFACES;
    println!("\n== one calc_evaluate call per surface: {samples} sequential on 1 connection ==");
    for s in surfaces {
        let (p50, p99) = sequential(addr, s, samples).await?;
        println!("{:<22} median {p50:>7.1} us   p99 {p99:>7.1} us", s.name());
    }
    // Interleaved rounds, the first surface rotating, so that the machine's
    // drift during the run does not favour whichever surface goes first.
    const ROUNDS: usize = 3;
    let slice = (duration / ROUNDS as u32).max(Duration::from_secs(1));
    println!(
        "\n== per surface under load: {connections} connections, {ROUNDS} interleaved rounds of {:.1} s each (means) ==",
        slice.as_secs_f64()
    );
    let health = load(addr, Surface::Health, connections, duration)
        .await?
        .rate;
    println!("{:<22} {health:>9.0} req/s", Surface::Health.name());
    let mut sums = surfaces.map(|_| (0.0, 0.0, 0.0));
    for round in 0..ROUNDS {
        for k in 0..surfaces.len() {
            let i = (k + round) % surfaces.len();
            let measured = load(addr, surfaces[i], connections, slice).await?;
            sums[i].0 += measured.rate;
            sums[i].1 += measured.p50;
            sums[i].2 += measured.p99;
        }
    }
    let mut rates = Vec::new();
    for (s, (rate, p50, p99)) in surfaces.iter().zip(sums) {
        let n = ROUNDS as f64;
        let rate = rate / n;
        println!(
            "{:<22} {rate:>9.0} req/s   median {:>6.2} ms   p99 {:>6.2} ms",
            s.name(),
            p50 / n / 1000.0,
            p99 / n / 1000.0
        );
        rates.push(rate);
    }
    let best = rates.iter().cloned().fold(f64::MIN, f64::max);
    let worst = rates.iter().cloned().fold(f64::MAX, f64::min);
    for (s, rate) in surfaces.iter().zip(&rates) {
        println!("{:<22} {:.2} of the fastest surface", s.name(), rate / best);
    }
    println!("slowest surface / fastest:  {:.2}", worst / best);
    println!("ratio native invoke / health: {:.2}", rates[0] / health);
    let (fresh, kept) = get_cookie(addr, samples.min(2000)).await?;
    println!(
        "\nPOST /get_cookie median: {fresh:.1} us on a new connection, {kept:.1} us kept alive"
    );
    Ok(())
}
