//! MCP (Model Context Protocol) over streamable HTTP at `/mcp`, served by the
//! official Rust SDK (`rmcp`): no JSON-RPC is written here, and no tool logic
//! either. Every call goes through [`crate::dispatch`] like any other surface.
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
//! - Answers: a plain `tools/call` (no progress token) is answered by
//!   [`direct`] without rmcp's per-request machinery, in the same shape; a
//!   session's request-wise SSE stream is sent whole when the call ends
//!   within [`COALESCE_WINDOW`] ([`coalesce_sse`]); a stateless request that
//!   emits nothing before its result is answered with plain JSON.

mod direct;
mod features;
mod input;
mod logging;
mod tasks;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{Method, header};
use axum::response::Response;
use base64::Engine as _;
use bytes::BytesMut;
use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CompleteRequestParams, CompleteResult, ContentBlock, GetPromptRequestParams, GetPromptResponse,
    GetTaskParams, GetTaskResult, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, MetaObject, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    Resource, ResourceContents, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
    UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::error::ApiError;
use super::formats;
use super::native::SESSION_HEADER;
use crate::declared::TaskSupport;
use crate::dispatch::{CallOptions, CallOutput};
use crate::input::Asker as _;
use crate::sessions::{Session, SessionError, Sessions};
use crate::tool::{CallError, Content, ProgressSink};

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
    let direct = direct::Direct::new(state.clone(), max_body_bytes, allowed_hosts.as_deref());
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
    direct::spawn_sweeper(
        direct.clone(),
        manager.clone(),
        state.dispatcher.sessions().idle_timeout(),
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
        let (direct, rmcp) = (self.direct.clone(), self.rmcp.clone());
        Box::pin(async move { Ok(direct::answer(direct, rmcp, request).await) })
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

/// The MCP server of one MCP session.
pub struct McpHandler {
    state: AppState,
    direct: Arc<direct::Direct>,
    /// What this MCP session shares with its direct answers: its own
    /// toolhost session, closed when it ends.
    link: Arc<direct::Link>,
    /// The MCP session's id, once it is known to the direct answers.
    registered: Mutex<Option<String>>,
    /// Forwards catalog changes as `notifications/tools/list_changed`.
    list_changed: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// `logging/setLevel` and the forwarding of the session's log records;
    /// `resources/subscribe` and the watch of the subscribed files.
    logging: logging::Logging,
    /// The server's tasks.
    tasks: tasks::Tasks,
    /// The server's key for stateless input rounds.
    mrtr: Arc<input::Mrtr>,
}

impl McpHandler {
    fn new(
        state: AppState,
        direct: Arc<direct::Direct>,
        tasks: tasks::Tasks,
        mrtr: Arc<input::Mrtr>,
    ) -> Self {
        McpHandler {
            state,
            direct,
            tasks,
            mrtr,
            link: Arc::default(),
            registered: Mutex::new(None),
            list_changed: Mutex::new(None),
            logging: logging::Logging::default(),
        }
    }

    /// The toolhost session of a request: the one its `X-Toolhost-Session`
    /// header names, else this MCP session's own.
    fn session(&self, context: &RequestContext<RoleServer>) -> Result<Arc<Session>, McpError> {
        let pinned = context
            .extensions
            .get::<Parts>()
            .and_then(|parts| parts.headers.get(SESSION_HEADER));
        self.link
            .session(self.state.dispatcher.sessions(), pinned)
            .map_err(session_error)
    }

    /// A stateless request's own toolhost session ends with the request, but
    /// not while a task of it runs: it is taken from the handler, and the
    /// returned closure closes it when the call ends.
    fn keep_own_session(&self, context: &RequestContext<RoleServer>) -> impl FnOnce() + use<> {
        let kept = (!lasting(context))
            .then(|| {
                self.link
                    .own
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
            })
            .flatten();
        let sessions = self.state.dispatcher.sessions().clone();
        move || {
            if let Some(session) = kept {
                close_own(sessions, session);
            }
        }
    }
}

impl Drop for McpHandler {
    fn drop(&mut self) {
        if let Some(task) = self
            .list_changed
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
        if let Some(id) = self
            .registered
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            self.direct.unregister(&id);
        }
        let own = self
            .link
            .own
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(session) = own {
            close_own(self.state.dispatcher.sessions().clone(), session);
        }
    }
}

/// Whether a request is of the stateless revision (2026-07-28 on): its
/// questions are answered in another request.
fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Whether a request's toolhost session outlives it: an MCP session's, or
/// one named by `X-Toolhost-Session` (a stateless request's own session ends
/// with it: links to its files would lead nowhere).
fn lasting(context: &RequestContext<RoleServer>) -> bool {
    has_header(context, "mcp-session-id") || has_header(context, SESSION_HEADER)
}

