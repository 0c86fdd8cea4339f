//! Open connections, bounded: at most `[server] max_connections` in all and
//! `max_connections_per_peer` from one address. A connection beyond them is
//! accepted only to be told so (`503` with `Retry-After`, closed), so a
//! client that opens thousands of sockets costs file descriptors for a
//! moment, not memory and tasks for as long as it likes.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// The answer to a connection beyond the limits.
fn refusal() -> Vec<u8> {
    let body = r#"{"error":{"kind":"overloaded","message":"too many open connections: retry later"},"status":"error"}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Open connections, in all and by peer address.
#[derive(Default)]
struct Open {
    total: usize,
    by_peer: HashMap<IpAddr, usize>,
}

/// A listener whose connections count towards the limits while open.
pub struct Limited {
    listener: TcpListener,
    open: Arc<Mutex<Open>>,
    max: usize,
    max_per_peer: usize,
}

impl Limited {
    pub fn new(listener: TcpListener, max: usize, max_per_peer: usize) -> Self {
        Limited {
            listener,
            open: Arc::default(),
            max,
            max_per_peer,
        }
    }

    /// A place for a connection from `peer`, if the limits leave one.
    fn admit(&self, peer: IpAddr) -> Option<Counted> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mine = open.by_peer.get(&peer).copied().unwrap_or(0);
        if open.total >= self.max || mine >= self.max_per_peer {
            return None;
        }
        open.total += 1;
        *open.by_peer.entry(peer).or_default() += 1;
        Some(Counted {
            open: self.open.clone(),
            peer,
        })
    }
}

/// A connection's place in the count, given back when it closes.
struct Counted {
    open: Arc<Mutex<Open>>,
    peer: IpAddr,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                open.by_peer.remove(&self.peer);
            }
        }
    }
}

/// An admitted connection (no Nagle: SSE frames go out at once).
pub struct Conn {
    stream: TcpStream,
    _counted: Counted,
}

impl Listener for Limited {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors and the like: wait, as axum does.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Some(counted) = self.admit(peer.ip()) else {
                tracing::warn!(target: "toolhost::audit", %peer, "connection refused: too many open");
                tokio::spawn(async move {
                    let mut stream = stream;
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_secs(1),
                        stream.write_all(&refusal()),
                    )
                    .await;
                });
                continue;
            };
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot set TCP_NODELAY");
            }
            return (
                Conn {
                    stream,
                    _counted: counted,
                },
                peer,
            );
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_whole_http_answer() {
        let bytes = refusal();
        let text = std::str::from_utf8(&bytes).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let declared: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(body.len(), declared);
        serde_json::from_str::<serde_json::Value>(body.trim()).unwrap();
    }
}
