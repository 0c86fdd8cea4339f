//! Real HTTP services nobody here wrote, run locally on 127.0.0.1 for the
//! API-tools tests and benchmarks: `httpbin` (Flask, its Swagger 2.0 spec at
//! `/spec.json`) and `httpbinx` (FastAPI, OpenAPI 3.1 at `/openapi.json`),
//! from the pinned venv of `tests/httpapi/requirements.txt`.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{free_port, python_venv, stop_gracefully, wait_for};

/// Which service.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Httpbin,
    Httpbinx,
}

/// A running service, stopped when dropped.
pub struct Service {
    child: Child,
    pub port: u16,
}

/// The npm MCP servers' `node_modules/.bin` (installed once by
/// `tests/mcpservers/install.sh`).
pub fn mcp_servers_bin() -> std::path::PathBuf {
    let out = Command::new(crate::repo_root().join("tests/mcpservers/install.sh"))
        .env("TOOLHOST_BIN", crate::binary())
        .output()
        .expect("run tests/mcpservers/install.sh");
    assert!(
        out.status.success(),
        "tests/mcpservers/install.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    std::path::PathBuf::from(text.lines().last().expect("a path").trim())
}

impl Service {
    /// The MCP reference server (`@modelcontextprotocol/server-everything`)
    /// in its streamable HTTP mode, at `/mcp`.
    pub fn everything() -> Service {
        Self::everything_at(free_port().expect("a free port"))
    }

    /// [`Service::everything`] on `port` (again, after it was stopped: a
    /// restarted server).
    pub fn everything_at(port: u16) -> Service {
        let mut cmd = Command::new(mcp_servers_bin().join("mcp-server-everything"));
        cmd.arg("streamableHttp");
        Self::listening(cmd, port)
    }

    /// A server of the MCP Python SDK installed beside the npm servers
    /// (`tests/mcpservers/requirements.txt`): `script` run by the host's
    /// Python with that install on its path.
    pub fn python_mcp(script: &std::path::Path) -> Service {
        Self::python_mcp_at(script, free_port().expect("a free port"))
    }

    /// [`Service::python_mcp`] on `port`.
    pub fn python_mcp_at(script: &std::path::Path, port: u16) -> Service {
        let install = mcp_servers_bin()
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("python");
        let mut cmd = Command::new("python3");
        cmd.arg(script).env("PYTHONPATH", install);
        Self::listening(cmd, port)
    }

    /// A real OpenID provider (npm's `oidc-provider`, installed beside the
    /// MCP servers; `tests/oauth/provider.mjs`) issuing access tokens for
    /// `resource` with `scopes` (space-separated), as JWTs or, with
    /// `opaque`, opaque tokens toolhost introspects. Its issuer is
    /// [`Service::url`]`("")`.
    pub fn oidc_provider(port: u16, resource: &str, scopes: &str, opaque: bool) -> Service {
        let modules = mcp_servers_bin().parent().unwrap().to_path_buf();
        let mut cmd = Command::new("node");
        cmd.arg(crate::repo_root().join("tests/oauth/provider.mjs"))
            .arg("--modules")
            .arg(modules)
            .args(["--resource", resource, "--scopes", scopes])
            .args(["--format", if opaque { "opaque" } else { "jwt" }]);
        Self::listening(cmd, port)
    }

    /// `cmd` with `PORT` set to `port`, once it listens there.
    fn listening(mut cmd: Command, port: u16) -> Service {
        let child = cmd
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the server");
        let service = Service { child, port };
        let up = wait_for(Duration::from_secs(60), || {
            std::net::TcpStream::connect(("127.0.0.1", port))
                .ok()
                .map(|_| ())
        });
        assert!(up.is_some(), "the server did not listen on {port}");
        service
    }

    pub fn start(kind: Kind) -> Service {
        let python = python_venv("tests/httpapi/requirements.txt");
        let port = free_port().expect("a free port");
        let bind = format!("127.0.0.1:{port}");
        let mut cmd = Command::new(&python);
        match kind {
            // Several workers: a benchmark's many connections.
            Kind::Httpbin => cmd.args(["-m", "gunicorn", "-w", "4", "-b", &bind, "httpbin:app"]),
            Kind::Httpbinx => cmd.args([
                "-m",
                "uvicorn",
                "httpbinx.main:app",
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--log-level",
                "warning",
            ]),
        };
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {kind:?}: {e}"));
        let service = Service { child, port };
        let http = reqwest::blocking::Client::new();
        let up = wait_for(Duration::from_secs(60), || {
            http.get(service.url("/get"))
                .send()
                .ok()
                .filter(|r| r.status().is_success())
                .map(|_| ())
        });
        assert!(
            up.is_some(),
            "{kind:?} did not answer on {bind} within a minute"
        );
        service
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The manifest of a toolkit mounting this service as a remote MCP
    /// server at `/mcp`, its host allowed (`<name>.toml` of a folder).
    pub fn mcp_manifest(&self) -> String {
        format!(
            "[mcp]\nurl = \"{}\"\nallow = [\"{}\"]\n",
            self.url("/mcp"),
            self.host()
        )
    }

    /// The allow-list entry of this service.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // gunicorn's workers follow their master on SIGTERM.
        stop_gracefully(&mut self.child, Duration::from_secs(5));
    }
}
