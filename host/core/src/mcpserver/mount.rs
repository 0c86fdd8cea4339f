//! The packages of a stdio MCP server, installed from a lock and checked
//! against it. `toolhost mcp-install DIR` installs a mount directory's npm
//! packages with `npm ci` from `package-lock.json` (every package must carry
//! an `integrity` hash, which npm checks against each tarball) and its
//! Python packages with `pip install --require-hashes` from
//! `requirements.txt` (into `python/`), then records in
//! `.toolhost-mount.lock` the digests of the lock files and of every file
//! installed. The server checks a mount that has that record before its
//! server starts: a lock file or an installed file changed since (a package
//! swapped in `node_modules`, a file added) refuses the toolkit, with the
//! reason in `GET /plugins`. A mount with a lock file and no record loads
//! with a warning: its packages are not checked.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The record `toolhost mcp-install` leaves in the mount.
pub const RECORD: &str = ".toolhost-mount.lock";
const NPM_LOCK: &str = "package-lock.json";
const PIP_LOCK: &str = "requirements.txt";
/// What the installs write, and what is hashed.
const TREES: [&str; 2] = ["node_modules", "python"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// `sha256:` of `package-lock.json`, when npm installed.
    #[serde(default)]
    pub npm_lock: Option<String>,
    /// `sha256:` of `requirements.txt`, when pip installed.
    #[serde(default)]
    pub pip_lock: Option<String>,
    /// `sha256:` over every installed file's path and content.
    pub tree: String,
    pub files: u64,
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::text::hex(&Sha256::digest(bytes)))
}

fn file_digest(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(digest(&bytes))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every entry of the installed trees, sorted: (relative path, metadata).
fn walk(dir: &Path) -> std::io::Result<Vec<(PathBuf, std::fs::Metadata)>> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = TREES.iter().map(|t| dir.join(t)).collect();
    while let Some(path) = stack.pop() {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                stack.push(entry?.path());
            }
        } else {
            let rel = path.strip_prefix(dir).unwrap_or(&path).to_owned();
            out.push((rel, meta));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The digest over the installed trees: each file's path and content (a
/// link's target), and how many files.
fn tree(dir: &Path) -> std::io::Result<(String, u64)> {
    tree_of(dir, &walk(dir)?)
}

fn tree_of(dir: &Path, entries: &[(PathBuf, std::fs::Metadata)]) -> std::io::Result<(String, u64)> {
    let mut all = Sha256::new();
    for (rel, meta) in entries {
        let path = dir.join(rel);
        let content = if meta.file_type().is_symlink() {
            format!("-> {}", std::fs::read_link(&path)?.display())
        } else {
            digest(&std::fs::read(&path)?)
        };
        all.update(rel.to_string_lossy().as_bytes());
        all.update([0]);
        all.update(content.as_bytes());
        all.update([b'\n']);
    }
    Ok((
        format!("sha256:{}", crate::text::hex(&all.finalize())),
        entries.len() as u64,
    ))
}

/// What the files' metadata says now (sizes, change times, inodes: a
/// change time cannot be set back), to skip re-hashing an unchanged mount.
fn stamps(entries: &[(PathBuf, std::fs::Metadata)]) -> String {
    let mut all = Sha256::new();
    for (rel, m) in entries {
        all.update(rel.to_string_lossy().as_bytes());
        all.update(format!(
            "\0{} {} {} {}\n",
            m.len(),
            m.ctime(),
            m.ctime_nsec(),
            m.ino()
        ));
    }
    crate::text::hex(&all.finalize())
}

/// Mounts verified, by directory: the stamps they had and the record's tree
/// digest they matched.
static VERIFIED: Mutex<Option<HashMap<PathBuf, (String, String)>>> = Mutex::new(None);

/// Check mount `dir` against its record: `Ok(None)` when it has none (with
/// a warning if it has a lock file), `Ok(Some(record))` when it matches;
/// else why not.
pub fn check(dir: &Path) -> Result<(Option<Record>, Option<String>), String> {
    let at = |e: std::io::Error| format!("the mount {}: {e}", dir.display());
    let record = match std::fs::read_to_string(dir.join(RECORD)) {
        Ok(text) => toml::from_str::<Record>(&text)
            .map_err(|e| format!("{}: {e}", dir.join(RECORD).display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let locked = [NPM_LOCK, PIP_LOCK].iter().any(|f| dir.join(f).is_file());
            let warning = locked.then(|| {
                format!(
                    "the mount {} has a lock file but was not installed by `toolhost \
                     mcp-install`: its packages are not checked",
                    dir.display()
                )
            });
            return Ok((None, warning));
        }
        Err(e) => return Err(at(e)),
    };
    for (file, recorded) in [(NPM_LOCK, &record.npm_lock), (PIP_LOCK, &record.pip_lock)] {
        if recorded.is_some() && file_digest(&dir.join(file)).map_err(at)? != *recorded {
            return Err(format!(
                "the mount {}: {file} changed since `toolhost mcp-install` installed from it: \
                 install again",
                dir.display()
            ));
        }
    }
    let entries = walk(dir).map_err(at)?;
    let known = (stamps(&entries), record.tree.clone());
    let mut verified = VERIFIED.lock().expect("verified mounts");
    if verified.get_or_insert_with(HashMap::new).get(dir) == Some(&known) {
        return Ok((Some(record), None));
    }
    let (tree, files) = tree_of(dir, &entries).map_err(at)?;
    if tree != record.tree {
        return Err(format!(
            "the mount {}: its installed files ({files}) are not the {} `toolhost mcp-install` \
             recorded: a package changed since; install again",
            dir.display(),
            record.files
        ));
    }
    verified
        .get_or_insert_with(HashMap::new)
        .insert(dir.to_owned(), known);
    Ok((Some(record), None))
}

/// Why lock `text` (`package-lock.json`) cannot be installed with every
/// package's integrity checked, if it cannot.
fn npm_lock_problem(text: &str) -> Option<String> {
    let lock: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Some(format!("{NPM_LOCK} is not JSON: {e}")),
    };
    let Some(packages) = lock["packages"].as_object() else {
        return Some(format!(
            "{NPM_LOCK}: no `packages` (lockfileVersion 2 or 3 needed)"
        ));
    };
    let missing: Vec<&String> = packages
        .iter()
        .filter(|(path, p)| {
            !path.is_empty()
                && p["link"] != true
                && p["integrity"].as_str().is_none_or(str::is_empty)
        })
        .map(|(path, _)| path)
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{NPM_LOCK}: {} package(s) without an integrity hash, e.g. {}",
            missing.len(),
            missing[0]
        )
    })
}

