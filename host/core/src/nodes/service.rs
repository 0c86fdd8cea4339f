//! The HTTP link to a service node: a container whose own process serves
//! HTTP on `internal_port` (seed 004's `docker` runtime).
//!
//! The host reaches that port inside the container's own network namespace:
//! a short-lived thread enters the namespace (`setns` on the container's
//! `/proc/<pid>/ns/net`, opened once when the node starts), connects to
//! `127.0.0.1:<port>` there and exits; the socket stays in the container's
//! namespace and is used from the host like any other. So the container
//! needs no network of its own (`--network none`), nothing is published, and
//! no container address is ever contacted. Entering a namespace needs
//! `CAP_SYS_ADMIN` (root); without it a service toolkit is unavailable, with
//! that reason. Connections are kept alive and reused.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bollard::Docker;
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::Full;

use super::node_error::NodeError;
use crate::outbound::link::{Failure, Link};
use crate::outbound::pool::{Pool, Trouble};

/// The longest answer read from a service.
const MAX_BODY: usize = 64 << 20;
/// Idle connections kept, and for how long (the API toolkits' figures).
const MAX_IDLE: usize = 64;
const IDLE_FOR: Duration = Duration::from_secs(60);
/// The pool's name for the one origin a link reaches.
const SERVICE: &str = "service";
/// How often the health path is asked while the service starts: often at
/// first (a start is most often quick), then less.
const HEALTH_EVERY: Duration = Duration::from_millis(10);
const HEALTH_LATER: Duration = Duration::from_millis(100);

/// What a service answered.
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub body: Bytes,
}

pub struct ServiceLink {
    netns: File,
    port: u16,
    /// Kept-alive connections (one origin: the service).
    idle: Pool,
    in_flight: AtomicUsize,
    waiter: tokio::task::JoinHandle<()>,
}

impl Drop for ServiceLink {
    fn drop(&mut self) {
        self.waiter.abort();
    }
}

