//! MCP (Model Context Protocol) over streamable HTTP at `/mcp`, served by the
//! official Rust SDK (`rmcp`): no JSON-RPC is written here, and no tool logic
//! either. Every call goes through [`toolhost_core::dispatch`] like any other surface.
//!
//! - `tools/list`: the catalog, in the same shape as `GET /tools?format=mcp`.
//! - `tools/call`: dispatch; text, JSON (also as `structuredContent` when it is
//!   the whole result), images and other binary content (an embedded blob) are
//!   mapped; tool failures and limit breaches are results with `isError: true`
//!   whose text starts with the error kind (`[timeout] ...`). An unknown tool
//!   is a JSON-RPC error (-32602), as the MCP spec asks.
//! - Progress: a call whose request carries a `progressToken` forwards the
//!   plugin's progress reports as `notifications/progress`.
//! - Cancellation: `notifications/cancelled` drops the dispatch future, which
//!   tears down the wasm store mid-call, or discards the Docker node whose
//!   command was running (its container is removed, so the command stops).
//! - `notifications/tools/list_changed` on every catalog change (hot reload):
//!   on the session's standalone stream (protocol versions up to 2025-11-25),
//!   or through `subscriptions/listen` (2026-07-28, stateless).
//! - Sessions: an `X-Toolhost-Session` header pins a toolhost session (the
//!   same header as the native API). Without it, each MCP session gets its own
//!   toolhost session (workspace, Docker nodes), closed when the MCP session
//!   ends; a stateless request (2026-07-28) without it gets a session of its own
//!   that ends with the request.
//! - Answers: a plain `tools/call` (no progress token) and a plain
//!   `tools/list` are answered by [`direct`] without rmcp's per-request machinery, in the same shape; a
//!   session's request-wise SSE stream is sent whole when the call ends
//!   within [`COALESCE_WINDOW`] ([`coalesce_sse`]); a stateless request that
//!   emits nothing before its result is answered with plain JSON.

mod calls;
mod direct;
mod features;
mod handler;
mod input;
mod listing;
mod logging;
mod render;
mod tasks;
mod trace;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::state::AppState;
use calls::call;
pub use handler::McpHandler;
use handler::session_error;
use render::{failure, success, unknown_tool};
use toolhost_core::callers::Caller;

/// `/mcp`: rmcp's service, one [`McpHandler`] per MCP session (or per
/// stateless request), behind the [`direct`] answers and [`coalesce_sse`].
/// `shutdown` ends every session and stream, so a graceful shutdown does not
/// wait on open SSE streams. MCP sessions unused for the toolhost session
/// idle timeout are closed.
pub fn router(
    state: AppState,
    max_body_bytes: usize,
    allowed_hosts: Option<Vec<String>>,
    shutdown: CancellationToken,
) -> Router<AppState> {
    let direct = direct::Direct::new(state.clone(), max_body_bytes);
    // `json_response`: a stateless (2026-07-28) request whose handler sends
    // nothing before its result is answered with plain JSON, not an SSE
    // stream; one with progress notifications still gets a stream.
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.clone())
        .with_max_request_body_bytes(max_body_bytes)
        .with_json_response(true);
    config = match allowed_hosts {
        Some(hosts) => config.with_allowed_hosts(hosts),
        None => config.disable_allowed_hosts(),
    };
    // Idle sessions are closed by the sweeper, which also sees the requests
    // answered directly.
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = None;
    let manager = Arc::new(manager);
    let cap = SessionCap {
        manager: manager.clone(),
        max: state.limits.max_mcp_sessions,
        max_body_bytes,
        owners: Default::default(),
        closed: Default::default(),
    };
    direct::spawn_sweeper(
        direct.clone(),
        manager.clone(),
        (
            state.dispatcher.sessions().idle_timeout(),
            state.limits.mcp_unfinished_timeout,
        ),
        shutdown,
    );
    // One for the server: a stateless request's handler ends with it.
    let tasks = tasks::Tasks::default();
    let mrtr = Arc::new(input::Mrtr::default());
    let service = {
        let direct = direct.clone();
        StreamableHttpService::new(
            move || {
                Ok(McpHandler::new(
                    state.clone(),
                    direct.clone(),
                    tasks.clone(),
                    mrtr.clone(),
                ))
            },
            manager,
            config,
        )
    };
    Router::new().route_service(
        "/mcp",
        Mcp {
            direct,
            rmcp: Arc::new(service),
            cap: Arc::new(cap),
        },
    )
}

type Rmcp = Arc<StreamableHttpService<McpHandler, LocalSessionManager>>;