/// Install mount `dir`'s packages from its locks and record what was
/// installed. `python`: the interpreter whose pip installs.
pub fn install(dir: &Path, python: &str) -> Result<Record, String> {
    let run = |cmd: &mut std::process::Command, what: &str| -> Result<(), String> {
        let out = cmd
            .current_dir(dir)
            .output()
            .map_err(|e| format!("{what}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{what} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    };
    let npm_lock = file_digest(&dir.join(NPM_LOCK)).map_err(|e| e.to_string())?;
    let pip_lock = file_digest(&dir.join(PIP_LOCK)).map_err(|e| e.to_string())?;
    if npm_lock.is_none() && pip_lock.is_none() {
        return Err(format!(
            "{}: no {NPM_LOCK} and no {PIP_LOCK}",
            dir.display()
        ));
    }
    let _ = std::fs::remove_file(dir.join(RECORD));
    if npm_lock.is_some() {
        let text = std::fs::read_to_string(dir.join(NPM_LOCK)).map_err(|e| e.to_string())?;
        if let Some(problem) = npm_lock_problem(&text) {
            return Err(problem);
        }
        run(
            std::process::Command::new("npm").args([
                "ci",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ]),
            "npm ci",
        )?;
    }
    if pip_lock.is_some() {
        let _ = std::fs::remove_dir_all(dir.join("python"));
        run(
            std::process::Command::new(python)
                .args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
                .args(["--require-hashes", "--no-deps", "--only-binary", ":all:"])
                .args(["--target", "python", "-r", PIP_LOCK])
                .env("PIP_ROOT_USER_ACTION", "ignore"),
            "pip install --require-hashes",
        )?;
    }
    let (tree, files) = tree(dir).map_err(|e| e.to_string())?;
    let record = Record {
        npm_lock,
        pip_lock,
        tree,
        files,
    };
    let text = format!(
        "# Written by `toolhost mcp-install`: what was installed from the locks.\n{}",
        toml::to_string(&record).unwrap_or_default()
    );
    std::fs::write(dir.join(RECORD), text).map_err(|e| e.to_string())?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_mount_is_checked_file_by_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("node_modules/a")).unwrap();
        std::fs::write(d.join("node_modules/a/index.js"), "ok").unwrap();
        std::fs::write(d.join(NPM_LOCK), "{}").unwrap();
        // A lock file and no record: loads, with a warning.
        let (record, warning) = check(d).unwrap();
        assert!(record.is_none() && warning.unwrap().contains("not checked"));
        let (tree, files) = tree(d).unwrap();
        let record = Record {
            npm_lock: file_digest(&d.join(NPM_LOCK)).unwrap(),
            pip_lock: None,
            tree,
            files,
        };
        std::fs::write(d.join(RECORD), toml::to_string(&record).unwrap()).unwrap();
        assert_eq!(check(d).unwrap().0, Some(record.clone()));
        // The record rewritten, the files as they were: not taken on the
        // strength of the earlier verification.
        let forged = Record {
            tree: format!("sha256:{}", "0".repeat(64)),
            ..record.clone()
        };
        std::fs::write(d.join(RECORD), toml::to_string(&forged).unwrap()).unwrap();
        assert!(check(d).unwrap_err().contains("not the 1"));
        std::fs::write(d.join(RECORD), toml::to_string(&record).unwrap()).unwrap();
        assert!(check(d).is_ok());
        // A file changed (same size), then added, then the lock changed.
        std::fs::write(d.join("node_modules/a/index.js"), "no").unwrap();
        assert!(check(d).unwrap_err().contains("not the 1"));
        std::fs::write(d.join("node_modules/a/index.js"), "ok").unwrap();
        assert!(check(d).is_ok());
        std::fs::write(d.join("node_modules/a/extra.js"), "").unwrap();
        assert!(check(d).unwrap_err().contains("installed files (2)"));
        std::fs::remove_file(d.join("node_modules/a/extra.js")).unwrap();
        std::fs::write(d.join(NPM_LOCK), "{ }").unwrap();
        assert!(check(d).unwrap_err().contains("package-lock.json changed"));
    }

    #[test]
    fn npm_locks_need_every_integrity_hash() {
        let ok = r#"{"lockfileVersion":3,"packages":{"":{"name":"x"},
            "node_modules/a":{"version":"1.0.0","integrity":"sha512-AAAA"},
            "node_modules/b":{"link":true}}}"#;
        assert_eq!(npm_lock_problem(ok), None);
        let missing =
            r#"{"lockfileVersion":3,"packages":{"":{},"node_modules/a":{"version":"1.0.0"}}}"#;
        assert!(
            npm_lock_problem(missing)
                .unwrap()
                .contains("node_modules/a")
        );
        assert!(
            npm_lock_problem(r#"{"lockfileVersion":1}"#)
                .unwrap()
                .contains("packages")
        );
    }
}
