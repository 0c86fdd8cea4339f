//! Direct answers to plain `tools/call` and `tools/list` requests on `/mcp`.
//!
//! rmcp serves a request by running a service for it: for a stateless
//! (2026-07-28) request a whole one is built, its serve loop spawned, and the
//! handler, its response and the loop's end each get a task; a session's
//! request goes through the session's worker and comes back as an SSE stream.
//! That costs about as much CPU again as the call itself (see `tests/README.md`,
//! the surfaces bench). [`answer`], in front of rmcp on `/mcp`, answers the
//! one request agents send over and over, a `tools/call` without progress,
//! itself: the body is parsed into rmcp's types ([`CallMessage`]: a
//! `tools/call` only, where rmcp's parse of any message tries every kind in
//! turn), the call runs through the same
//! [`super::call`] as in [`super::McpHandler`], and the answer is rmcp's
//! [`ServerJsonRpcMessage`], shaped for the protocol version as rmcp's
//! handler shapes it. No JSON-RPC is written by hand.
//! A plain `tools/list` is answered here too ([`list`]), from each tool's
//! JSON as rmcp writes it, made once.
//!
//! Everything else goes on to rmcp untouched, and so does any request the
//! checks here are not sure of: they are stricter than rmcp's own (a
//! foreign `Host` never gets here: `api::guard` refuses it on every route;
//! an `Origin`, `Accept` with parameters, any
//! `Mcp-Param-*` header, a version or `_meta` that is not exactly as expected,
//! a progress token, an unknown tool, an unknown MCP session...), so rmcp
//! gives every error answer, and a request is never accepted here that rmcp
//! would refuse. `TOOLHOST_MCP_DIRECT=0` turns the direct answers off (tests
//! compare both ways).
//!
//! Sessions: an MCP session is known here once its client sent
//! `notifications/initialized`; its calls are answered here if that came
//! with an `MCP-Protocol-Version` before 2026-07-28, and use the same
//! toolhost session as its rmcp-served requests ([`Link`]).
//! `notifications/cancelled` for a call answered here cancels it (and goes on
//! to rmcp too). As rmcp's session worker no longer sees every request, its
//! idle timeout is off; [`spawn_sweeper`] closes MCP sessions unused for the
//! toolhost session idle timeout instead.

mod answer;
mod list;
mod sweeper;

use answer::{answer_of, json_answer, session_answer};
pub use sweeper::spawn_sweeper;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, ClientJsonRpcMessage, ClientNotification,
    JsonRpcVersion2_0, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::body::read_bytes;
use crate::native::SESSION_HEADER;
use crate::state::AppState;
use toolhost_core::callers::Caller;
use toolhost_core::dispatch::CallOptions;
use toolhost_core::input::Nobody;
use toolhost_core::sessions::{Held, Session, Sessions, Unnamed, is_valid_session_id};

// Header names made once: a `&str` name is parsed again at every lookup.
pub(super) const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
const TOOLHOST_SESSION: HeaderName = HeaderName::from_static(SESSION_HEADER);

/// How long a session's call may take and still be answered with plain
/// JSON; a slower one gets an SSE stream at once (keep-alive comments, then
/// the answer), as rmcp's session answers are streams.
const JSON_WINDOW: Duration = Duration::from_millis(20);

/// Comments on a slow call's stream, so that proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The shared state of the direct answers.
pub struct Direct {
    state: AppState,
    enabled: bool,
    max_body_bytes: usize,
    /// MCP sessions past their handshake, by `Mcp-Session-Id`.
    sessions: Mutex<HashMap<String, Arc<Link>>>,
    epoch: Instant,
}

/// What an MCP session's rmcp handler and its direct answers share.
#[derive(Default)]
pub struct Link {
    /// The toolhost session the MCP session created, closed when it ends.
    pub(super) own: Mutex<Option<Arc<Session>>>,
    /// The protocol version the session negotiated, if its calls can be
    /// answered here.
    version: OnceLock<String>,
    /// Milliseconds since [`Direct::epoch`] of the last request.
    last_used_ms: AtomicU64,
    /// Calls answered directly, by JSON-RPC id: cancelled by
    /// `notifications/cancelled`.
    running: Mutex<HashMap<RequestId, CancellationToken>>,
    /// The client declared the tasks extension, or a capability to answer a
    /// tool's questions, at `initialize`: its calls may become tasks or ask,
    /// which rmcp's handler answers.
    pub(super) follows_tasks: std::sync::atomic::AtomicBool,
}

