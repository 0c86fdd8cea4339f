//! Build environments for coding agents (seed 004 §7): a Docker node per
//! environment with a host folder at `/work` (`<data>/builder/<env>`),
//! where an agent writes files, runs commands and from which it registers
//! a tool (a `build_tool` task). Every action is under limits and written
//! to the audit log, in the registry ([`crate::registry::Registry::audit`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

pub mod uv;

use crate::nodes::NodeBackend;
use crate::nodes::stdio::{ContainerGuard, StdioSpec};
use crate::tool::CallError;

/// Environments alive at once.
pub const MAX_ENVS: usize = 4;
/// Largest file written or read, bytes.
pub const MAX_FILE: usize = 4 << 20;
/// Output kept of a command, bytes (the end of each stream).
pub const MAX_OUTPUT: usize = 64 << 10;
/// Longest command.
pub const MAX_RUN: Duration = Duration::from_secs(600);

struct Env {
    guard: ContainerGuard,
    dir: PathBuf,
    /// Its caps: memory, CPUs, GPUs.
    caps: (u32, f64, Option<i64>),
}

pub struct Builders {
    docker: Option<Arc<NodeBackend>>,
    root: PathBuf,
    image: String,
    envs: tokio::sync::Mutex<HashMap<String, Env>>,
}

