//! Harness for end-to-end tests: start the real `toolhost` binary on a free
//! loopback port with a plugins directory made for the test, talk HTTP to it,
//! and stop it when the test ends.
//!
//! The binary and components come from `make test` (which builds the binary
//! with every test, `cargo test --workspace --no-run`, and runs `make plugins
//! fixtures` first); `TOOLHOST_BIN` overrides the binary's path.

pub mod admin;
mod docker;
pub mod docs;
pub mod events;
pub mod fake;
pub mod hostile;
pub mod mcp;
pub mod pg;
mod plugins_dir;
pub mod registry;
mod replica;
pub mod services;
pub mod sources;
pub mod traces;
pub mod xagent;

pub use docker::{CONTAINER_INIT_TIMEOUT, containers, docker_available, require_docker};
pub use plugins_dir::{PluginsDir, component, sha256_hex, tagged, write_then_rename};

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// The toolhost binary under test.
pub fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("TOOLHOST_BIN") {
        return p.into();
    }
    let p = repo_root().join("target/debug/toolhost");
    assert!(
        p.is_file(),
        "{} is missing: run `make test` (or `cargo build -p toolhost`)",
        p.display()
    );
    p
}

/// The `node_id=...` cookie an XAgent `/get_cookie` answer sets, ready to
/// send back.
pub fn xagent_cookie(r: &reqwest::blocking::Response) -> String {
    r.headers()["set-cookie"]
        .to_str()
        .expect("a text cookie")
        .split(';')
        .next()
        .expect("a name=value")
        .to_owned()
}

/// A Docker toolkit manifest made `cold` without a hot pool: nodes start on
/// a session's first call only (tests count containers).
pub fn cold(manifest: String) -> String {
    manifest
        .replace("scheduling = \"hot\"", "scheduling = \"cold\"")
        .replace("hot_pool = 2", "hot_pool = 0")
}

/// Run `script` (a path from the repository root) with `python` and `args`:
/// whether it succeeded, and its stdout + stderr (printed, for the test log).
pub fn run_python(python: &Path, script: &str, args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = Command::new(python)
        .arg(repo_root().join(script))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{report}");
    (out.status.success(), report)
}

/// The JSON object a script printed last on a line of its own (what it saw).
pub fn last_json(report: &str) -> Value {
    report
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no report: {report}"))
}

/// The python of a venv with the pinned packages of `requirements` (a path
/// from the repository root), made on first use by `tests/venv.sh`.
pub fn python_venv(requirements: &str) -> PathBuf {
    let out = Command::new(repo_root().join("tests/venv.sh"))
        .arg(repo_root().join(requirements))
        .output()
        .expect("run tests/venv.sh");
    assert!(
        out.status.success(),
        "tests/venv.sh {requirements} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(
        stdout
            .lines()
            .last()
            .expect("venv.sh prints the python path")
            .trim(),
    )
}