/// The `/mcp` route: the [`direct`] answers, else rmcp's service with its
/// SSE answers coalesced ([`coalesce_sse`]). One service rather than layers
/// (axum clones a route's service and every layer of it for each request),
/// and rmcp's behind an `Arc` (a clone of it copies its whole config).
#[derive(Clone)]
struct Mcp {
    direct: Arc<direct::Direct>,
    rmcp: Rmcp,
    cap: Arc<SessionCap>,
}

/// At most `max` MCP sessions (`[sessions] max_mcp_sessions`): each holds
/// memory until it is closed or idles out, so a flood of `initialize`
/// calls is refused rather than kept.
struct SessionCap {
    manager: Arc<LocalSessionManager>,
    max: usize,
    max_body_bytes: usize,
    /// The caller of every MCP session, recorded from the answer that made it.
    owners: std::sync::Mutex<std::collections::HashMap<String, Caller>>,
    /// Sessions closed by their clients since memory was last given back.
    closed: std::sync::atomic::AtomicUsize,
}

/// Sessions closed by clients (`DELETE /mcp`) between two give-backs of
/// memory to the system: the give-back walks the heap, so not for each.
const CLOSES_PER_GIVE_BACK: usize = 256;

impl SessionCap {
    /// A client closed its session: after [`CLOSES_PER_GIVE_BACK`] of them,
    /// what they held goes back to the system (glibc keeps freed memory for
    /// reuse: 10,000 closed sessions kept 560 MB).
    fn note_closed(&self) {
        use std::sync::atomic::Ordering;
        if self.closed.fetch_add(1, Ordering::Relaxed) + 1 >= CLOSES_PER_GIVE_BACK {
            self.closed.store(0, Ordering::Relaxed);
            toolhost_core::system::give_back_memory();
        }
    }

    /// A request naming another caller's MCP session is made to name one
    /// that never existed, so that it gets exactly the answer to an unknown
    /// session (same status, same body, same time).
    fn keep_to_owner(&self, request: &mut Request, who: &Caller) {
        let Some(id) = request.headers().get(&direct::MCP_SESSION_ID) else {
            return;
        };
        let id = id.to_str().unwrap_or_default();
        let owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        let theirs = owners.get(id).is_some_and(|owner| !owner.same(who));
        drop(owners);
        if theirs {
            tracing::info!(
                caller = who.name(),
                rule = "sessions belong to their caller",
                "MCP: a request named another caller's session: answered as unknown"
            );
            let none = uuid::Uuid::new_v4().simple().to_string();
            request.headers_mut().insert(
                &direct::MCP_SESSION_ID,
                axum::http::HeaderValue::from_str(&none).expect("a uuid is header-safe"),
            );
        }
    }

    /// Record who made the MCP session an answer opens, forgetting closed
    /// sessions' owners when the record grows past twice the sessions allowed.
    async fn note_owner(&self, made: Option<String>, who: &Caller) {
        let Some(id) = made else {
            return;
        };
        let full = {
            let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
            owners.insert(id, who.clone());
            owners.len() > self.max.saturating_mul(2).max(64)
        };
        if full {
            let live: std::collections::HashSet<String> = self
                .manager
                .sessions
                .read()
                .await
                .keys()
                .map(|k| k.to_string())
                .collect();
            self.owners
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|id, _| live.contains(id));
        }
    }

    /// The live MCP sessions `who` made.
    async fn held_by(&self, who: &Caller) -> usize {
        let live = self.manager.sessions.read().await;
        let owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        owners
            .iter()
            .filter(|(id, owner)| owner.same(who) && live.contains_key(id.as_str()))
            .count()
    }

    /// `request` as it came, or the answer that refuses it: an
    /// `initialize` while `max` sessions are open (503), or while its
    /// caller holds its `max_sessions` MCP sessions (429): one caller
    /// cannot take every session, initialized or not.
    async fn admit(&self, request: Request, who: &Caller) -> Result<Request, Response> {
        let opens = request.method() == Method::POST
            && !request.headers().contains_key(&direct::MCP_SESSION_ID);
        if !opens {
            return Ok(request);
        }
        let own = who.policy().max_sessions;
        let all_full = self.manager.sessions.read().await.len() >= self.max;
        let held = if own > 0 { self.held_by(who).await } else { 0 };
        let caller_full = own > 0 && held >= own;
        if !all_full && !caller_full {
            return Ok(request);
        }
        let (parts, body) = request.into_parts();
        let bytes = super::body::read_bytes(body, self.max_body_bytes)
            .await
            .map_err(IntoResponse::into_response)?;
        let message: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        if message.get("method").and_then(|m| m.as_str()) != Some("initialize") {
            return Ok(Request::from_parts(parts, Body::from(bytes)));
        }
        let (status, text) = if caller_full {
            tracing::info!(
                caller = who.name(),
                rule = "auth.callers.max_sessions",
                held,
                "MCP: initialize refused: the caller holds its most sessions"
            );
            (
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "this caller has {held} MCP sessions open, its limit: close unused ones \
                     (DELETE /mcp) or retry later"
                ),
            )
        } else {
            tracing::warn!(
                max = self.max,
                "MCP: initialize refused: the most sessions are open"
            );
            (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "too many MCP sessions are open ({}, [sessions] max_mcp_sessions): \
                     close unused ones (DELETE /mcp) or retry later",
                    self.max
                ),
            )
        };
        let error = serde_json::json!({
            "jsonrpc": "2.0",
            "id": message.get("id").cloned().unwrap_or_default(),
            "error": {"code": -32000, "message": text},
        });
        let mut response = axum::Json(error).into_response();
        *response.status_mut() = status;
        response.headers_mut().insert(
            header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("30"),
        );
        if caller_full {
            response.extensions_mut().insert(who.clone());
        }
        Err(response)
    }
}

