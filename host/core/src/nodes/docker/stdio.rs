//! A process in a node container spoken to over the stdin / stdout of an
//! attached `docker exec`: what an MCP server run from a command (stdio)
//! becomes. The container has the node hardening and no network unless
//! asked; it is removed when the process handle is dropped.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use bollard::container::LogOutput;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::CreateContainerOptionsBuilder;
use bytes::Bytes;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite};

use super::DockerProvider;
use super::containers::{container_name, hardened, missing_image};
use crate::tool::CallError;

/// Stderr kept for messages.
const STDERR_TAIL: usize = 4096;

/// What to run and how the container is made.
#[derive(Debug, Clone)]
pub struct StdioSpec {
    pub toolkit: String,
    pub image: String,
    pub command: Vec<String>,
    pub env: Vec<String>,
    /// `host:container:ro` binds.
    pub binds: Vec<String>,
    pub memory_mb: u32,
    pub cpus: f64,
    pub pids: u32,
    /// `none` or `host`.
    pub network: &'static str,
    /// Hold its CPUs and memory under the allocation rule while it lives
    /// (a long-lived container: a build environment), refused (429) when
    /// the host's share is taken.
    pub allocate: bool,
    /// GPUs it asks for (-1: all of an engine's); none: no GPU.
    pub gpus: Option<i64>,
}

/// The running process: its stdout to read, its stdin to write.
pub struct StdioProcess {
    pub container: String,
    pub output: Pin<Box<dyn AsyncRead + Send>>,
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
    pub stderr: Arc<Mutex<VecDeque<u8>>>,
}

/// Removes the container when the last holder lets go.
pub struct ContainerGuard {
    provider: Arc<DockerProvider>,
    pub id: String,
}

impl ContainerGuard {
    /// Remove the container now (at shutdown, when no task may run later).
    pub async fn remove(&mut self) {
        let id = std::mem::take(&mut self.id);
        if !id.is_empty() {
            self.provider.remove(&id).await;
        }
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let (provider, id) = (self.provider.clone(), std::mem::take(&mut self.id));
        if id.is_empty() {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { provider.remove(&id).await });
        }
    }
}

/// The last lines of a process's stderr.
pub fn tail(stderr: &Mutex<VecDeque<u8>>) -> String {
    let bytes: Vec<u8> = stderr
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .copied()
        .collect();
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

impl DockerProvider {
    /// A fresh node container made as `spec` says, idling (`sleep infinity`)
    /// for execs, labelled for `session`; removed when the guard goes.
    pub async fn start_idle(
        self: &Arc<Self>,
        spec: &StdioSpec,
        session: &str,
    ) -> Result<(bollard::Docker, ContainerGuard), CallError> {
        if self.life.is_closing() {
            return Err(CallError::BackendUnavailable(
                "the server is shutting down".into(),
            ));
        }
        let engine = match spec.gpus {
            Some(count) => self.engines.gpu_engine(&spec.toolkit, count)?,
            None => {
                self.engines
                    .engine_for(
                        session,
                        Some(&spec.image),
                        spec.cpus,
                        u64::from(spec.memory_mb),
                        false,
                    )
                    .await?
            }
        };
        let docker = self.docker(engine).await?;
        if self.engines.has_archive() {
            self.engines
                .ensure_image(engine, &docker, &spec.image, false)
                .await
                .map_err(CallError::BackendUnavailable)?;
        }
        let labels = self.labels(&spec.toolkit, session);
        let mut host_config = hardened(
            spec.network,
            i64::from(spec.memory_mb) << 20,
            spec.cpus,
            spec.pids,
            spec.binds.clone(),
        );
        host_config.device_requests = spec.gpus.map(super::gpu::device_requests);
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: Some(vec!["sleep".into(), "infinity".into()]),
            labels: Some(labels),
            host_config: Some(host_config),
            ..Default::default()
        };
        let name = container_name(&spec.toolkit);
        let allocation = &self.engines.member(engine).allocation;
        if spec.allocate {
            super::lock(allocation)
                .reserve(&name, spec.cpus, u64::from(spec.memory_mb))
                .map_err(|why| {
                    CallError::Overloaded(format!("the container cannot start: {why}"))
                })?;
        }
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        self.engines
            .settle(&name, engine, spec.cpus, u64::from(spec.memory_mb));
        if let Some(count) = spec.gpus {
            self.engines.hold_gpus(&name, count);
        }
        let created = docker.create_container(Some(options), body).await;
        let id = created.as_ref().ok().map(|c| c.id.as_str());
        super::lock(allocation).created(&name, id);
        self.engines.created(&name, id);
        let created = match created {
            Ok(c) => c,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => return Err(missing_image(&spec.image)),
            Err(e) => {
                return Err(self.engine_error(engine, "creating a container", e).await.1);
            }
        };
        let guard = ContainerGuard {
            provider: self.clone(),
            id: created.id.clone(),
        };
        docker
            .start_container(&created.id, None)
            .await
            .map_err(|e| {
                CallError::BackendUnavailable(format!("Docker refused starting a container: {e}"))
            })?;
        Ok((docker, guard))
    }

    /// Start `spec.command` in a fresh node container for `session`.
    pub async fn spawn_stdio(
        self: &Arc<Self>,
        spec: &StdioSpec,
        session: &str,
    ) -> Result<(StdioProcess, ContainerGuard), CallError> {
        let (docker, guard) = self.start_idle(spec, session).await?;
        let id = guard.id.clone();
        let (output, input) = crate::nodes::node::exec_attached(
            &docker,
            &id,
            spec.command.clone(),
            Some(spec.env.clone()),
            None,
            None,
        )
        .await
        .map_err(|e| CallError::BackendUnavailable(format!("cannot start the command: {e}")))?;
        let stderr: Arc<Mutex<VecDeque<u8>>> = Arc::default();
        let kept = stderr.clone();
        let toolkit = spec.toolkit.clone();
        // Stdout as bytes; stderr kept (its tail) and logged.
        let stdout = output.filter_map(move |item| {
            let out = match item {
                Ok(LogOutput::StdOut { message }) => Some(Ok::<Bytes, std::io::Error>(message)),
                Ok(LogOutput::StdErr { message }) => {
                    tracing::debug!(
                        toolkit,
                        "stdio: {}",
                        String::from_utf8_lossy(&message).trim_end()
                    );
                    let mut tail = kept.lock().unwrap_or_else(|e| e.into_inner());
                    tail.extend(message.iter());
                    while tail.len() > STDERR_TAIL {
                        tail.pop_front();
                    }
                    None
                }
                Ok(_) => None,
                Err(e) => Some(Err(std::io::Error::other(e.to_string()))),
            };
            std::future::ready(out)
        });
        Ok((
            StdioProcess {
                container: id,
                output: Box::pin(tokio_util::io::StreamReader::new(stdout)),
                input,
                stderr,
            },
            guard,
        ))
    }
}

