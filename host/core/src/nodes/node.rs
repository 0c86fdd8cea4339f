//! One node: a container and the link to what runs in it. Either a driver,
//! spoken to over the stdin / stdout of an attached `docker exec` (never over
//! TCP), or the container's own HTTP service, reached inside the
//! container's network namespace ([`super::service`]).
//!
//! The driver protocol is JSON lines. The driver first writes
//! `{"ready":true,...}`; then each request `{"id":N,"op":...,...args}` gets one
//! response `{"id":N,"ok":true,"result":{...}}` or
//! `{"id":N,"ok":false,"error":{"kind","message"}}`. Requests go one at a time;
//! a response whose caller has gone (a cancelled call) is dropped.

pub use super::node_error::NodeError;
use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecResults};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio_util::io::ReaderStream;

use super::service::{Answer, ServiceLink};

/// Longest protocol line accepted from a driver (a screenshot is a few MB).
const MAX_LINE: usize = 64 << 20;
/// Driver stderr kept for error messages.
const STDERR_TAIL: usize = 4096;

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

pub struct Node {
    pub container: String,
    pub toolkit: String,
    alive: Arc<AtomicBool>,
    /// The driver's stderr, or the service's last log lines.
    stderr: Arc<Mutex<VecDeque<u8>>>,
    last_used: Mutex<Instant>,
    link: Link,
}

enum Link {
    Driver(Driver),
    Service(ServiceLink),
}

struct Driver {
    input: tokio::sync::Mutex<Pin<Box<dyn AsyncWrite + Send>>>,
    /// One request at a time, in order.
    turn: tokio::sync::Mutex<()>,
    pending: Pending,
    next_id: AtomicU64,
    reader: tokio::task::JoinHandle<()>,
    /// What carries the streams (an exec session), kept while the node lives.
    _keep: Box<dyn Send + Sync>,
}

/// A chunk of what a driver wrote.
pub enum Output {
    Stdout(bytes::Bytes),
    Stderr(bytes::Bytes),
}

type OutputStream = Pin<Box<dyn futures::Stream<Item = Result<Output, String>> + Send>>;

impl Drop for Driver {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Node {
    /// Start `cmd` in running container `container` and wait for the driver's
    /// ready line.
    pub async fn attach(
        docker: &Docker,
        container: &str,
        toolkit: &str,
        cmd: Vec<String>,
        user: Option<&str>,
        ready_within: Duration,
    ) -> Result<Node, NodeError> {
        let (output, input) = exec_attached(docker, container, cmd, None, user, Some("/workspace"))
            .await
            .map_err(NodeError::Io)?;
        let output = output.filter_map(|item| async move {
            match item {
                Ok(LogOutput::StdOut { message }) => Some(Ok(Output::Stdout(message))),
                Ok(LogOutput::StdErr { message }) => Some(Ok(Output::Stderr(message))),
                Ok(_) => None,
                Err(e) => Some(Err(e.to_string())),
            }
        });
        Node::driver(
            container,
            toolkit,
            Box::pin(output),
            input,
            (),
            ready_within,
        )
        .await
    }

    /// A driver already started elsewhere, spoken to over its `stdin` and
    /// `stdout` (its `stderr` kept for error messages): the same protocol
    /// whatever carries it (a Kubernetes pod exec, for one). `keep` lives as
    /// long as the node (what owns the streams, e.g. the exec session);
    /// `gone` resolves when what carries the streams has ended, which also
    /// ends the node (a transport that fails may drop its stdout without
    /// ever closing it).
    #[allow(clippy::too_many_arguments)]
    pub async fn from_stdio(
        container: &str,
        toolkit: &str,
        stdout: impl AsyncRead + Send + 'static,
        stderr: impl AsyncRead + Send + 'static,
        stdin: impl AsyncWrite + Send + 'static,
        keep: impl Send + Sync + 'static,
        gone: impl std::future::Future<Output = String> + Send + 'static,
        ready_within: Duration,
    ) -> Result<Node, NodeError> {
        let text = |e: std::io::Error| e.to_string();
        // The driver's output ends with its stdout (its stderr may stay
        // open), or with its transport.
        let out = ReaderStream::new(stdout)
            .map(move |r| r.map(Output::Stdout).map_err(text))
            .chain(futures::stream::once(async {
                Err("the driver's stdout closed".to_owned())
            }));
        let err = ReaderStream::new(stderr).map(move |r| r.map(Output::Stderr).map_err(text));
        let gone = futures::stream::once(gone).map(Err);
        let output = futures::stream::select(futures::stream::select(out, err), gone);
        Node::driver(
            container,
            toolkit,
            Box::pin(output),
            Box::pin(stdin),
            keep,
            ready_within,
        )
        .await
    }

