//! uv projects in build environments (seed 004 §7: `create_uv_project`,
//! `run_in_uv`, `uv_add_dependency`), with uv of the node image. An
//! environment has no network, so a dependency is fetched by the host from
//! PyPI as wheels only (`python3 -m pip download --only-binary=:all:`: no
//! package code runs on the host) into the environment's `/work/.wheels`,
//! and uv installs from there (`--no-index --find-links`); Pythons are
//! never downloaded (the image's). Every step is a command of the
//! environment, under the limits and audit of `run`.

use std::time::Duration;

use serde_json::{Value, json};

use super::{BuilderError, Builders, bad};

/// The environment's variables for uv.
pub const UV_ENV: [&str; 3] = [
    "UV_PYTHON_DOWNLOADS=never",
    "UV_CACHE_DIR=/work/.uv-cache",
    "UV_LINK_MODE=copy",
];

/// Where uv takes packages from: the fetched wheels only.
const SOURCES: &str = "--no-index --find-links /work/.wheels";

/// How long the host may take to fetch a dependency's wheels.
const FETCH_WITHIN: Duration = Duration::from_secs(300);

/// `s` as one word of `sh`.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A project directory given as `/work/<dir>` or `<dir>`: relative to
/// /work, inside it.
pub fn project_dir(dir: &str) -> Result<String, BuilderError> {
    let rel = dir.trim_start_matches("/work").trim_start_matches('/');
    let rel = if rel.is_empty() { "." } else { rel };
    if dir.starts_with('/') && !dir.starts_with("/work")
        || rel
            .split('/')
            .any(|c| c == ".." || c.is_empty() && rel != ".")
    {
        return Err(bad(format!("`{dir}` is not a directory inside /work")));
    }
    Ok(rel.to_owned())
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// A requirement as PyPI names it (`requests`, `pydantic>=2,<3`,
/// `uvicorn[standard]==0.30.0`): nothing a shell or pip would read as more.
pub fn valid_requirement(r: &str) -> bool {
    r.len() <= 200
        && r.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && r.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-[],<>=!~ ".contains(c))
        && !r.contains(" -")
}

fn failed(what: &str, ran: &Value) -> BuilderError {
    let out = format!(
        "{}{}",
        ran["stderr"].as_str().unwrap_or(""),
        ran["stdout"].as_str().unwrap_or("")
    );
    let tail: String = out
        .lines()
        .rev()
        .take(8)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    BuilderError(422, format!("{what} exited {}: {tail}", ran["exit_code"]))
}

/// Fetch `requirements`' wheels (their dependencies' too) from PyPI into
/// `dest`, with the host's pip: wheels only, so no package code runs here.
/// Why not, named, when they cannot be.
pub async fn fetch_wheels(requirements: &[&str], dest: &std::path::Path) -> Result<(), String> {
    if let Some(bad) = requirements.iter().find(|r| !valid_requirement(r)) {
        return Err(format!(
            "`{bad}` is not a requirement (a PyPI name, extras, versions)"
        ));
    }
    let mut fetch = tokio::process::Command::new("python3");
    fetch
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--only-binary=:all:", "--python-version", "3.11", "--dest"])
        .arg(dest)
        .args(requirements)
        .kill_on_drop(true);
    let fetched = tokio::time::timeout(FETCH_WITHIN, fetch.output())
        .await
        .map_err(|_| format!("fetching {requirements:?} from PyPI took over {FETCH_WITHIN:?}"))?
        .map_err(|e| format!("wheels are fetched with the host's `python3 -m pip`: {e}"))?;
    if fetched.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&fetched.stderr);
    let last = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(format!(
        "{} cannot be fetched from PyPI as wheels (packages without a wheel are not built here): {last}",
        requirements
            .iter()
            .map(|r| format!("`{r}`"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

impl Builders {
    /// Environment `env`'s `/work/.wheels`, made if missing (uv's only
    /// source: `--find-links` of a folder that is not there fails).
    async fn wheels(&self, env: &str) -> Result<std::path::PathBuf, BuilderError> {
        let wheels = self.dir_of(env).await?.join(".wheels");
        tokio::fs::create_dir_all(&wheels)
            .await
            .map_err(|e| BuilderError(500, format!("cannot make {}: {e}", wheels.display())))?;
        Ok(wheels)
    }

    /// `create_uv_project`: `uv init` of an application `name` in /work.
    pub async fn uv_init(
        &self,
        env: &str,
        name: &str,
        python: Option<&str>,
    ) -> Result<Value, BuilderError> {
        if !valid_name(name) {
            return Err(bad(format!(
                "`{name}`: a project name is lowercase letters, digits, `-` and `_`, starting with a letter"
            )));
        }
        let python = match python {
            Some(v) if v.len() <= 10 && v.chars().all(|c| c.is_ascii_digit() || c == '.') => {
                format!("--python {v}")
            }
            Some(v) => return Err(bad(format!("`{v}` is not a Python version"))),
            None => String::new(),
        };
        let command = format!(
            "uv init --quiet --no-workspace --vcs none --app {python} --name {name} {name}"
        );
        self.wheels(env).await?;
        let ran = self.run(env, &command, Duration::from_secs(120)).await?;
        if ran["exit_code"] != 0 {
            return Err(failed("uv init", &ran));
        }
        let version = self
            .run(
                env,
                &format!("cd {name} && uv run --quiet {SOURCES} python --version"),
                Duration::from_secs(120),
            )
            .await?;
        Ok(json!({
            "project_dir": format!("/work/{name}"),
            "python": version["stdout"].as_str().unwrap_or("").trim(),
        }))
    }

    /// `run_in_uv`: `command` in the project's environment (`uv run`).
    pub async fn uv_run(
        &self,
        env: &str,
        dir: &str,
        command: &str,
        timeout: Duration,
    ) -> Result<Value, BuilderError> {
        let dir = project_dir(dir)?;
        let command = format!(
            "cd {} && uv run --quiet {SOURCES} -- sh -c {}",
            quoted(&dir),
            quoted(command)
        );
        self.run(env, &command, timeout).await
    }

    /// `uv_add_dependency`: the requirement's wheels fetched by the host
    /// into /work/.wheels, then `uv add` in the project.
    pub async fn uv_add(
        &self,
        env: &str,
        dir: &str,
        requirement: &str,
        dev: bool,
    ) -> Result<Value, BuilderError> {
        let dir = project_dir(dir)?;
        if !valid_requirement(requirement) {
            return Err(bad(format!(
                "`{requirement}` is not a requirement (a PyPI name, extras, versions)"
            )));
        }
        let wheels = self.wheels(env).await?;
        if let Err(why) = fetch_wheels(&[requirement], &wheels).await {
            return Ok(json!({"status": "error", "message": why}));
        }
        let dev = if dev { "--dev " } else { "" };
        let command = format!(
            "cd {} && uv add --quiet {SOURCES} {dev}{}",
            quoted(&dir),
            quoted(requirement)
        );
        let ran = self.run(env, &command, Duration::from_secs(300)).await?;
        let ok = ran["exit_code"] == 0;
        Ok(json!({
            "status": if ok { "success" } else { "error" },
            "message": if ok {
                format!("added {requirement}")
            } else {
                failed("uv add", &ran).1
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_and_requirements_stay_what_they_say() {
        assert_eq!(project_dir("/work/app").unwrap(), "app");
        assert_eq!(project_dir("app/sub").unwrap(), "app/sub");
        assert_eq!(project_dir("/work").unwrap(), ".");
        for bad in ["/etc", "../x", "/work/../etc", "a//b"] {
            assert!(project_dir(bad).is_err(), "{bad}");
        }
        for ok in ["requests", "pydantic>=2,<3", "uvicorn[standard]==0.30.0"] {
            assert!(valid_requirement(ok), "{ok}");
        }
        for bad in [
            "-e .",
            "x; rm -rf /",
            "x' y",
            "x --index-url http://evil",
            "https://x/y.whl",
            "",
        ] {
            assert!(!valid_requirement(bad), "{bad}");
        }
        assert_eq!(quoted("it's"), r"'it'\''s'");
        assert!(valid_name("text-summarizer") && !valid_name("Bad") && !valid_name("1x"));
    }
}