/// Whether the HTTP request of `context` carried header `name`.
fn has_header(context: &RequestContext<RoleServer>, name: &str) -> bool {
    context
        .extensions
        .get::<Parts>()
        .is_some_and(|p| p.headers.contains_key(name))
}

/// Close the toolhost session an MCP session (or a stateless request) made
/// for itself, when that ends: the one close of every surface, in a task of
/// its own (this runs from `Drop`).
fn close_own(sessions: Arc<Sessions>, session: Arc<Session>) {
    let id = session.id().to_owned();
    drop(session);
    tokio::spawn(async move {
        match sessions.close(&id).await {
            Ok(_) => tracing::debug!(session = %id, "MCP: own toolhost session closed"),
            Err(e) => {
                tracing::warn!(session = %id, error = %e, "MCP: could not delete the workspace of its own toolhost session")
            }
        }
    });
}

/// A session that cannot be opened, as the shared renderer says it, in
/// JSON-RPC's terms: the caller's fault is an invalid request.
fn session_error(e: SessionError) -> McpError {
    let rendered = ApiError::from(e);
    let data = Some(json!({"kind": rendered.kind}));
    if rendered.status.is_client_error() {
        McpError::invalid_request(format!("{SESSION_HEADER}: {}", rendered.message), data)
    } else {
        McpError::internal_error(rendered.message, data)
    }
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        #[expect(deprecated, reason = "logging stays in 2025-11-25, which we serve")]
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .enable_prompts_list_changed()
            .enable_resources_subscribe()
            .enable_tool_list_changed()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolhost", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools of a toolhost server: WebAssembly plugins run in a sandbox per call; \
             shell, notebook and browser tools run in a container per session. Files \
             written by one tool are visible to the others of the same session.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self
            .state
            .dispatcher
            .catalog()
            .tools()
            .iter()
            .filter_map(|t| {
                let mut listed = formats::mcp(t);
                listed["name"] = Value::String(tasks::listed_name(t));
                match serde_json::from_value::<Tool>(listed) {
                    Ok(tool) => Some(tool),
                    Err(e) => {
                        tracing::warn!(tool = %t.id, error = %e, "MCP: tool left out of tools/list");
                        None
                    }
                }
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // A tool of a plugin still compiling is not unknown: the call waits
        // for it (or ends with a 503-like tool error), as on every surface.
        let catalog = self.state.dispatcher.catalog();
        let Some(id) = tasks::resolve(catalog, &request.name) else {
            return Err(unknown_tool(&request.name));
        };
        let name = id.as_str();
        let decl = catalog
            .get(name)
            .map_or(Default::default(), |t| tasks::decl(&t));
        let support = decl.task;
        let can_follow = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        if support == TaskSupport::Required && !can_follow {
            return Err(tasks::tasks_required());
        }
        let session = self.session(&context)?;
        let input = Value::Object(request.arguments.unwrap_or_default());
        let caps = context.client_capabilities();
        if can_follow && support != TaskSupport::Forbidden {
            let on_end = self.keep_own_session(&context);
            let session_mode = has_header(&context, "mcp-session-id");
            let asker = input::TaskAsker::new(input::kinds(caps.as_ref()));
            // Stateless, a tool that asks first: what it asks before its
            // task exists is asked in rounds (InputRequiredResult).
            let rounds = if decl.asks_first && is_stateless(&context) {
                Some(self.mrtr.replay(
                    name,
                    &input,
                    request.request_state.as_deref(),
                    request.input_responses.clone(),
                    &context,
                )?)
            } else {
                None
            };
            let asked = rounds.clone().map(|r| (r, input.clone()));
            return match self
                .tasks
                .run(
                    &self.state,
                    tasks::Call {
                        session,
                        tool: id.clone(),
                        input,
                        support,
                        note_written: lasting(&context),
                        notify: session_mode.then(|| context.peer.clone()),
                        rounds,
                    },
                    asker,
                    on_end,
                )
                .await
            {
                tasks::Outcome::Task(task) => Ok(task.into()),
                tasks::Outcome::Asked => match asked {
                    Some((replay, input)) => self
                        .mrtr
                        .input_required(name, &input, &replay)
                        .map(CallToolResponse::from),
                    None => Err(McpError::internal_error("questions without rounds", None)),
                },
                tasks::Outcome::Now(Err(CallError::NotFound(_))) => Err(unknown_tool(name)),
                tasks::Outcome::Now(Err(e)) => Ok(failure(&e).into()),
                tasks::Outcome::Now(Ok(out)) => Ok(success(out).into()),
            };
        }
        // Stateless (2026-07-28): questions are answered in another request.
        let stateless = is_stateless(&context);
        let (ask, replay): (Option<Arc<dyn crate::input::Asker>>, _) = if stateless {
            let replay = self.mrtr.replay(
                name,
                &input,
                request.request_state.as_deref(),
                request.input_responses.clone(),
                &context,
            )?;
            (Some(replay.clone()), Some(replay))
        } else {
            let kinds = input::kinds(caps.as_ref());
            let ask: Option<Arc<dyn crate::input::Asker>> = (!kinds.is_empty()).then(|| {
                Arc::new(input::PeerAsker {
                    peer: context.peer.clone(),
                    can: crate::input::Can::new(kinds),
                }) as _
            });
            (ask, None)
        };
        let asked = replay.as_ref().map(|r| (r.clone(), input.clone()));

        let (progress_tx, mut progress_rx) = ProgressSink::channel();
        let token = context.meta.get_progress_token();
        let progress = token.is_some().then_some(progress_tx);
        let call = call(
            &self.state,
            &session,
            name,
            input,
            progress,
            ask,
            lasting(&context),
        );
        // Progress goes out while the call runs, and all of it before the
        // result: the forwarder ends when the call drops its sender.
        let forward = async {
            let Some(token) = token else { return };
            let mut reports = 0.0;
            while let Some(p) = progress_rx.recv().await {
                reports += 1.0;
                let mut note =
                    ProgressNotificationParam::new(token.clone(), p.done.unwrap_or(reports))
                        .with_message(p.message);
                if let Some(total) = p.total {
                    note = note.with_total(total);
                }
                if context.peer.notify_progress(note).await.is_err() {
                    return; // the client is gone; the call goes on until cancelled
                }
            }
        };
        tokio::select! {
            (result, ()) = async { tokio::join!(call, forward) } => {
                // A round that ended on questions.
                if let Some((replay, input)) = asked {
                    if !replay.pending().is_empty() {
                        return self.mrtr.input_required(name, &input, &replay).map(CallToolResponse::from);
                    }
                    if let Some(e) = input::missing_capability(&result, &*replay) {
                        return Err(e);
                    }
                }
                result.map(CallToolResponse::from)
            }
            () = context.ct.cancelled() => {
                tracing::info!(tool = name, session = session.id(), "MCP: call cancelled by the client");
                Err(McpError::internal_error("the call was cancelled", None))
            }
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(features::list_prompts(self.state.dispatcher.catalog()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let catalog = self.state.dispatcher.catalog();
        let mut arguments = request.arguments.unwrap_or_default();
        // Required arguments left out are asked for, of a client that can
        // answer a form: in a second request (2026-07-28) or on the
        // session's stream. Else the prompt's own error says what is missing.
        if let Some(question) = features::missing_arguments(catalog, &request.name, &arguments) {
            let answers = if is_stateless(&context) {
                let key = format!("prompt:{}", request.name);
                let given = Value::Object(arguments.clone());
                let replay = self.mrtr.replay(
                    &key,
                    &given,
                    request.request_state.as_deref(),
                    request.input_responses.clone(),
                    &context,
                )?;
                match replay.ask(vec![question]).await {
                    Err(crate::input::AskError::Pending) => {
                        return self
                            .mrtr
                            .input_required(&key, &given, &replay)
                            .map(GetPromptResponse::from);
                    }
                    answers => answers,
                }
            } else {
                let kinds = input::kinds(context.client_capabilities().as_ref());
                let asker = input::PeerAsker {
                    peer: context.peer.clone(),
                    can: crate::input::Can::new(kinds),
                };
                asker.ask(vec![question]).await
            };
            if let Some(answer) = answers.ok().and_then(|mut a| a.pop())
                && answer["action"] == "accept"
                && let Some(content) = answer["content"].as_object()
            {
                for (k, v) in content {
                    arguments.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        features::get_prompt(catalog, &request.name, Some(arguments)).map(GetPromptResponse::from)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let session = self.session(&context)?;
        let state = self.state.clone();
        let cursor = request.and_then(|r| r.cursor);
        tokio::task::spawn_blocking(move || {
            features::list_resources(state.dispatcher.catalog(), &session, cursor.as_deref())
        })
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(features::list_resource_templates(
            self.state.dispatcher.catalog(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let session = self.session(&context)?;
        features::read_resource(self.state.dispatcher.catalog(), session, &request.uri)
            .await
            .map(ReadResourceResponse::from)
    }

    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let session = self.session(&context)?;
        self.logging
            .subscribe(request.uri, session, context.peer.clone(), &self.state);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.logging.unsubscribe(&request.uri);
        Ok(())
    }

    #[expect(deprecated, reason = "logging stays in 2025-11-25, which we serve")]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let session = self.session(&context)?;
        self.logging
            .set_level(request.level, &session, context.peer.clone(), &self.state);
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let session = self.session(&context).ok();
        let state = self.state.clone();
        tokio::task::spawn_blocking(move || {
            features::complete(state.dispatcher.catalog(), session.as_deref(), &request)
        })
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // From now on the session's plain calls can be answered directly,
        // and its requests keep it from the idle sweep.
        let headers = context.extensions.get::<Parts>().map(|p| &p.headers);
        let header = |name: &str| headers.and_then(|h| h.get(name)?.to_str().ok());
        if let Some(id) = header("mcp-session-id") {
            let follows = context.peer.peer_info().is_some_and(|info| {
                info.capabilities.supports_tasks()
                    || !input::kinds(Some(&info.capabilities)).is_empty()
            });
            self.link
                .follows_tasks
                .store(follows, std::sync::atomic::Ordering::Relaxed);
            self.direct
                .register(id, header("mcp-protocol-version"), &self.link);
            *self.registered.lock().unwrap_or_else(|e| e.into_inner()) = Some(id.to_owned());
        }
        // Session mode: the standalone stream carries list_changed.
        let mut changes = self.state.dispatcher.catalog().subscribe();
        changes.mark_unchanged();
        let shutdown = self.state.shutdown.clone();
        let peer = context.peer;
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    () = shutdown.cancelled() => return,
                }
                // A plugin's prompts come and go with it.
                if peer.notify_tool_list_changed().await.is_err()
                    || peer.notify_prompt_list_changed().await.is_err()
                    || peer.is_transport_closed()
                {
                    return;
                }
            }
        });
        let old = self
            .list_changed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(task);
        if let Some(old) = old {
            old.abort();
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.tasks
            .manager
            .get_task(&request.task_id)
            .map(GetTaskResult::new)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks
            .manager
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.manager.cancel_task(&request.task_id)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Workspace files, watched like `resources/subscribe`'s.
        let files: Vec<String> = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|uri| features::workspace_path(uri).is_some())
            .take(logging::MAX_SUBSCRIPTIONS)
            .cloned()
            .collect();
        let mut accepted = SubscriptionFilter::builder()
            .tools_list_changed()
            .prompts_list_changed()
            .build();
        if !files.is_empty() {
            accepted.resource_subscriptions = Some(files);
        }
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        // 2026-07-28: `subscriptions/listen` carries list_changed, and the
        // updates of the workspace files it names (of the toolhost session
        // its `X-Toolhost-Session` names).
        let mut changes = self.state.dispatcher.catalog().subscribe();
        changes.mark_unchanged();
        let files = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let watched = if files.is_empty() {
            None
        } else {
            let session = self.session(context.request_context())?;
            let watched = logging::watch(&session, &files);
            Some((session, watched))
        };
        let shutdown = self.state.shutdown.clone();
        loop {
            let look = async {
                match watched {
                    Some(_) => tokio::time::sleep(logging::WATCH_EVERY).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    // What the listener asked for (the sink refuses the rest).
                    let sink = context.sink();
                    let asked = context.requested();
                    if asked.tools_list_changed == Some(true)
                        && sink.notify_tool_list_changed().await.is_err()
                    {
                        return Ok(());
                    }
                    if asked.prompts_list_changed == Some(true)
                        && sink.notify_prompt_list_changed().await.is_err()
                    {
                        return Ok(());
                    }
                }
                () = look => {
                    let Some((session, watched)) = &watched else { continue };
                    for uri in logging::changed(session, watched) {
                        if context.sink().notify_resource_updated(uri).await.is_err() {
                            return Ok(());
                        }
                    }
                }
                () = context.cancelled() => return Ok(()),
                () = shutdown.cancelled() => return Ok(()),
            }
        }
    }
}

/// Resource links a tool result carries, at most (to the files it wrote).
const MAX_LINKS: usize = 32;

pub(super) fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(
        format!("unknown tool `{name}`"),
        Some(json!({"kind": "not_found"})),
    )
}

/// A call through dispatch as an MCP result (`isError` for tool failures,
/// links to the files it wrote when `note_written`); `Err` only for a tool
/// that is gone.
async fn call(
    state: &AppState,
    session: &Arc<Session>,
    name: &str,
    input: Value,
    progress: Option<ProgressSink>,
    ask: Option<Arc<dyn crate::input::Asker>>,
    note_written: bool,
) -> Result<CallToolResult, McpError> {
    let options = CallOptions {
        progress,
        ask,
        note_written,
        ..CallOptions::default()
    };
    // Boxed here, once: the wasm call's future is large, and the futures
    // around this one are moved (into select!s, tasks, boxes) on their way.
    let dispatch = Box::pin(state.dispatcher.dispatch(session, name, input, options));
    match dispatch.await {
        Ok(out) => Ok(success(out)),
        Err(CallError::NotFound(_)) => Err(unknown_tool(name)),
        Err(e) => Ok(failure(&e)),
    }
}

/// A successful call as an MCP result. A result that is one JSON value is
/// also `structuredContent` (what `outputSchema` describes).
pub(super) fn success(out: CallOutput) -> CallToolResult {
    let mut blocks: Vec<ContentBlock> = out.content.iter().map(block).collect();
    blocks.extend(out.written.iter().take(MAX_LINKS).map(|f| {
        ContentBlock::resource_link(
            Resource::new(
                format!("{}{}", features::WORKSPACE_PREFIX, f.path),
                f.path.clone(),
            )
            .with_mime_type(features::media_type(&f.path))
            .with_size(f.size),
        )
    }));
    let mut result = CallToolResult::success(blocks);
    if let [Content::Json(_)] = out.content.as_slice()
        && let Some(Content::Json(v)) = out.content.into_iter().next()
    {
        result.structured_content = Some(v);
    }
    let mut meta = MetaObject::new();
    meta.insert("toolhost/version".into(), Value::String(out.version));
    meta.insert(
        "toolhost/elapsed_ms".into(),
        json!(out.elapsed.as_secs_f64() * 1000.0),
    );
    result.meta = Some(meta);
    result
}

/// A failed call as an MCP result the model can read: `isError`, the kind
/// first in the text, the kind and details in `_meta`.
/// A failed call as a tool result with `isError`, rendered by the one
/// client-error renderer ([`ApiError`]): `[kind] message`.
pub(super) fn failure(e: &CallError) -> CallToolResult {
    let rendered = ApiError::from(e.clone());
    let mut result = CallToolResult::error(vec![ContentBlock::text(rendered.text())]);
    result.meta = Some(meta(json!({ "toolhost/error_kind": rendered.kind })));
    result
}

fn meta(v: Value) -> MetaObject {
    match v {
        Value::Object(map) => MetaObject(map),
        _ => MetaObject::new(),
    }
}

/// One content item as an MCP content block.
fn block(c: &Content) -> ContentBlock {
    match c {
        Content::Text(t) => ContentBlock::text(t.clone()),
        Content::Json(v) => ContentBlock::text(v.to_string()),
        Content::Binary {
            media_type,
            data,
            name,
        } => {
            let b64 = base64::engine::general_purpose::STANDARD.encode(data);
            if media_type.starts_with("image/") {
                ContentBlock::image(b64, media_type.clone())
            } else if media_type.starts_with("audio/") {
                ContentBlock::audio(b64, media_type.clone())
            } else {
                let uri = format!(
                    "toolhost:/result/{}",
                    crate::tool::binary_file_name(media_type, data, name.as_deref())
                );
                ContentBlock::resource(
                    ResourceContents::blob(b64, uri).with_mime_type(media_type.clone()),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MCP once sent an internal error's detail (paths, engine messages)
    /// where native and XAgent said "see the server log".
    #[test]
    fn a_failed_call_never_carries_internal_details() {
        let result = failure(&CallError::Internal(
            "/srv/toolhost/data/compile-cache/x.cwasm: engine said no".into(),
        ));
        let text = serde_json::to_string(&result).unwrap();
        assert!(!text.contains("/srv/toolhost"), "{text}");
        assert!(!text.contains("engine said"), "{text}");
        assert!(
            text.contains("[internal] internal error; see the server log"),
            "{text}"
        );
        assert_eq!(result.is_error, Some(true));
        let bad = failure(&CallError::InvalidInput {
            message: "bad input".into(),
            details: vec!["/a: x".into(), "/b: y".into()],
        });
        let text = serde_json::to_string(&bad).unwrap();
        assert!(
            text.contains("[invalid_input] bad input\\n- /a: x\\n- /b: y"),
            "{text}"
        );
    }
}
