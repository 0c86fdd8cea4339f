//! A real PostgreSQL for the registry's tests: a fresh cluster of Debian's
//! `postgresql` in a temporary directory on a loopback port
//! (`tests/pg/cluster.sh`), stopped when dropped. None (the test skipped)
//! outside CI when it is not installed; under CI that fails.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Postgres {
    pub url: String,
    dir: tempfile::TempDir,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/pg/cluster.sh")
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

impl Postgres {
    pub fn start() -> Option<Postgres> {
        let installed =
            std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|mut d| d.next().is_some());
        if !installed {
            assert!(
                std::env::var_os("CI").is_none(),
                "no PostgreSQL: CI must run the registry's PostgreSQL tests (tests/pg/ensure-postgres.sh)"
            );
            eprintln!("SKIPPED: no PostgreSQL (tests/pg/ensure-postgres.sh)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let out = Command::new(script())
            .arg("start")
            .arg(dir.path())
            .arg(port.to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tests/pg/cluster.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Some(Postgres { url, dir })
    }
}
