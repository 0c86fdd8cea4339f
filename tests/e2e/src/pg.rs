//! A throwaway PostgreSQL cluster (Debian's, `tests/pg/cluster.sh`) on a
//! loopback port for the registry's PostgreSQL tests; stopped when dropped.

use std::process::Command;

use crate::{free_port, repo_root};

pub struct Postgres {
    pub url: String,
    dir: tempfile::TempDir,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("tests/pg/cluster.sh"))
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
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
        let out = Command::new(repo_root().join("tests/pg/cluster.sh"))
            .arg("start")
            .arg(dir.path())
            .arg(free_port().unwrap().to_string())
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