    /// The driver protocol over `output` and `input`.
    async fn driver(
        container: &str,
        toolkit: &str,
        mut output: OutputStream,
        input: Pin<Box<dyn AsyncWrite + Send>>,
        keep: impl Send + Sync + 'static,
        ready_within: Duration,
    ) -> Result<Node, NodeError> {
        let pending: Pending = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let stderr: Arc<Mutex<VecDeque<u8>>> = Arc::default();
        let (ready_tx, ready_rx) = oneshot::channel::<Value>();
        let reader = tokio::spawn({
            let (pending, alive, stderr) = (pending.clone(), alive.clone(), stderr.clone());
            let toolkit = toolkit.to_owned();
            async move {
                let mut ready = Some(ready_tx);
                let mut line: Vec<u8> = Vec::new();
                while let Some(item) = output.next().await {
                    match item {
                        Ok(Output::Stdout(message)) => {
                            for chunk in message.split_inclusive(|b| *b == b'\n') {
                                line.extend_from_slice(chunk);
                                if line.len() > MAX_LINE {
                                    tracing::warn!(
                                        toolkit,
                                        "driver line over the limit; closing the node"
                                    );
                                    alive.store(false, Ordering::Release);
                                    pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
                                    return;
                                }
                                if line.ends_with(b"\n") {
                                    deliver(&line, &pending, &mut ready, &toolkit);
                                    line.clear();
                                }
                            }
                        }
                        Ok(Output::Stderr(message)) => {
                            tracing::debug!(
                                toolkit,
                                "driver: {}",
                                String::from_utf8_lossy(&message).trim_end()
                            );
                            let mut tail = stderr.lock().unwrap_or_else(|e| e.into_inner());
                            tail.extend(message.iter());
                            while tail.len() > STDERR_TAIL {
                                tail.pop_front();
                            }
                        }
                        Err(e) => {
                            tracing::debug!(toolkit, error = %e, "driver stream error");
                            break;
                        }
                    }
                }
                alive.store(false, Ordering::Release);
                // Dropping the senders wakes every waiting request with an error.
                pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
            }
        });
        let node = Node {
            container: container.to_owned(),
            toolkit: toolkit.to_owned(),
            alive,
            stderr,
            last_used: Mutex::new(Instant::now()),
            link: Link::Driver(Driver {
                input: tokio::sync::Mutex::new(input),
                turn: tokio::sync::Mutex::new(()),
                pending,
                next_id: AtomicU64::new(1),
                reader,
                _keep: Box::new(keep),
            }),
        };
        match tokio::time::timeout(ready_within, ready_rx).await {
            Ok(Ok(_)) => Ok(node),
            Ok(Err(_)) => Err(NodeError::Died(node.stderr_tail())),
            Err(_) => Err(NodeError::Timeout(ready_within)),
        }
    }

    /// Link to started container `container`, whose own process serves
    /// HTTP on `port`: ready once `health_path` answers 2xx.
    pub async fn service(
        docker: &Docker,
        container: &str,
        toolkit: &str,
        port: u16,
        health_path: &str,
        ready_within: Duration,
    ) -> Result<Node, NodeError> {
        let alive = Arc::new(AtomicBool::new(true));
        let stderr: Arc<Mutex<VecDeque<u8>>> = Arc::default();
        let link = ServiceLink::start(
            docker,
            container,
            port,
            health_path,
            ready_within,
            alive.clone(),
            stderr.clone(),
        )
        .await?;
        Ok(Node {
            container: container.to_owned(),
            toolkit: toolkit.to_owned(),
            alive,
            stderr,
            last_used: Mutex::new(Instant::now()),
            link: Link::Service(link),
        })
    }

