//! The span of an MCP `tools/call` (OpenTelemetry's MCP conventions: a
//! server span `tools/call {tool}`), the child of the trace context the
//! client put in the request's `_meta` (SEP-414), else of the HTTP request
//! it came in. rmcp runs a request in a task of its own, so the HTTP
//! request's context is taken from its parts ([`RequestTrace`]), not from
//! the task's current span.

use std::future::Future;

use axum::http::request::Parts;
use opentelemetry::Context;
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{SpanContext, TraceContextExt};
use rmcp::RoleServer;
use rmcp::model::RequestId;
use rmcp::service::RequestContext;
use serde_json::{Map, Value};
use toolhost_core::telemetry::{self, RequestTrace, TARGET};
use tracing::Instrument;

/// What a request's span is made of.
pub(super) struct Call<'a> {
    /// `tools/call`, `tasks/get`, ...
    pub method: &'static str,
    /// The tool called (`tools/call`).
    pub tool: Option<&'a str>,
    /// The task asked about (`tasks/*`).
    pub task: Option<&'a str>,
    pub id: &'a RequestId,
    pub session: Option<&'a str>,
    pub parent: Parent,
    /// The span of the request that started the call this one goes on
    /// with (a task's).
    pub link: Option<SpanContext>,
}

/// Whose child a request's span is.
pub(super) enum Parent {
    /// The client's context in the request's `_meta`.
    Meta(Context),
    /// The HTTP request's (its span's when kept; else the caller's, or none).
    Http(Context),
    Unknown,
}

impl Parent {
    pub(super) fn is_unknown(&self) -> bool {
        matches!(self, Parent::Unknown)
    }
}

/// The client's context of a request with `_meta` that came in `parts`.
pub(super) fn parent(meta: Option<&Map<String, Value>>, parts: Option<&Parts>) -> Parent {
    if let Some(cx) = meta.and_then(telemetry::from_meta) {
        return Parent::Meta(cx);
    }
    match parts.and_then(|p| p.extensions.get::<RequestTrace>()) {
        Some(t) => Parent::Http(t.0.clone()),
        None => Parent::Unknown,
    }
}

/// Run `call` in its span when its trace is kept; else in the client's
/// context (so that it is passed on to upstreams unchanged).
pub(super) async fn within<F: Future>(call: Call<'_>, work: F) -> F::Output {
    let kept = match &call.parent {
        Parent::Meta(cx) => telemetry::sample(Some(cx)),
        Parent::Http(cx) => telemetry::exporting() && cx.span().span_context().is_sampled(),
        Parent::Unknown => telemetry::sample(None),
    };
    let parent = match call.parent {
        Parent::Meta(cx) | Parent::Http(cx) if cx.span().span_context().is_valid() => Some(cx),
        _ => None,
    };
    if !kept {
        return match parent {
            Some(cx) => work.with_context(cx).await,
            None => work.await,
        };
    }
    let name = match call.tool {
        Some(tool) => format!("{} {tool}", call.method),
        None => call.method.to_owned(),
    };
    let span = tracing::info_span!(
        target: TARGET,
        "mcp.server",
        otel.name = %name,
        otel.kind = "server",
        "mcp.method.name" = call.method,
        "gen_ai.operation.name" = call.tool.map(|_| "execute_tool"),
        "gen_ai.tool.name" = call.tool,
        "toolhost.task" = call.task,
        "jsonrpc.request.id" = %call.id,
        "mcp.session.id" = call.session,
        "network.protocol.name" = "http",
    );
    if let Some(cx) = parent {
        telemetry::adopt(&span, cx);
    }
    if let Some(origin) = &call.link {
        telemetry::link(&span, origin, "task_of");
    }
    work.instrument(span).await
}

/// Run `work`, a request about task `task`, in its span (linked to the
/// span of the request that made the task).
pub(super) async fn task<T>(
    method: &'static str,
    task: &str,
    origin: Option<opentelemetry::trace::SpanContext>,
    context: &RequestContext<RoleServer>,
    work: impl std::future::Future<Output = T>,
) -> T {
    let parts = context.extensions.get::<Parts>();
    let call = Call {
        method,
        tool: None,
        task: Some(task),
        id: &context.id,
        session: parts
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok()),
        parent: parent(Some(&context.meta.0.0), parts),
        link: origin,
    };
    within(call, work).await
}
