//! The Docker engine in tests: whether one runs, and the containers of a
//! server or of a label.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::{Server, sha256_hex, wait_for};

/// Whether a Docker engine answers. `make test` starts one; a test that needs
/// it calls [`require_docker`].
pub fn docker_available() -> bool {
    Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// False (the test should return) when no engine runs outside CI; in CI
/// (`CI` set) a missing engine is a failure.
pub fn require_docker() -> bool {
    if docker_available() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no Docker engine: CI must run the Docker tests (make test starts one)"
    );
    eprintln!("SKIPPED: no Docker engine (run `plugins/node/ensure-docker.sh`)");
    false
}

/// A line for the `[mcp]` manifests of servers the tests start in a node
/// container: their handshake (Python or Node starting in a fresh
/// container, the SDK imported) is seconds of CPU, which a machine busy with
/// other tests stretches past the 10 s default. What those tests check is
/// not that bound (`mcpservers.rs` checks the bound itself, at 1.5 s).
pub const CONTAINER_INIT_TIMEOUT: &str = "init_timeout_ms = 60000\n";

/// Ids of the containers whose labels match every `label=value` filter.
pub fn containers(filters: &[String]) -> Vec<String> {
    let mut cmd = Command::new("docker");
    cmd.args(["ps", "-aq"]);
    for f in filters {
        cmd.args(["--filter", &format!("label={f}")]);
    }
    let out = cmd.output().expect("docker ps");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

impl Server {
    /// The label value marking this server's containers (a hash of its data
    /// directory, as the server computes it).
    pub fn scope(&self) -> String {
        let data = std::fs::canonicalize(self.data.path().join("data")).expect("data dir");
        sha256_hex(data.to_string_lossy().as_bytes())[..16].to_owned()
    }

    /// This server's node containers.
    pub fn containers(&self) -> Vec<String> {
        containers(&[format!("toolhost.scope={}", self.scope())])
    }

    /// DELETE /sessions/{id}, expecting 200.
    pub fn close_session(&self, id: &str) {
        let r = self
            .http
            .delete(self.url(&format!("/sessions/{id}")))
            .send()
            .expect("DELETE session");
        assert_eq!(r.status().as_u16(), 200, "closing session {id}");
    }

    /// Wait (up to a minute) until none of this server's containers is left.
    pub fn wait_no_containers(&self) -> bool {
        wait_for(Duration::from_secs(60), || {
            self.containers().is_empty().then_some(())
        })
        .is_some()
    }
}
