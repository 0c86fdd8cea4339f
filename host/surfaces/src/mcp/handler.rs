//! The MCP server of one MCP session: rmcp's [`ServerHandler`] over
//! dispatch, the session it owns, and the methods beside `tools/call`
//! (prompts, resources, completion, logging, tasks, subscriptions).

use std::sync::{Arc, Mutex};

use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscriptionFilter, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::{direct, features, input, listing, logging, tasks};
use crate::error::ApiError;
use crate::native::SESSION_HEADER;
use crate::state::AppState;
use toolhost_core::input::Asker as _;
use toolhost_core::sessions::{Session, SessionError};

/// The MCP server of one MCP session.
pub struct McpHandler {
    pub(super) state: AppState,
    pub(super) direct: Arc<direct::Direct>,
    /// What this MCP session shares with its direct answers: its own
    /// toolhost session, closed when it ends.
    pub(super) link: Arc<direct::Link>,
    /// The MCP session's id, once it is known to the direct answers.
    pub(super) registered: Mutex<Option<String>>,
    /// Forwards catalog changes as `notifications/tools/list_changed`.
    pub(super) list_changed: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// `logging/setLevel` and the forwarding of the session's log records;
    /// `resources/subscribe` and the watch of the subscribed files.
    pub(super) logging: logging::Logging,
    /// The server's tasks.
    pub(super) tasks: tasks::Tasks,
    /// The server's key for stateless input rounds.
    pub(super) mrtr: Arc<input::Mrtr>,
}

impl McpHandler {
    pub(super) fn new(
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
    pub(super) fn session(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Arc<Session>, McpError> {
        let pinned = context
            .extensions
            .get::<Parts>()
            .and_then(|parts| parts.headers.get(SESSION_HEADER));
        let who = caller(context);
        self.link
            .session(self.state.dispatcher.sessions(), &who, pinned)
            .map_err(session_error)
    }

    /// A stateless request's own toolhost session ends with the request, but
    /// not while a task of it runs: it is taken from the handler, and the
    /// returned closure closes it when the call ends.
    pub(super) fn keep_own_session(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> impl FnOnce() + use<> {
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
                sessions.close_later(session);
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
            self.state.dispatcher.sessions().close_later(session);
        }
    }
}

/// Whether a request is of the stateless revision (2026-07-28 on): its
/// questions are answered in another request.
pub(super) fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Whether a request's toolhost session outlives it: an MCP session's, or
/// one named by `X-Toolhost-Session` (a stateless request's own session ends
/// with it: links to its files would lead nowhere).
pub(super) fn lasting(context: &RequestContext<RoleServer>) -> bool {
    has_header(context, "mcp-session-id") || has_header(context, SESSION_HEADER)
}

/// The caller of the HTTP request of `context` ([`crate::auth::Who`]).
pub(super) fn caller(context: &RequestContext<RoleServer>) -> toolhost_core::callers::Caller {
    context
        .extensions
        .get::<Parts>()
        .map_or_else(toolhost_core::callers::Caller::anonymous, |p| {
            crate::auth::caller_of(&p.extensions)
        })
}

/// Whether the HTTP request of `context` carried header `name`.
pub(super) fn has_header(context: &RequestContext<RoleServer>, name: &str) -> bool {
    context
        .extensions
        .get::<Parts>()
        .is_some_and(|p| p.headers.contains_key(name))
}

/// Close the toolhost session an MCP session (or a stateless request) made
/// for itself, when that ends: the one close of every surface, in a task of
/// its own (this runs from `Drop`).
/// A session that cannot be opened, as the shared renderer says it, in
/// JSON-RPC's terms: the caller's fault is an invalid request.
pub(super) fn session_error(e: SessionError) -> McpError {
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
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let who = caller(&context);
        let catalog = self.state.dispatcher.catalog().tools();
        Ok(ListToolsResult::with_all_items(listing::tools_of(
            &catalog, &who,
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.call_tool(request, context).await
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
                    Err(toolhost_core::input::AskError::Pending) => {
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
                    can: toolhost_core::input::Can::new(kinds),
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
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.tasks
            .check_owner(&request.task_id, &caller(&context))?;
        let task_id = request.task_id.clone();
        let work = async {
            self.tasks
                .manager
                .get_task(&request.task_id)
                .map(GetTaskResult::new)
        };
        super::trace::task(
            "tasks/get",
            &task_id,
            self.tasks.origin(&task_id),
            &context,
            work,
        )
        .await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks
            .check_owner(&request.task_id, &caller(&context))?;
        let task_id = request.task_id.clone();
        let work = async {
            self.tasks
                .manager
                .update_task(&request.task_id, request.input_responses)
        };
        super::trace::task(
            "tasks/update",
            &task_id,
            self.tasks.origin(&task_id),
            &context,
            work,
        )
        .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks
            .check_owner(&request.task_id, &caller(&context))?;
        let task_id = request.task_id.clone();
        let work = async { self.tasks.manager.cancel_task(&request.task_id) };
        super::trace::task(
            "tasks/cancel",
            &task_id,
            self.tasks.origin(&task_id),
            &context,
            work,
        )
        .await
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
        let mut wake = logging::Wake::default();
        loop {
            let look = async {
                match &watched {
                    Some((session, _)) => wake.next(session).await,
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