impl Link {
    /// The toolhost session of a request: the one `pinned` (its
    /// `X-Toolhost-Session`) names, else the MCP session's own, made on first
    /// use and opened again (marked used) on every call.
    pub(super) fn session(
        &self,
        sessions: &Sessions,
        who: &Caller,
        pinned: Option<&HeaderValue>,
    ) -> Result<Arc<Session>, toolhost_core::sessions::SessionError> {
        if let Some(id) = pinned {
            return pinned_session(sessions, who, id);
        }
        let mut own = self.own.lock().unwrap_or_else(|e| e.into_inner());
        let current = own.clone();
        let (s, created) = sessions.open(who, current.as_ref().map(|s| s.client_id()))?;
        if created && current.is_none() {
            tracing::debug!(session = s.id(), "MCP: new toolhost session");
        }
        *own = Some(s.clone());
        Ok(s)
    }
}

/// The toolhost session an `X-Toolhost-Session` header names (opened, so
/// made if new and marked used).
fn pinned_session(
    sessions: &Sessions,
    who: &Caller,
    id: &HeaderValue,
) -> Result<Arc<Session>, toolhost_core::sessions::SessionError> {
    let id = id.to_str().unwrap_or("\u{0}");
    sessions.open(who, Some(id)).map(|(s, _)| s)
}