fn new_env_id() -> String {
    format!("env-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

/// A builder tool's failure: its HTTP status and message.
#[derive(Debug)]
pub struct BuilderError(pub u16, pub String);

impl From<CallError> for BuilderError {
    fn from(e: CallError) -> Self {
        BuilderError(e.kind().status(), e.to_string())
    }
}

fn bad(message: impl Into<String>) -> BuilderError {
    BuilderError(422, message.into())
}

impl Builders {
    pub fn new(docker: Option<Arc<NodeBackend>>, data: &Path, image: String) -> Arc<Builders> {
        Arc::new(Builders {
            docker,
            root: data.join("builder"),
            image,
            envs: Default::default(),
        })
    }

    fn docker(&self) -> Result<&Arc<NodeBackend>, BuilderError> {
        self.docker.as_ref().ok_or_else(|| {
            BuilderError(
                503,
                "build environments need the Docker backend ([docker] enabled)".into(),
            )
        })
    }

    /// Whether an engine that answers offers GPUs.
    pub fn any_gpu(&self) -> bool {
        self.docker
            .as_ref()
            .and_then(|d| d.docker())
            .is_some_and(|p| p.engines.any_gpu())
    }

    /// A new environment: a node (no network, capped; with `gpus` GPUs, -1
    /// all of an engine's) with its folder at /work.
    pub async fn create(
        &self,
        memory_mb: u32,
        cpus: f64,
        gpus: Option<i64>,
    ) -> Result<Value, BuilderError> {
        let docker = self.docker()?.clone();
        let id = new_env_id();
        let dir = self.root.join(&id);
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| BuilderError(500, format!("cannot make {}: {e}", dir.display())))?;
        self.start(&docker, id, dir, memory_mb, cpus, gpus).await
    }

    /// Start environment `id`'s container on its folder `dir` (removed when
    /// it cannot start: [`MAX_ENVS`] exist, or the engine refuses).
    async fn start(
        &self,
        docker: &Arc<NodeBackend>,
        id: String,
        dir: PathBuf,
        memory_mb: u32,
        cpus: f64,
        gpus: Option<i64>,
    ) -> Result<Value, BuilderError> {
        let mut envs = self.envs.lock().await;
        if envs.len() >= MAX_ENVS {
            let _ = tokio::fs::remove_dir_all(&dir).await;
            return Err(BuilderError(
                429,
                format!("{MAX_ENVS} build environments exist: destroy one first"),
            ));
        }
        let spec = StdioSpec {
            toolkit: "builder".into(),
            image: self.image.clone(),
            command: Vec::new(),
            env: Vec::new(),
            binds: vec![format!("{}:/work:rw", dir.display())],
            memory_mb,
            cpus,
            pids: 256,
            network: "none",
            allocate: true,
            gpus,
        };
        let started = docker.start_idle(&spec, &id).await;
        let (_, guard) = match started {
            Ok(started) => started,
            Err(e) => {
                let _ = tokio::fs::remove_dir_all(&dir).await;
                return Err(e.into());
            }
        };
        envs.insert(
            id.clone(),
            Env {
                guard,
                dir,
                caps: (memory_mb, cpus, gpus),
            },
        );
        Ok(
            json!({"env_id": id, "workdir": "/work", "image": self.image, "memory_mb": memory_mb, "cpus": cpus, "network": "none", "gpu_count": gpus}),
        )
    }

    /// `rebuild_docker_ports`: environment `env` made anew (a new id, its
    /// folder and files kept) with new caps where given.
    pub async fn rebuild(
        &self,
        env: &str,
        memory_mb: Option<u32>,
        cpus: Option<f64>,
    ) -> Result<Value, BuilderError> {
        let docker = self.docker()?.clone();
        let Some(Env {
            mut guard,
            dir,
            caps,
        }) = self.envs.lock().await.remove(env)
        else {
            return Err(BuilderError(404, format!("no build environment `{env}`")));
        };
        guard.remove().await;
        let id = new_env_id();
        let moved = self.root.join(&id);
        tokio::fs::rename(&dir, &moved)
            .await
            .map_err(|e| BuilderError(500, format!("cannot keep the folder of `{env}`: {e}")))?;
        let (memory_mb, cpus) = (memory_mb.unwrap_or(caps.0), cpus.unwrap_or(caps.1));
        self.start(&docker, id, moved, memory_mb, cpus, caps.2)
            .await
    }

    async fn dir_of(&self, env: &str) -> Result<PathBuf, BuilderError> {
        let envs = self.envs.lock().await;
        envs.get(env)
            .map(|e| e.dir.clone())
            .ok_or_else(|| BuilderError(404, format!("no build environment `{env}`")))
    }

    /// `path` inside environment `env`'s folder, refused if it leaves it.
    async fn file(&self, env: &str, path: &str) -> Result<PathBuf, BuilderError> {
        let dir = self.dir_of(env).await?;
        let rel = Path::new(path.trim_start_matches("/work/").trim_start_matches('/'));
        if path.is_empty()
            || rel
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(bad(format!("`{path}` is not a path inside /work")));
        }
        let full = dir.join(rel);
        // No symlink may lead out (the agent's commands can make them).
        let mut at = dir.clone();
        for c in rel.components() {
            at.push(c);
            if tokio::fs::symlink_metadata(&at)
                .await
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                return Err(bad(format!("`{path}` goes through a symbolic link")));
            }
        }
        Ok(full)
    }

    pub async fn write(&self, env: &str, path: &str, content: &str) -> Result<Value, BuilderError> {
        if content.len() > MAX_FILE {
            return Err(BuilderError(
                413,
                format!("the file is over {MAX_FILE} bytes"),
            ));
        }
        let full = self.file(env, path).await?;
        if let Some(parent) = full.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| bad(format!("cannot make the folder of `{path}`: {e}")))?;
        }
        tokio::fs::write(&full, content)
            .await
            .map_err(|e| bad(format!("cannot write `{path}`: {e}")))?;
        Ok(json!({"path": path, "bytes": content.len()}))
    }

    pub async fn read(&self, env: &str, path: &str) -> Result<String, BuilderError> {
        let full = self.file(env, path).await?;
        let meta = tokio::fs::metadata(&full)
            .await
            .map_err(|_| BuilderError(404, format!("no file `{path}`")))?;
        if meta.len() > MAX_FILE as u64 {
            return Err(BuilderError(
                413,
                format!("`{path}` is over {MAX_FILE} bytes"),
            ));
        }
        let bytes = tokio::fs::read(&full)
            .await
            .map_err(|e| bad(format!("cannot read `{path}`: {e}")))?;
        String::from_utf8(bytes).map_err(|_| bad(format!("`{path}` is not UTF-8 text")))
    }

    /// Run `command` (`sh -c`) in /work, killed after `timeout`.
    pub async fn run(
        &self,
        env: &str,
        command: &str,
        timeout: Duration,
    ) -> Result<Value, BuilderError> {
        let timeout = timeout.min(MAX_RUN);
        let container = {
            let envs = self.envs.lock().await;
            envs.get(env)
                .map(|e| e.guard.id.clone())
                .ok_or_else(|| BuilderError(404, format!("no build environment `{env}`")))?
        };
        let secs = timeout.as_secs().max(1).to_string();
        // uv's settings (the environment's own variables are not set on the
        // container: `docker inspect` would show them).
        let mut cmd: Vec<String> = std::iter::once("env".to_owned())
            .chain(uv::UV_ENV.iter().map(|v| v.to_string()))
            .collect();
        cmd.extend([
            "timeout".into(),
            "-s".into(),
            "KILL".into(),
            secs,
            "sh".into(),
            "-c".into(),
            command.to_owned(),
        ]);
        let ran = self
            .docker()?
            .run_in(
                &container,
                cmd,
                Some("/work"),
                timeout + Duration::from_secs(5),
                MAX_OUTPUT,
            )
            .await?;
        let timed_out = ran.timed_out || ran.exit_code == Some(137);
        Ok(json!({
            "exit_code": ran.exit_code,
            "stdout": ran.stdout,
            "stderr": ran.stderr,
            "timed_out": timed_out,
        }))
    }

    pub async fn destroy(&self, env: &str) -> Result<Value, BuilderError> {
        let Some(mut gone) = self.envs.lock().await.remove(env) else {
            return Err(BuilderError(404, format!("no build environment `{env}`")));
        };
        gone.guard.remove().await;
        let _ = tokio::fs::remove_dir_all(&gone.dir).await;
        Ok(json!({"env_id": env, "destroyed": true}))
    }

    /// Remove every environment (at shutdown).
    pub async fn shutdown(&self) {
        let envs: Vec<Env> = self.envs.lock().await.drain().map(|(_, e)| e).collect();
        for mut e in envs {
            e.guard.remove().await;
            let _ = tokio::fs::remove_dir_all(&e.dir).await;
        }
    }
}