/// Run the `toolhost` command with `args` and `env` (no backtraces):
/// whether it succeeded, and its stdout then stderr.
pub fn run_toolhost(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let out = Command::new(binary())
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run toolhost");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A running server.
pub struct Server {
    child: Child,
    pub base: String,
    pub data: tempfile::TempDir,
    log: PathBuf,
    plugins: PluginsDir,
    config: Option<String>,
    env: Vec<(String, String)>,
    http: reqwest::blocking::Client,
}

impl Server {
    /// Start the binary serving `plugins`; waits until /health answers.
    pub fn start(plugins: PluginsDir) -> Server {
        Self::start_with(plugins, None).expect("server starts")
    }

    /// Start with a config file's text (`@PORT@` in it: the server's port).
    pub fn start_with(plugins: PluginsDir, config: Option<&str>) -> anyhow::Result<Server> {
        Self::start_env(plugins, config, &[])
    }

    /// Start with a config file's text and extra environment variables;
    /// waits until every plugin has loaded (or failed).
    pub fn start_env(
        plugins: PluginsDir,
        config: Option<&str>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Server> {
        let server = Self::spawn_env(plugins, config, env)?;
        server.wait_loaded()?;
        Ok(server)
    }

    /// Start and wait only until `/health` answers (plugins may still be
    /// compiling behind it).
    pub fn spawn_env(
        plugins: PluginsDir,
        config: Option<&str>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Server> {
        Self::spawn_in(plugins, tempfile::tempdir()?, config, env)
    }

    /// Start in data directory `data` and wait until `/health` answers.
    pub(crate) fn spawn_in(
        plugins: PluginsDir,
        data: tempfile::TempDir,
        config: Option<&str>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Server> {
        let (child, base, log) = spawn(plugins.path(), data.path(), config, env)?;
        let mut server = Server {
            child,
            base,
            data,
            log,
            plugins,
            config: config.map(str::to_owned),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            http: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()?,
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Kill the server and start it again on the same plugins and data
    /// directories (a new port, a fresh log).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let (child, base, log) = spawn(
            self.plugins.path(),
            self.data.path(),
            self.config.as_deref(),
            &env,
        )?;
        (self.child, self.base, self.log) = (child, base, log);
        self.wait_ready()?;
        self.wait_loaded()
    }

    /// The plugins directory the server watches.
    pub fn plugins_dir(&self) -> &Path {
        self.plugins.path()
    }

    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "toolhost exited with {status} before it was ready:\n{}",
                    self.log()
                );
            }
            if let Ok(r) = self.http.get(format!("{}/health", self.base)).send()
                && r.status().is_success()
            {
                return self.listened_first();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        bail!(
            "toolhost did not answer /health within 60 s:\n{}",
            self.log()
        )
    }

    /// The server answers at once: it listens before any plugin loads (the
    /// log says `toolhost listening` before the first `plugin loaded`), so
    /// `/health` never waits for a compile. Checked on every start.
    fn listened_first(&self) -> anyhow::Result<()> {
        let log = self.log();
        let listening = log.find("toolhost listening");
        let loaded = log.find("plugin loaded");
        match (listening, loaded) {
            (Some(l), Some(p)) if p < l => {
                bail!("a plugin loaded before the server listened:\n{log}")
            }
            (None, _) => bail!("/health answered before `toolhost listening` was logged:\n{log}"),
            _ => Ok(()),
        }
    }

    /// Wait until no plugin is compiling (`/health/ready`), up to 3 minutes
    /// (cold compiles of the Python plugins on a busy 2-core machine).
    pub fn wait_loaded(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(180);
        while Instant::now() < deadline {
            match self.http.get(self.url("/health/ready")).send() {
                Ok(r) if r.status().is_success() => return Ok(()),
                // Caller tokens: the harness cannot ask; /health answered.
                Ok(r) if r.status().as_u16() == 401 => return Ok(()),
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        bail!("plugins still compiling after 3 minutes:\n{}", self.log())
    }

    /// What the server wrote to stderr so far.
    pub fn log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn client(&self) -> &reqwest::blocking::Client {
        &self.http
    }

    /// GET `path` -> (status, JSON body).
    pub fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(self.url(path)).send().expect("GET");
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    /// GET /metrics: the Prometheus text.
    pub fn metrics(&self) -> String {
        let r = self
            .http
            .get(self.url("/metrics"))
            .send()
            .expect("GET /metrics");
        r.text().expect("the metrics text")
    }

    /// POST /tools/{tool}/invoke with `params` in `session` -> (status, body).
    pub fn invoke_in(&self, session: &str, tool: &str, params: Value) -> (u16, Value) {
        self.invoke_in_limited(session, tool, params, Value::Null)
    }

    /// Invoke in `session` with per-call `limits` (none when `null`).
    pub fn invoke_in_limited(
        &self,
        session: &str,
        tool: &str,
        params: Value,
        limits: Value,
    ) -> (u16, Value) {
        let mut body = json!({ "params": params });
        if !limits.is_null() {
            body["limits"] = limits;
        }
        self.invoke_body(session, tool, body)
    }

    /// POST /tools/{tool}/invoke in `session` with the whole request `body`
    /// (`params`, and `input`, `limits`, ... as given) -> (status, body).
    pub fn invoke_body(&self, session: &str, tool: &str, body: Value) -> (u16, Value) {
        self.try_invoke_with(&self.http, session, tool, body)
            .expect("POST invoke")
    }

    /// [`Server::invoke_body`] sent by `client` (its own timeout, say); the
    /// client's error when no answer came.
    pub fn try_invoke_with(
        &self,
        client: &reqwest::blocking::Client,
        session: &str,
        tool: &str,
        body: Value,
    ) -> reqwest::Result<(u16, Value)> {
        let r = client
            .post(self.url(&format!("/tools/{tool}/invoke")))
            .header("x-toolhost-session", session)
            .json(&body)
            .send()?;
        let status = r.status().as_u16();
        Ok((status, r.json().unwrap_or(Value::Null)))
    }

    /// Invoke in the session `test`.
    /// POST /tools/{tool}/invoke with per-call limit overrides.
    pub fn invoke_limited(&self, tool: &str, params: Value, limits: Value) -> (u16, Value) {
        let r = self
            .http
            .post(self.url(&format!("/tools/{tool}/invoke")))
            .json(&serde_json::json!({"params": params, "limits": limits}))
            .send()
            .expect("POST invoke");
        (r.status().as_u16(), r.json().unwrap_or(Value::Null))
    }

    pub fn invoke(&self, tool: &str, params: Value) -> (u16, Value) {
        self.invoke_in("test", tool, params)
    }

    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The server's resident set size in KiB (Linux).
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

impl Server {
    /// GET /plugins/{name} -> its status, if listed.
    pub fn plugin(&self, name: &str) -> Option<Value> {
        let (status, body) = self.get(&format!("/plugins/{name}"));
        (status == 200).then_some(body)
    }

    /// The files of the server's own compile cache, sorted (entries are
    /// stored behind a load: a swap does not wait for the disk).
    pub fn compile_cache_files(&self) -> Vec<PathBuf> {
        let dir = self.data.path().join("data/compile-cache");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
    }

    /// Plugin `name` once its calls run Cranelift's build (a component the
    /// compile cache did not have is served by Winch's quick build first:
    /// its `source` is `winch` until then).
    pub fn plugin_built(&self, name: &str) -> Option<Value> {
        wait_for(Duration::from_secs(60), || {
            self.plugin(name).filter(|p| p["source"] != "winch")
        })
    }

    /// Wait until plugin `name` serves `version` (and is ready).
    pub fn wait_version(&self, name: &str, version: &str) -> bool {
        wait_for(Duration::from_secs(20), || {
            self.plugin(name)
                .filter(|p| p["state"] == "ready" && p["version"] == version)
        })
        .is_some()
    }

    /// Ids of the tools listed by GET /tools.
    pub fn tool_ids(&self) -> Vec<String> {
        let (_, body) = self.get("/tools");
        body["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t["tool_id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM first: a graceful shutdown removes the server's containers.
        stop_gracefully(&mut self.child, Duration::from_secs(15));
        if std::thread::panicking() {
            eprintln!("--- toolhost log ---\n{}", self.log());
        }
        // TOOLHOST_E2E_LOGS=<dir> keeps every server's log (where a passing
        // test's time went): each start's, a restart writing a log of its own
        // beside the last one's.
        if let (Some(dir), Some(logs)) = (std::env::var_os("TOOLHOST_E2E_LOGS"), self.log.parent())
        {
            let _ = std::fs::create_dir_all(&dir);
            for log in std::fs::read_dir(logs).into_iter().flatten().flatten() {
                let name = log.file_name();
                let text = name.to_string_lossy();
                if text.starts_with("server-") && text.ends_with(".log") {
                    let _ = std::fs::copy(log.path(), std::path::Path::new(&dir).join(name));
                }
            }
        }
        // Whatever is left (a test that SIGKILLed the server) goes too.
        if self.data.path().join("data").is_dir() && docker_available() {
            let left = self.containers();
            if !left.is_empty() {
                let _ = Command::new("docker")
                    .args(["rm", "-f"])
                    .args(&left)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

/// SIGTERM `child`, wait up to `grace`, then SIGKILL.
pub fn stop_gracefully(child: &mut Child, grace: Duration) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Start the binary on a free port: (child, base URL, log path).
fn spawn(
    plugins: &Path,
    data: &Path,
    config: Option<&str>,
    env: &[(&str, &str)],
) -> anyhow::Result<(Child, String, PathBuf)> {
    let port = free_port()?;
    let log = data.join(format!("server-{port}.log"));
    let mut cmd = Command::new(binary());
    cmd.args(["serve", "--bind", &format!("127.0.0.1:{port}")])
        .arg("--plugins")
        .arg(plugins)
        .arg("--data")
        .arg(data.join("data"))
        .env("TOOLHOST_LOG", "info")
        .env_remove("TOOLHOST_ADMIN_TOKEN")
        .env_remove("TOOLHOST_TOKEN")
        .env_remove("TOOLHOST_CACHE_KEY");
    if let Some(key) = plugins_dir::seed_key(plugins) {
        cmd.env("TOOLHOST_CACHE_KEY", key);
    }
    cmd.envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?);
    if let Some(text) = config {
        let path = data.join("toolhost.toml");
        // `@PORT@`: the port the server is given (its own URL in a setting).
        std::fs::write(&path, text.replace("@PORT@", &port.to_string()))?;
        cmd.arg("--config").arg(path);
    }
    let child = cmd.spawn().context("failed to start toolhost")?;
    Ok((child, format!("http://127.0.0.1:{port}"), log))
}

/// Poll `check` every 10 ms until it returns some value or `limit` passes.
pub fn wait_for<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Server {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stop the server with SIGTERM and wait for it to exit (a graceful
    /// shutdown: it removes its containers itself).
    pub fn terminate(&mut self) {
        stop_gracefully(&mut self.child, Duration::from_secs(30));
    }

    /// Kill the server with SIGKILL (no graceful shutdown).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The `kind` of an error body.
pub fn kind(body: &Value) -> &str {
    body["error"]["kind"].as_str().unwrap_or("<none>")
}

/// Temporary files left under `dir` (recursively): the hidden `.tmp*` files
/// of the `tempfile` crate and the `.upload-*` files of plugin uploads.
pub fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(".tmp") || name.starts_with(".upload-") {
                found.push(e.path());
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(e.path());
            }
        }
    }
    found
}