impl Direct {
    pub fn new(state: AppState, max_body_bytes: usize) -> Arc<Self> {
        let enabled = std::env::var("TOOLHOST_MCP_DIRECT").map_or(true, |v| v != "0");
        Arc::new(Direct {
            state,
            enabled,
            max_body_bytes,
            sessions: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Link>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// MCP session `id` finished its handshake (`version`: the
    /// `MCP-Protocol-Version` its client sent then, if any). Its requests are
    /// timed for the idle sweep from now on; its calls are answered here if
    /// the version is a known one before 2026-07-28 (later ones are left to
    /// rmcp).
    pub(super) fn register(&self, id: &str, version: Option<&str>, link: &Arc<Link>) {
        let eligible = version.filter(|version| {
            ProtocolVersion::KNOWN_VERSIONS
                .iter()
                .any(|v| v.as_str() == *version)
                && *version < ProtocolVersion::V_2026_07_28.as_str()
        });
        if let Some(version) = eligible {
            let _ = link.version.set(version.to_owned()); // the first one stands
        }
        link.last_used_ms.store(self.now_ms(), Ordering::Relaxed);
        self.lock().insert(id.to_owned(), link.clone());
    }

    pub(super) fn unregister(&self, id: &str) {
        self.lock().remove(id);
    }

    fn link(&self, id: &str) -> Option<Arc<Link>> {
        self.lock().get(id).cloned()
    }

    /// How a POST would be answered here, judging by its headers alone;
    /// `link`: its MCP session's, if known.
    fn mode(&self, headers: &HeaderMap, link: Option<Arc<Link>>) -> Option<Mode> {
        if headers.contains_key(header::ORIGIN)
            || !is_json(headers)
            || !accepts_json_and_sse(headers)
            || headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
        {
            return None;
        }
        let length: usize = single(headers, header::CONTENT_LENGTH)?.parse().ok()?;
        if length > self.max_body_bytes {
            return None;
        }
        if let Some(pinned) = headers.get(&TOOLHOST_SESSION)
            && !pinned.to_str().is_ok_and(is_valid_session_id)
        {
            return None;
        }
        let version = single(headers, &MCP_PROTOCOL_VERSION)?;
        match single(headers, &MCP_SESSION_ID) {
            None if !headers.contains_key(&MCP_SESSION_ID)
                && version == ProtocolVersion::V_2026_07_28.as_str() =>
            {
                Some(Mode::Stateless)
            }
            Some(_) => {
                let link = link?;
                (link.version.get().map(String::as_str) == Some(version))
                    .then_some(Mode::Session(link))
            }
            None => None,
        }
    }
}

/// How a request is answered here.
enum Mode {
    /// 2026-07-28, no session: the version and capabilities are in `_meta`.
    Stateless,
    /// A request of a known MCP session (up to 2025-11-25).
    Session(Arc<Link>),
}

/// `/mcp`: answers what it can, passes the rest on to rmcp.
pub(super) async fn answer(direct: Arc<Direct>, rmcp: super::Rmcp, request: Request) -> Response {
    let session_id = request
        .headers()
        .get(&MCP_SESSION_ID)
        .and_then(|v| v.to_str().ok());
    let mut link = None;
    if let Some(id) = session_id {
        if request.method() == Method::DELETE {
            // Closed from now on, before rmcp's worker has wound down.
            direct.unregister(id);
        } else if let Some(known) = direct.link(id) {
            known.last_used_ms.store(direct.now_ms(), Ordering::Relaxed);
            link = Some(known);
        }
    }
    if request.method() == Method::DELETE {
        // rmcp accepts a session's end with 202; MCP clients (the Python SDK)
        // expect 200 or 204 and log anything else as a failure.
        let mut response = super::rmcp_answer(&rmcp, request).await;
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::OK;
        }
        return response;
    }
    if request.method() != Method::POST || !direct.enabled {
        return super::rmcp_answer(&rmcp, request).await;
    }
    let Some(mode) = direct.mode(request.headers(), link) else {
        return super::rmcp_answer(&rmcp, request).await;
    };
    let (parts, body) = request.into_parts();
    let bytes = match read_bytes(body, direct.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(e) => return e.into_response(),
    };
    let pass_on = |parts: Parts, bytes: Bytes| {
        let request = Request::from_parts(parts, Body::from(bytes));
        async move { super::rmcp_answer(&rmcp, request).await }
    };
    // A `tools/call` is parsed as one straight away: rmcp's parse of any
    // message tries each kind in turn and buffers the body's parts for each,
    // which costs as much as the rest of what is done here.
    match serde_json::from_slice::<CallMessage>(&bytes) {
        Ok(CallMessage {
            jsonrpc: JsonRpcVersion2_0,
            id,
            method: CallToolRequestMethod,
            params,
        }) => {
            if !direct.meta_ok(params.meta.as_ref(), &mode)
                || !direct.can_call(&parts.headers, &params, &mode)
            {
                return pass_on(parts, bytes).await;
            }
            let parent = super::trace::parent(params.meta.as_ref().map(|m| &m.0.0), Some(&parts));
            if parent.is_unknown() && !toolhost_core::telemetry::exporting() {
                return direct.call(parts, id, params, mode).await;
            }
            let tool = params.name.to_string();
            let session = single(&parts.headers, &MCP_SESSION_ID).map(str::to_owned);
            let call = super::trace::Call {
                method: "tools/call",
                tool: Some(&tool),
                task: None,
                link: None,
                id: &id.clone(),
                session: session.as_deref(),
                parent,
            };
            super::trace::within(call, direct.call(parts, id, params, mode)).await
        }
        Err(_) => {
            if let Ok(list) = serde_json::from_slice::<list::ListMessage>(&bytes)
                && let Some(answer) = direct.list(&parts, list, &mode)
            {
                return answer;
            }
            if let Mode::Session(link) = &mode
                && let Ok(ClientJsonRpcMessage::Notification(note)) =
                    serde_json::from_slice::<ClientJsonRpcMessage>(&bytes)
                && let ClientNotification::CancelledNotification(cancel) = &note.notification
                && let Some(id) = &cancel.params.request_id
            {
                let running = link.running.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(token) = running.get(id) {
                    token.cancel();
                }
            }
            // rmcp answers the rest (and cancels what it runs).
            pass_on(parts, bytes).await
        }
    }
}

/// A JSON-RPC `tools/call` request, of rmcp's types (which check the
/// `jsonrpc` and `method` values); `_meta` is in `params.meta`.
#[derive(serde::Deserialize)]
struct CallMessage {
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    method: CallToolRequestMethod,
    params: CallToolRequestParams,
}

impl Direct {
    /// Whether a request's `_meta` is one to answer here: no progress token
    /// (progress needs rmcp's stream); stateless, exactly the 2026-07-28
    /// version with all it requires; in a session, no version of its own.
    fn meta_ok(&self, meta: Option<&RequestMetaObject>, mode: &Mode) -> bool {
        let Some(meta) = meta else {
            return matches!(mode, Mode::Session(_));
        };
        if meta.get_progress_token().is_some() {
            return false;
        }
        match mode {
            Mode::Stateless => {
                let v2026 = ProtocolVersion::V_2026_07_28;
                meta.protocol_version().as_ref() == Some(&v2026)
                    && meta.missing_required_keys(&v2026).is_empty()
            }
            Mode::Session(_) => meta.protocol_version().is_none(),
        }
    }

    /// Whether the call, with its headers, is one to answer here.
    fn can_call(&self, headers: &HeaderMap, params: &CallToolRequestParams, mode: &Mode) -> bool {
        if params.input_responses.is_some() || params.request_state.is_some() {
            return false;
        }
        let name = params.name.as_ref();
        // An alias, a tool of a plugin still loading or an unknown one:
        // rmcp's handler resolves it or gives the error.
        let Some(tool) = self.state.dispatcher.catalog().get(name) else {
            return false;
        };
        // A call that may become a task (or must) is the handler's.
        let follows_tasks = match mode {
            Mode::Stateless => params
                .meta
                .as_ref()
                .and_then(|m| m.client_capabilities())
                .is_some_and(|c| c.supports_tasks() || !super::input::kinds(Some(&c)).is_empty()),
            Mode::Session(link) => link.follows_tasks.load(Ordering::Relaxed),
        };
        let task = super::tasks::decl(&tool).task;
        if task == toolhost_core::declared::TaskSupport::Required || follows_tasks {
            return false;
        }
        match mode {
            Mode::Stateless => {
                single(headers, &MCP_METHOD) == Some("tools/call")
                    && single(headers, &MCP_NAME) == Some(name)
            }
            Mode::Session(_) => true,
        }
    }

    /// Run the call and answer it.
    async fn call(
        self: &Arc<Self>,
        parts: Parts,
        id: RequestId,
        params: CallToolRequestParams,
        mode: Mode,
    ) -> Response {
        let sessions = self.state.dispatcher.sessions();
        let pinned = parts.headers.get(&TOOLHOST_SESSION);
        let who = crate::auth::caller_of(&parts.extensions);
        let held = match &mode {
            Mode::Session(link) => link.session(sessions, &who, pinned).map(|s| (s, None)),
            // Without `X-Toolhost-Session`, a session of its own that ends
            // with the request, even when the client goes away before the
            // answer.
            Mode::Stateless => sessions
                .hold(
                    &who,
                    pinned.map(|v| v.to_str().unwrap_or("\u{0}")),
                    Unnamed::Close,
                )
                .map(|h| (h.session().clone(), Some(h))),
        };
        let (session, held) = match held {
            Ok(s) => s,
            Err(e) => {
                let message = ServerJsonRpcMessage::error(super::session_error(e), Some(id));
                return json_answer(&message);
            }
        };
        let temporary = held.as_ref().is_some_and(Held::is_temporary);
        let name = params.name.to_string();
        let input = Value::Object(params.arguments.unwrap_or_default());
        let state = self.state.clone();
        let call = {
            let session = session.clone();
            // A temporary session's files are gone with the request.
            let note_written = !temporary;
            // A stateless client here can answer no question (one that
            // can is the handler's): those asked are its missing capabilities.
            let nobody = matches!(mode, Mode::Stateless).then(|| Arc::new(Nobody::default()));
            let ask = nobody
                .clone()
                .map(|n| n as Arc<dyn toolhost_core::input::Asker>);
            let options = CallOptions {
                ask,
                note_written,
                caller: Some(crate::auth::caller_of(&parts.extensions)),
                ..CallOptions::default()
            };
            async move {
                let result = super::call(&state, &session, &name, input, options).await;
                match nobody.and_then(|n| super::input::missing_capability(&result, &*n)) {
                    Some(e) => Err(e),
                    None => result,
                }
            }
        };
        match mode {
            Mode::Stateless => {
                let result = call.await;
                let mut message = answer_of(id, result, false);
                if let ServerJsonRpcMessage::Response(r) = &mut message {
                    r.result.fill_missing_cache_hints();
                }
                json_answer(&message)
            }
            Mode::Session(link) => session_answer(link, id, session, call).await,
        }
    }
}

/// The one value of header `name`, if there is exactly one and it is text.
fn single(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

fn is_json(headers: &HeaderMap) -> bool {
    single(headers, header::CONTENT_TYPE).is_some_and(|v| {
        let essence = v.split_once(';').map_or(v, |(essence, _)| essence);
        essence.trim().eq_ignore_ascii_case("application/json")
    })
}

/// `Accept` lists both JSON and SSE, without parameters (a `q=0` would
/// exclude one: such requests are left to rmcp).
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let Some(accept) = single(headers, header::ACCEPT) else {
        return false;
    };
    if accept.contains(';') {
        return false;
    }
    let mut json = false;
    let mut sse = false;
    for media in accept.split(',').map(str::trim) {
        json |= media.eq_ignore_ascii_case("application/json");
        sse |= media.eq_ignore_ascii_case("text/event-stream");
    }
    json && sse
}
