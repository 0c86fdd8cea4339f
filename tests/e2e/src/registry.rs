//! Debian's `docker-registry` (the CNCF distribution registry) on a
//! loopback port with a filesystem store, for the OCI tests (`oci.rs`,
//! `trust.rs`); ORAS (the `oras` PyPI package) as the outside client.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{free_port, python_venv, repo_root, run_python, wait_for};

/// The login of the registry `Registry::start(true)` makes (the bcrypt
/// entry in `tests/oci/htpasswd`, made for these tests only).
pub const USER: &str = "toolhost";
pub const PASSWORD: &str = "registry-test-password";

pub struct Registry {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    /// A registry (with `login`: only for [`USER`]), or None (skipped)
    /// outside CI when it is not installed.
    pub fn start(login: bool) -> Option<Registry> {
        let found = Command::new("docker-registry")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            assert!(
                std::env::var_os("CI").is_none(),
                "no docker-registry: CI must run the OCI tests (make test installs it: tests/oci/ensure-registry.sh)"
            );
            eprintln!("SKIPPED: no docker-registry (tests/oci/ensure-registry.sh)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = free_port().unwrap();
        let config = dir.path().join("config.yml");
        let auth = if login {
            format!(
                "auth:\n  htpasswd:\n    realm: toolhost-test\n    path: {}\n",
                repo_root().join("tests/oci/htpasswd").display()
            )
        } else {
            String::new()
        };
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n{auth}",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let up = wait_for(Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port))
                .ok()
                .map(|_| ())
        });
        assert!(up.is_some(), "docker-registry did not listen");
        Some(Registry {
            child,
            port,
            _dir: dir,
        })
    }
}

/// ORAS pushes `component` to `target` (`127.0.0.1:PORT/repo:tag`) in the
/// CNCF wasm layout.
pub fn oras_push(target: &str, component: &Path) {
    let python = python_venv("tests/oci/requirements.txt");
    let (ok, out) = run_python(
        &python,
        "tests/oci/push.py",
        &[target.as_ref(), component.as_os_str()],
    );
    assert!(ok, "ORAS push failed: {out}");
}

/// ORAS, logged in as [`USER`], pulls `target`'s one layer: its bytes, or
/// why not.
pub fn oras_pull(target: &str) -> Result<Vec<u8>, String> {
    let python = python_venv("tests/oci/requirements.txt");
    let out = tempfile::tempdir().unwrap();
    let args: [&std::ffi::OsStr; 4] = [
        target.as_ref(),
        out.path().as_os_str(),
        USER.as_ref(),
        PASSWORD.as_ref(),
    ];
    let (ok, text) = run_python(&python, "tests/oci/pull.py", &args);
    if !ok {
        return Err(text);
    }
    let path = text
        .lines()
        .find_map(|l| l.strip_prefix("pulled "))
        .ok_or_else(|| format!("no file pulled: {text}"))?;
    std::fs::read(path.trim()).map_err(|e| e.to_string())
}