/// rmcp's answer to a request, coalesced.
async fn rmcp_answer(rmcp: &Rmcp, request: Request) -> Response {
    let post = request.method() == Method::POST;
    coalesce_sse(post, rmcp.handle(request).await.map(Body::new)).await
}

impl tower::Service<Request> for Mcp {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let (direct, rmcp, cap) = (self.direct.clone(), self.rmcp.clone(), self.cap.clone());
        Box::pin(async move {
            let who = crate::auth::caller_of(request.extensions());
            let mut request = request;
            cap.keep_to_owner(&mut request, &who);
            let opens = !request.headers().contains_key(&direct::MCP_SESSION_ID);
            let closes = request.method() == Method::DELETE;
            Ok(match cap.admit(request, &who).await {
                Ok(request) => {
                    let response = direct::answer(direct, rmcp, request).await;
                    if opens {
                        let made = response
                            .headers()
                            .get(&direct::MCP_SESSION_ID)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned);
                        cap.note_owner(made, &who).await;
                    }
                    if closes && response.status().is_success() {
                        cap.note_closed();
                    }
                    response
                }
                Err(refused) => refused,
            })
        })
    }
}

/// How long a POST's SSE answer is held back so that it goes out in one
/// write: see [`coalesce_sse`].
const COALESCE_WINDOW: Duration = Duration::from_millis(20);

/// Beyond this much held back (a flood of progress events, a large result),
/// the stream is passed on at once.
const COALESCE_MAX_BYTES: usize = 1 << 20;

/// rmcp's answer to a request: an SSE answer to a POST (a session's request-wise
/// stream: a priming event, maybe progress, the result, then the end) is held
/// back until its stream ends, for at most [`COALESCE_WINDOW`] and
/// [`COALESCE_MAX_BYTES`]. A fast call's answer then leaves as one response
/// with a `Content-Length`, in one write, instead of one chunk per event each
/// waking the connection; a slower call's stream is passed on as it is when
/// the window closes, with what came so far, so its events are not delayed
/// beyond the window. The client sees the same events in the same order
/// either way.
async fn coalesce_sse(post: bool, response: Response) -> Response {
    let sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !post || !sse {
        return response;
    }
    let (mut parts, mut body) = response.into_parts();
    let mut held = BytesMut::new();
    let window = tokio::time::sleep(COALESCE_WINDOW);
    tokio::pin!(window);
    let ended = loop {
        tokio::select! {
            biased;
            frame = body.frame() => match frame {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        held.extend_from_slice(&data);
                    }
                    if held.len() >= COALESCE_MAX_BYTES {
                        break false;
                    }
                }
                // rmcp's streams cannot fail; should one, what came is sent.
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "MCP: SSE stream failed while coalescing");
                    break true;
                }
                None => break true,
            },
            () = &mut window => break false,
        }
    };
    if ended {
        parts.headers.remove(header::TRANSFER_ENCODING);
        return Response::from_parts(parts, Body::from(held.freeze()));
    }
    let head = futures::stream::once(async move { Ok::<_, axum::Error>(held.freeze()) });
    let rest = body.into_data_stream();
    Response::from_parts(parts, Body::from_stream(head.chain(rest)))
}
