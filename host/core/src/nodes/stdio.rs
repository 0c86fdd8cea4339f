//! Processes in node containers spoken to over stdio (MCP servers run from a
//! command) and idle containers to exec into (build environments): the node
//! backend's public interface for them. Only the Docker provider runs them
//! (`docker::stdio`); under another provider they answer
//! `backend_unavailable` with the reason.

use std::sync::Arc;

pub use super::docker::stdio::{ContainerGuard, Ran, StdioProcess, StdioSpec, tail};
use super::{DockerProvider, NodeBackend};
use crate::tool::CallError;

impl NodeBackend {
    fn stdio_provider(&self) -> Result<&Arc<DockerProvider>, CallError> {
        self.docker().ok_or_else(|| {
            CallError::BackendUnavailable(format!(
                "containers run from a command (MCP stdio servers, build environments) need the Docker node provider; this server's nodes come from {}",
                self.provider.kind()
            ))
        })
    }

    /// A fresh node container made as `spec` says, idling for execs,
    /// labelled for `session`; removed when the guard goes.
    pub async fn start_idle(
        &self,
        spec: &StdioSpec,
        session: &str,
    ) -> Result<(bollard::Docker, ContainerGuard), CallError> {
        self.stdio_provider()?.start_idle(spec, session).await
    }

    /// Start `spec.command` in a fresh node container for `session`.
    pub async fn spawn_stdio(
        &self,
        spec: &StdioSpec,
        session: &str,
    ) -> Result<(StdioProcess, ContainerGuard), CallError> {
        self.stdio_provider()?.spawn_stdio(spec, session).await
    }

    /// Run `cmd` in running container `container` to its end (at most
    /// `timeout`), keeping the last `keep` bytes of each output.
    pub async fn run_in(
        &self,
        container: &str,
        cmd: Vec<String>,
        working_dir: Option<&str>,
        timeout: std::time::Duration,
        keep: usize,
    ) -> Result<Ran, CallError> {
        self.stdio_provider()?
            .run_in(container, cmd, working_dir, timeout, keep)
            .await
    }
}
