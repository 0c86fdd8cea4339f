//! One kept-alive HTTP/1.1 connection, driven by the task that sends on it.
//!
//! hyper's usual client runs each connection in a task of its own and hands
//! it the request and takes the answer back through channels: two task
//! wake-ups a request, and on a multi-threaded runtime a wake-up often
//! rouses another worker (a futex and an interrupt: ~130 us a call on this
//! project's 2-core VMs, docs/benchmarks.md). A [`Link`] keeps hyper's
//! connection future beside its sender and polls both from the caller's own
//! task ([`crate::quiet::drive`]), so the only wake-ups left are the socket's.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Body;
use hyper::client::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::quiet::drive;

/// What a link runs over: TCP, TLS over TCP, a socket in another namespace.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

type Io = TokioIo<Box<dyn Stream>>;

/// Why an exchange did not end with an answer.
#[derive(Debug)]
pub enum Failure {
    /// The connection closed before the request was written: nothing was
    /// sent, the request is given back (to send on a new connection).
    NotSent(Box<Request<Full<Bytes>>>),
    /// The request failed on the way or its answer broke off.
    Failed(hyper::Error),
    /// The answer's body grew past the cap.
    TooLarge { size: usize, limit: usize },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NotSent(_) => f.write_str("the connection closed before the request was sent"),
            Failure::Failed(e) => write!(f, "{e}"),
            Failure::TooLarge { limit, .. } => write!(f, "the answer is longer than {limit} bytes"),
        }
    }
}

/// An answer read whole.
pub struct Answer {
    pub head: hyper::http::response::Parts,
    pub body: Bytes,
}

/// One HTTP/1.1 connection: hyper's sender and its connection future.
pub struct Link {
    sender: http1::SendRequest<Full<Bytes>>,
    conn: http1::Connection<Io, Full<Bytes>>,
    /// The connection future finished: the link cannot be used again.
    closed: bool,
    /// Whether the link carried an exchange already (a reused link may
    /// have been closed by its peer while it was idle).
    pub reused: bool,
}

impl Link {
    /// A link over an open stream.
    pub async fn open(stream: Box<dyn Stream>) -> Result<Link, hyper::Error> {
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        Ok(Link {
            sender,
            conn,
            closed: false,
            reused: false,
        })
    }

    /// Whether the link may carry another exchange.
    pub fn is_open(&self) -> bool {
        !self.closed
    }

    /// Send `request` and read its answer, at most `max_bytes` of body.
    pub async fn exchange(
        &mut self,
        request: Request<Full<Bytes>>,
        max_bytes: usize,
    ) -> Result<Answer, Failure> {
        if !self.ready().await {
            return Err(Failure::NotSent(Box::new(request)));
        }
        let response = self.respond(request).await?;
        let (head, body) = response.into_parts();
        let body = self.read(body, max_bytes).await?;
        self.reused = true;
        Ok(Answer { head, body })
    }

    /// Poll the connection future once within `cx`, noting its end.
    fn poll_conn(
        conn: &mut http1::Connection<Io, Full<Bytes>>,
        closed: &mut bool,
        cx: &mut Context<'_>,
    ) {
        if !*closed && Pin::new(conn).poll(cx).is_ready() {
            *closed = true;
        }
    }

    /// Wait until the connection takes a request (the last answer's end
    /// read); false when it closed instead.
    async fn ready(&mut self) -> bool {
        let Link {
            sender,
            conn,
            closed,
            ..
        } = self;
        drive(|cx| {
            Self::poll_conn(conn, closed, cx);
            if *closed {
                return Poll::Ready(false);
            }
            sender.poll_ready(cx).map(|r| r.is_ok())
        })
        .await
    }

    async fn respond(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<hyper::body::Incoming>, Failure> {
        let Link {
            sender,
            conn,
            closed,
            ..
        } = self;
        let mut pending = std::pin::pin!(sender.try_send_request(request));
        drive(|cx| {
            Self::poll_conn(conn, closed, cx);
            match pending.as_mut().poll(cx) {
                Poll::Ready(Ok(response)) => Poll::Ready(Ok(response)),
                Poll::Ready(Err(mut e)) => Poll::Ready(Err(match e.take_message() {
                    Some(request) => Failure::NotSent(Box::new(request)),
                    None => Failure::Failed(e.into_error()),
                })),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    async fn read(
        &mut self,
        mut body: hyper::body::Incoming,
        max_bytes: usize,
    ) -> Result<Bytes, Failure> {
        let Link { conn, closed, .. } = self;
        let mut pieces: Vec<Bytes> = Vec::new();
        let mut size = 0;
        let read = drive(|cx| {
            loop {
                Self::poll_conn(conn, closed, cx);
                let frame = match Pin::new(&mut body).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => frame,
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(Failure::Failed(e))),
                    Poll::Ready(None) => return Poll::Ready(Ok(())),
                    Poll::Pending => return Poll::Pending,
                };
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                size += data.len();
                if size > max_bytes {
                    return Poll::Ready(Err(Failure::TooLarge {
                        size,
                        limit: max_bytes,
                    }));
                }
                pieces.push(data);
            }
        })
        .await;
        if read.is_err() {
            // What is left of the answer is unread: the link is spent.
            *closed = true;
        }
        read?;
        // Most answers come in one piece: kept as it came.
        Ok(match pieces.len() {
            0 => Bytes::new(),
            1 => pieces.remove(0),
            _ => Bytes::from(pieces.concat()),
        })
    }
}

#[cfg(test)]
#[path = "link_tests.rs"]
mod tests;