impl ServiceLink {
    /// Link to started container `container`: open its network namespace,
    /// follow its life (`alive` falls when it exits, its last log lines go
    /// to `logs`), and wait until `health_path` answers 2xx.
    pub async fn start(
        docker: &Docker,
        container: &str,
        port: u16,
        health_path: &str,
        within: Duration,
        alive: Arc<AtomicBool>,
        logs: Arc<Mutex<std::collections::VecDeque<u8>>>,
    ) -> Result<ServiceLink, NodeError> {
        let inspected = docker
            .inspect_container(
                container,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .map_err(|e| NodeError::Io(e.to_string()))?;
        let pid = inspected
            .state
            .and_then(|s| s.pid)
            .filter(|p| *p > 0)
            .ok_or_else(|| NodeError::Died("the service exited at once".into()))?;
        let netns = File::open(format!("/proc/{pid}/ns/net")).map_err(|e| {
            NodeError::Io(format!(
                "cannot open the container's network namespace: {e}"
            ))
        })?;
        let waiter = tokio::spawn({
            let (docker, id, alive) = (docker.clone(), container.to_owned(), alive.clone());
            async move {
                // One item when the container stops (an error for a
                // non-zero exit status, or a broken connection).
                let _ = docker.wait_container(&id, None).next().await;
                alive.store(false, Ordering::Release);
                let tail = last_logs(&docker, &id).await;
                let mut buffer = logs.lock().unwrap_or_else(|e| e.into_inner());
                buffer.clear();
                buffer.extend(tail.bytes());
            }
        });
        let link = ServiceLink {
            netns,
            port,
            idle: Pool::new(MAX_IDLE, IDLE_FOR),
            in_flight: AtomicUsize::new(0),
            waiter,
        };
        let started = Instant::now();
        loop {
            if !alive.load(Ordering::Acquire) {
                return Err(NodeError::Died(last_logs(docker, container).await));
            }
            let probe = link.call("GET", health_path, None, None, Duration::from_secs(2));
            match probe.await {
                Ok(answer) if (200..300).contains(&answer.status) => return Ok(link),
                Err(NodeError::Io(e)) if e.contains("Operation not permitted") => {
                    return Err(NodeError::Io(format!(
                        "cannot enter the container's network namespace ({e}): service toolkits need CAP_SYS_ADMIN"
                    )));
                }
                _ => {}
            }
            if started.elapsed() >= within {
                let tail = last_logs(docker, container).await;
                return Err(NodeError::Io(format!(
                    "{health_path} did not answer 2xx within {within:?} ({tail})"
                )));
            }
            let pause = if started.elapsed() < Duration::from_secs(2) {
                HEALTH_EVERY
            } else {
                HEALTH_LATER
            };
            tokio::time::sleep(pause).await;
        }
    }

    pub fn is_busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    /// One request to the service, answered within `timeout`.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Bytes>,
        content_type: Option<&str>,
        timeout: Duration,
    ) -> Result<Answer, NodeError> {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        struct Done<'a>(&'a AtomicUsize);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let _done = Done(&self.in_flight);
        let request = || {
            let mut request = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header("host", format!("127.0.0.1:{}", self.port));
            if let Some(ct) = content_type {
                request = request.header("content-type", ct);
            }
            // The trace the call is in (the caller's span, or the host's
            // client span), so the service's own spans join it.
            for (name, value) in crate::telemetry::fields() {
                request = request.header(name, value);
            }
            request
                .body(Full::new(body.clone().unwrap_or_default()))
                .map_err(|e| NodeError::Io(e.to_string()))
        };
        let work = async {
            // A kept connection the service closed while it was idle:
            // nothing was sent, once more on a new one (never sent twice).
            let connect = || self.connect();
            let answer = self
                .idle
                .exchange(SERVICE, connect, request, MAX_BODY, false)
                .await
                .map_err(|trouble| match trouble {
                    Trouble::Ours(e) => e,
                    Trouble::Link(Failure::TooLarge { limit, .. }) => {
                        NodeError::Io(format!("reading the answer: longer than {limit} bytes"))
                    }
                    Trouble::Link(e) => {
                        NodeError::Io(format!("the service broke the connection: {e}"))
                    }
                })?;
            let content_type = answer
                .head
                .headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            Ok(Answer {
                status: answer.head.status.as_u16(),
                content_type,
                body: answer.body,
            })
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| NodeError::Timeout(timeout))?
    }

    /// A new connection to the service, made in its namespace.
    async fn connect(&self) -> Result<Link, NodeError> {
        let fd = self
            .netns
            .try_clone()
            .map_err(|e| NodeError::Io(e.to_string()))?;
        let port = self.port;
        let stream = tokio::task::spawn_blocking(move || connect_in(&fd, port))
            .await
            .map_err(|e| NodeError::Io(e.to_string()))?
            .map_err(|e| NodeError::Io(e.to_string()))?;
        stream
            .set_nonblocking(true)
            .map_err(|e| NodeError::Io(e.to_string()))?;
        let stream =
            tokio::net::TcpStream::from_std(stream).map_err(|e| NodeError::Io(e.to_string()))?;
        Link::open(Box::new(QuickAck(stream)))
            .await
            .map_err(|e| NodeError::Io(e.to_string()))
    }
}

/// A connection that acknowledges what it receives at once. Many services
/// (Python's `http.server` among them) write a response's head and body in
/// two sends with Nagle's algorithm on: the body then waits for the head's
/// acknowledgement, which a kept-alive connection delays by 40 ms. Asking for
/// a quick ACK before each read removes that stall.
pub struct QuickAck(pub tokio::net::TcpStream);

impl tokio::io::AsyncRead for QuickAck {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let one: libc::c_int = 1;
        // SAFETY: a valid socket fd and an int option of the right size;
        // failure only loses the optimisation.
        unsafe {
            libc::setsockopt(
                self.0.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_QUICKACK,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for QuickAck {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// A TCP connection to `127.0.0.1:port` inside network namespace `netns`,
/// made on a thread of its own that enters the namespace and then ends (no
/// thread that serves anything else ever changes namespace).
fn connect_in(netns: &File, port: u16) -> std::io::Result<std::net::TcpStream> {
    let fd = netns.as_raw_fd();
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                // SAFETY: setns on this thread only, with a namespace fd we
                // own; the thread ends right after connecting.
                if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                std::net::TcpStream::connect_timeout(
                    &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
                    Duration::from_secs(2),
                )
                .inspect(|s| {
                    let _ = s.set_nodelay(true);
                })
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the connecting thread panicked")))
    })
}

/// The container's last log lines, for error messages.
async fn last_logs(docker: &Docker, container: &str) -> String {
    let options = bollard::query_parameters::LogsOptionsBuilder::default()
        .stdout(true)
        .stderr(true)
        .tail("8")
        .build();
    let mut out = Vec::new();
    let mut logs = docker.logs(container, Some(options));
    let read = async {
        while let Some(Ok(item)) = logs.next().await {
            out.extend_from_slice(&item.into_bytes());
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), read).await;
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        "no output from the service".into()
    } else {
        format!("service output: {}", lines.join(" | "))
    }
}
