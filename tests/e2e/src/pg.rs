//! A throwaway PostgreSQL cluster (Debian's, `tests/pg/cluster.sh`) on a
//! loopback port for the registry's PostgreSQL tests; stopped when dropped.

use std::process::Command;

use crate::{free_port, repo_root};

pub struct Postgres {
    pub url: String,
    dir: tempfile::TempDir,
    port: u16,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

fn cluster(args: &[&str]) -> std::process::Output {
    let out = Command::new(repo_root().join("tests/pg/cluster.sh"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tests/pg/cluster.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

impl Postgres {
    /// A cluster, or None (skipped) outside CI without PostgreSQL.
    pub fn start() -> Option<Postgres> {
        if std::fs::read_dir("/usr/lib/postgresql").is_err() {
            assert!(
                std::env::var_os("CI").is_none(),
                "no PostgreSQL: CI must run this test (tests/pg/ensure-postgres.sh)"
            );
            eprintln!("SKIPPED: no PostgreSQL (tests/pg/ensure-postgres.sh)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = free_port().unwrap();
        let out = cluster(&["start", &dir.path().to_string_lossy(), &port.to_string()]);
        let url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Some(Postgres { url, dir, port })
    }

    /// Shut the server down (a fast shutdown: its clients are cut off).
    pub fn stop(&self) {
        cluster(&["stop", &self.dir.path().to_string_lossy()]);
    }

    /// Start it again as it was, on the same port.
    pub fn resume(&self) {
        cluster(&[
            "start",
            &self.dir.path().to_string_lossy(),
            &self.port.to_string(),
        ]);
    }
}

impl Postgres {
    /// The value(s) `sql` selects, as `psql -At` prints them (`|` between
    /// columns, a line per row).
    pub fn query(&self, sql: &str) -> String {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin/psql"))
            .filter(|p| p.is_file())
            .max()
            .expect("no psql");
        let out = Command::new(bin)
            .args([&self.url, "-Atc", sql])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}
