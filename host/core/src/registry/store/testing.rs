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
    tests_pg("cluster.sh")
}

fn tests_pg(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/pg")
        .join(name)
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
        Self::start_with(false)
    }

    /// A cluster taking TLS with a certificate for 127.0.0.1 of a throwaway
    /// CA (`tests/pg/certs.sh`), and that CA's PEM file.
    pub fn start_tls() -> Option<(Postgres, PathBuf)> {
        let pg = Self::start_with(true)?;
        let ca = pg.dir.path().join("tls/ca.crt");
        Some((pg, ca))
    }

    fn start_with(tls: bool) -> Option<Postgres> {
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
        if tls {
            let made = Command::new(tests_pg("certs.sh"))
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(made.success(), "tests/pg/certs.sh failed");
        }
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