/// What a command run to its end printed, and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    pub exit_code: Option<i64>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

impl DockerProvider {
    /// Run `cmd` in running container `container` to its end (at most
    /// `timeout`; then its exec is left to the container's removal), keeping
    /// the last `keep` bytes of each output.
    pub async fn run_in(
        &self,
        container: &str,
        cmd: Vec<String>,
        working_dir: Option<&str>,
        timeout: std::time::Duration,
        keep: usize,
    ) -> Result<Ran, CallError> {
        let docker = self.docker(self.engines.home_of(container)).await?;
        let exec = docker
            .create_exec(
                container,
                bollard::exec::CreateExecOptions {
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    cmd: Some(cmd),
                    working_dir: working_dir.map(str::to_owned),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| CallError::BackendUnavailable(format!("cannot run the command: {e}")))?;
        let started = docker
            .start_exec(&exec.id, None)
            .await
            .map_err(|e| CallError::BackendUnavailable(format!("cannot run the command: {e}")))?;
        let bollard::exec::StartExecResults::Attached { mut output, .. } = started else {
            return Err(CallError::Internal("the exec did not attach".into()));
        };
        let (mut stdout, mut stderr) = (VecDeque::new(), VecDeque::new());
        let push = |buf: &mut VecDeque<u8>, bytes: &[u8]| {
            buf.extend(bytes.iter());
            while buf.len() > keep {
                buf.pop_front();
            }
        };
        let read = async {
            while let Some(item) = output.next().await {
                match item {
                    Ok(LogOutput::StdOut { message }) => push(&mut stdout, &message),
                    Ok(LogOutput::StdErr { message }) => push(&mut stderr, &message),
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        };
        let timed_out = tokio::time::timeout(timeout, read).await.is_err();
        let exit_code = if timed_out {
            None
        } else {
            docker
                .inspect_exec(&exec.id)
                .await
                .ok()
                .and_then(|i| i.exit_code)
        };
        let text = |b: VecDeque<u8>| {
            String::from_utf8_lossy(&b.into_iter().collect::<Vec<_>>()).into_owned()
        };
        Ok(Ran {
            exit_code,
            stdout: text(stdout),
            stderr: text(stderr),
            timed_out,
        })
    }
}
