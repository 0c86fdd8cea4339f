//! Request ids and request spans: every request gets an `x-request-id` (the
//! client's, or a new UUID), returned in the response and carried by the
//! tracing span that every log line of the request is written in. And the
//! audit of refusals: every 401, 403 and 429 is a line of the
//! `toolhost::audit` log target, in the request's span (so with its id),
//! at most [`AUDIT_PER_SECOND`] a second (the rest counted).

use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderName, Method, Request, StatusCode};
use axum::response::Response;
use opentelemetry::context::FutureExt as _;
use toolhost_core::telemetry::{self, RequestTrace, TARGET};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::field::Empty;
use tracing::{Instrument, Level};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The header of the request id, both ways.
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Wrap `router` so that its requests have ids and spans.
pub fn layer(router: Router) -> Router {
    router
        .layer(PropagateRequestIdLayer::new(REQUEST_ID_HEADER))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|request: &Request<_>| {
                    let id = request
                        .headers()
                        .get(&REQUEST_ID_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("-");
                    tracing::info_span!(
                        "request",
                        request_id = %id,
                        method = %request.method(),
                        path = %request.uri().path(),
                    )
                })
                .on_request(())
                .on_response(DefaultOnResponse::new().level(Level::DEBUG))
                .on_failure(()),
        )
        .layer(SetRequestIdLayer::new(REQUEST_ID_HEADER, MakeRequestUuid))
}

/// The request's OpenTelemetry span (HTTP server), a child of the caller's
/// `traceparent` when it sent one (a malformed one is ignored: a new
/// trace). With export off, the caller's context is only made current, to
/// be passed on unchanged to the upstreams the request calls.
/// Run in [`crate::front`]'s service (no middleware of its own: one more
/// would box and clone the routing table's service for every request).
pub async fn traced<F, Fut>(mut request: Request<Body>, next: F) -> Response
where
    F: FnOnce(Request<Body>) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let parent = telemetry::from_headers(request.headers());
    if !telemetry::sample(parent.as_ref()) {
        // Not traced here: the caller's context (if any) goes on unchanged,
        // and with export on, the MCP surface knows the request is not kept.
        return match parent {
            Some(cx) => {
                request.extensions_mut().insert(RequestTrace(cx.clone()));
                next(request).with_context(cx).await
            }
            None if telemetry::exporting() => {
                request
                    .extensions_mut()
                    .insert(RequestTrace(opentelemetry::Context::new()));
                next(request).await
            }
            None => next(request).await,
        };
    }
    let method = request.method().clone();
    let path = request.uri().path();
    let headers = request.headers();
    let text = |name: &HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let span = tracing::info_span!(
        target: TARGET,
        "http",
        otel.name = %format_args!("{method} {}", route_of(path)),
        otel.kind = "server",
        otel.status_code = Empty,
        "http.request.method" = %method,
        "url.path" = path,
        "url.scheme" = "http",
        "server.address" = text(&axum::http::header::HOST),
        "user_agent.original" = text(&axum::http::header::USER_AGENT),
        "toolhost.request_id" = text(&REQUEST_ID_HEADER),
        "http.response.status_code" = Empty,
    );
    if let Some(cx) = parent {
        telemetry::adopt(&span, cx);
    }
    request
        .extensions_mut()
        .insert(RequestTrace(span.context()));
    let response = next(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    span.record("http.response.status_code", i64::from(status));
    if status >= 500 {
        span.record("otel.status_code", "ERROR");
    }
    response
}

/// A span name's route: the path with its ids (UUIDs, long hex or decimal
/// strings: sessions, tasks, files' hashes) as `{id}`, so that names stay
/// few (OpenTelemetry's HTTP conventions).
pub fn route_of(path: &str) -> String {
    let id = |part: &str| {
        part.len() >= 8
            && part
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b'-' || b == b'_')
            && part.bytes().any(|b| b.is_ascii_digit())
    };
    path.split('/')
        .map(|part| if id(part) { "{id}" } else { part })
        .collect::<Vec<_>>()
        .join("/")
}

/// Refusals written to the audit log a second at most; beyond, counted and
/// said with the next line.
pub const AUDIT_PER_SECOND: u64 = 50;

/// The second the audit count is for, and the count in it.
static AUDIT_SECOND: AtomicU64 = AtomicU64::new(0);
static AUDIT_COUNT: AtomicU64 = AtomicU64::new(0);
static AUDIT_DROPPED: AtomicU64 = AtomicU64::new(0);

/// A refusal (401, 403, 429) of a request for `method path` is written to
/// the audit log.
pub fn audit(method: &Method, path: &str, response: &Response) {
    let status = response.status();
    if matches!(
        status,
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS
    ) && within_rate()
    {
        let dropped = AUDIT_DROPPED.swap(0, Ordering::Relaxed);
        let caller = response
            .extensions()
            .get::<toolhost_core::callers::Caller>()
            .map_or("-", |c| c.name());
        tracing::warn!(target: "toolhost::audit", status = status.as_u16(), %method, path, caller, dropped, "request refused");
    }
}

/// Whether this refusal fits in this second's share of audit lines.
fn within_rate() -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if AUDIT_SECOND.swap(now, Ordering::AcqRel) != now {
        AUDIT_COUNT.store(0, Ordering::Release);
    }
    if AUDIT_COUNT.fetch_add(1, Ordering::AcqRel) < AUDIT_PER_SECOND {
        true
    } else {
        AUDIT_DROPPED.fetch_add(1, Ordering::Relaxed);
        false
    }
}