    /// One HTTP request to a service node (see [`ServiceLink::call`]).
    pub async fn http(
        &self,
        method: &str,
        path: &str,
        body: Option<bytes::Bytes>,
        content_type: Option<&str>,
        timeout: Duration,
    ) -> Result<Answer, NodeError> {
        let Link::Service(link) = &self.link else {
            return Err(NodeError::Io("not a service node".into()));
        };
        self.touch();
        if !self.is_alive() {
            return Err(NodeError::Died(self.stderr_tail()));
        }
        let answer = link.call(method, path, body, content_type, timeout).await;
        self.touch();
        match answer {
            // A broken connection: did the service die? (The engine tells
            // within a moment.)
            Err(NodeError::Io(e)) => {
                for _ in 0..50 {
                    if !self.is_alive() {
                        // Its last output arrives right after.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        return Err(NodeError::Died(self.stderr_tail()));
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(NodeError::Io(e))
            }
            other => other,
        }
    }

    /// A service node's answer to GET `path` (its health path), without
    /// counting as a use (a look must not keep an idle node alive).
    pub async fn check(&self, path: &str, timeout: Duration) -> Result<u16, NodeError> {
        let Link::Service(link) = &self.link else {
            return Err(NodeError::Io("not a service node".into()));
        };
        if !self.is_alive() {
            return Err(NodeError::Died(self.stderr_tail()));
        }
        let answer = link.call("GET", path, None, None, timeout).await?;
        Ok(answer.status)
    }

    /// The node's engine is gone: it counts as dead now, and a request
    /// waiting on it ends at once (as [`NodeError::Died`]).
    pub fn sever(&self) {
        self.alive.store(false, Ordering::Release);
        if let Link::Driver(d) = &self.link {
            d.pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Whether a request is in progress.
    pub fn is_busy(&self) -> bool {
        match &self.link {
            Link::Driver(d) => d.turn.try_lock().is_err(),
            Link::Service(s) => s.is_busy(),
        }
    }

    pub fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// The last lines the driver wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let bytes: Vec<u8> = tail.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        if text.is_empty() {
            "no output from the driver".to_owned()
        } else {
            format!(
                "driver stderr: {}",
                text.lines()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join(" | ")
            )
        }
    }

    /// What the session is told on its next call after this node died.
    pub fn stopped_note(&self) -> String {
        format!(
            "the previous {} node stopped ({})",
            self.toolkit,
            self.stderr_tail()
        )
    }

    /// Send `op` with `args` (a JSON object) and wait up to `timeout` for the
    /// response line.
    pub async fn request(
        &self,
        op: &str,
        args: Value,
        timeout: Duration,
    ) -> Result<Value, NodeError> {
        let Link::Driver(driver) = &self.link else {
            return Err(NodeError::Io("not a driver node".into()));
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let _turn = tokio::time::timeout_at(deadline, driver.turn.lock())
            .await
            .map_err(|_| NodeError::Timeout(timeout))?;
        self.touch();
        if !self.is_alive() {
            return Err(NodeError::Died(self.stderr_tail()));
        }
        let id = driver.next_id.fetch_add(1, Ordering::Relaxed);
        let mut request = match args {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        request.insert("id".into(), json!(id));
        request.insert("op".into(), json!(op));
        let mut line = serde_json::to_vec(&request).map_err(|e| NodeError::Io(e.to_string()))?;
        line.push(b'\n');
        let (tx, rx) = oneshot::channel();
        driver
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        // Forget the request however this ends (a cancelled call included).
        let _forget = Forget(&driver.pending, id);
        {
            let mut input = driver.input.lock().await;
            let write = async {
                input.write_all(&line).await?;
                input.flush().await
            };
            tokio::time::timeout_at(deadline, write)
                .await
                .map_err(|_| NodeError::Timeout(timeout))?
                .map_err(|e| NodeError::Io(e.to_string()))?;
        }
        let answer = tokio::time::timeout_at(deadline, rx).await;
        self.touch();
        match answer {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err(NodeError::Died(self.stderr_tail())),
            Err(_) => Err(NodeError::Timeout(timeout)),
        }
    }
}

struct Forget<'a>(&'a Pending, u64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.1);
    }
}

/// The output stream of an attached `docker exec`.
pub type ExecOutput =
    Pin<Box<dyn futures::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

/// Start `cmd` in running container `container` with its stdin, stdout and
/// stderr attached: what every process toolhost talks to in a container
/// (a driver, an MCP server) starts with.
pub async fn exec_attached(
    docker: &Docker,
    container: &str,
    cmd: Vec<String>,
    env: Option<Vec<String>>,
    user: Option<&str>,
    working_dir: Option<&str>,
) -> Result<(ExecOutput, Pin<Box<dyn AsyncWrite + Send>>), String> {
    let exec = docker
        .create_exec(
            container,
            CreateExecOptions {
                attach_stdin: Some(true),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                cmd: Some(cmd),
                env,
                user: user.map(str::to_owned),
                working_dir: working_dir.map(str::to_owned),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    match docker
        .start_exec(&exec.id, None)
        .await
        .map_err(|e| e.to_string())?
    {
        StartExecResults::Attached { output, input } => Ok((output, input)),
        StartExecResults::Detached => Err("the exec did not attach".into()),
    }
}

/// Route one protocol line: the ready line, or a response to its request.
fn deliver(
    line: &[u8],
    pending: &Pending,
    ready: &mut Option<oneshot::Sender<Value>>,
    toolkit: &str,
) {
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(toolkit, error = %e, "driver wrote a line that is not JSON");
            return;
        }
    };
    if value.get("ready").is_some() {
        if let Some(tx) = ready.take() {
            let _ = tx.send(value);
        }
        return;
    }
    let Some(id) = value.get("id").and_then(Value::as_u64) else {
        tracing::warn!(toolkit, line = %value, "driver response without an id");
        return;
    };
    let sender = pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
    if let Some(tx) = sender {
        let _ = tx.send(value);
    }
}
