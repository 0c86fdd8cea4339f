//! Traces (docs/telemetry.md): the target of toolhost's own spans, the W3C
//! trace context taken from callers and passed on to upstreams, and the
//! export's counts for `/metrics`.
//!
//! toolhost's spans are `tracing` spans of target [`TARGET`]. Only the
//! OpenTelemetry layer, installed when export is on, is interested in them;
//! whether a request is traced is decided once, before its first span
//! ([`sample`]), and the spans below it are made only inside a kept trace
//! ([`trace_span!`](crate::trace_span)): with export off, or a trace not
//! kept, no span is made. The context of the innermost span is the current
//! OpenTelemetry context (the layer activates it as a span is entered); a
//! request not traced has its caller's context made current instead, and so
//! passed on unchanged ([`context_of`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde_json::{Map, Value};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The target of toolhost's spans (the log format leaves them out).
pub const TARGET: &str = "toolhost::span";

/// The W3C header (and MCP `_meta` key) of the trace context.
pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";

static EXPORTING: AtomicBool = AtomicBool::new(false);
/// The share of new traces kept (f64 bits), and whether a caller's sampled
/// flag decides instead.
static RATIO: AtomicU64 = AtomicU64::new(0x3FF0_0000_0000_0000); // 1.0
static PARENT_BASED: AtomicBool = AtomicBool::new(true);

/// Export is on (spans are made), keeping `ratio` of new traces, or a
/// caller's choice when `parent_based`: set once, by whoever installs the
/// layer.
pub fn set_exporting(ratio: f64, parent_based: bool) {
    RATIO.store(ratio.to_bits(), Ordering::Relaxed);
    PARENT_BASED.store(parent_based, Ordering::Relaxed);
    EXPORTING.store(true, Ordering::Relaxed);
}

/// Whether a request with the caller's context `parent` is traced (export
/// on). Decided here, before any span is made, so that a trace not kept
/// costs no span at all: the first span of a request is made only when
/// this says yes, and the others only inside a kept trace ([`in_trace`]).
pub fn sample(parent: Option<&Context>) -> bool {
    if !exporting() {
        return false;
    }
    if let Some(parent) = parent
        && PARENT_BASED.load(Ordering::Relaxed)
    {
        return parent.span().span_context().is_sampled();
    }
    let ratio = f64::from_bits(RATIO.load(Ordering::Relaxed));
    // A uniform draw in [0, 1) from 53 random bits.
    let draw = (uuid::Uuid::new_v4().as_u64_pair().0 >> 11) as f64 / (1u64 << 53) as f64;
    ratio >= 1.0 || draw < ratio
}

/// Whether the current span is in a kept trace (export on): toolhost's
/// spans below a request's are made only then ([`crate::trace_span`]).
pub fn in_trace() -> bool {
    exporting() && Context::current().span().span_context().is_sampled()
}

/// A span of toolhost's (target [`TARGET`]) when the current trace is kept
/// ([`in_trace`]); else [`tracing::Span::none`], made for nothing.
#[macro_export]
macro_rules! trace_span {
    ($name:expr $(, $($fields:tt)*)?) => {
        if $crate::telemetry::in_trace() {
            ::tracing::info_span!(target: $crate::telemetry::TARGET, $name $(, $($fields)*)?)
        } else {
            ::tracing::Span::none()
        }
    };
}

/// Whether spans are exported (work done only for a span, such as a node
/// driver's step timings, is skipped otherwise).
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

struct Meta<'a>(&'a Map<String, Value>);

impl Extractor for Meta<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

struct Pairs(Vec<(String, String)>);

impl Injector for Pairs {
    fn set(&mut self, key: &str, value: String) {
        self.0.push((key.to_owned(), value));
    }
}

/// The trace context of an HTTP request (its span's, or with export off
/// the caller's), in its extensions: for work the request hands to other
/// tasks (rmcp serves an MCP request in a task of its own).
#[derive(Clone)]
pub struct RequestTrace(pub Context);

/// The caller's context in `headers`' `traceparent` (and `tracestate`);
/// `None` when there is none or it is malformed (a new trace then, never
/// an error).
pub fn from_headers(headers: &HeaderMap) -> Option<Context> {
    if !headers.contains_key(TRACEPARENT) {
        return None;
    }
    valid(TraceContextPropagator::new().extract(&Headers(headers)))
}

/// The caller's context in an MCP request's `_meta` (SEP-414: the same
/// `traceparent` / `tracestate` keys).
pub fn from_meta(meta: &Map<String, Value>) -> Option<Context> {
    if !meta.contains_key(TRACEPARENT) {
        return None;
    }
    valid(TraceContextPropagator::new().extract(&Meta(meta)))
}

fn valid(cx: Context) -> Option<Context> {
    cx.span().span_context().is_valid().then_some(cx)
}

/// The current context as W3C fields (`traceparent`, and `tracestate` when
/// it has one); empty outside any trace.
pub fn fields() -> Vec<(String, String)> {
    fields_in(&Context::current())
}

/// `span`'s context as W3C fields ([`context_of`]).
pub fn fields_of(span: &tracing::Span) -> Vec<(String, String)> {
    fields_in(&context_of(span))
}

/// The context to pass on for a request made in `span`: the span's own
/// when it is made (a kept trace), else the current one, a caller's
/// unchanged (export off, or a trace not kept).
fn context_of(span: &tracing::Span) -> Context {
    if exporting() && !span.is_disabled() {
        span.context()
    } else {
        Context::current()
    }
}

fn fields_in(cx: &Context) -> Vec<(String, String)> {
    if !cx.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut pairs = Pairs(Vec::new());
    TraceContextPropagator::new().inject_context(cx, &mut pairs);
    pairs.0
}

/// Pass `span`'s context on in `headers` (the span of the request made;
/// [`context_of`]).
pub fn inject_headers_of(span: &tracing::Span, headers: &mut HeaderMap) {
    let cx = context_of(span);
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&cx, &mut HeadersMut(headers));
    }
}

/// The span of an HTTP request to an upstream (OpenTelemetry's HTTP client
/// conventions); `http.response.status_code` and `otel.status_code` are
/// recorded by the caller ([`ended`]).
pub fn client_span(method: &str, url: &str, host: &str) -> tracing::Span {
    crate::trace_span!(
        "http.client",
        otel.name = %method,
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        "http.request.method" = method,
        "url.full" = %redacted(url),
        "server.address" = host,
        "http.response.status_code" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
    )
}

/// A URL without its query (it may carry keys) and user info.
fn redacted(url: &str) -> &str {
    let url = url.split(['?', '#']).next().unwrap_or(url);
    match url.find("://") {
        Some(scheme) => match url[scheme + 3..].find('@') {
            Some(_) => &url[..scheme + 3],
            None => url,
        },
        None => url,
    }
}

/// Record how an upstream request ended on its [`client_span`]: a status,
/// or the error's kind.
pub fn ended(span: &tracing::Span, status: Result<u16, &str>) {
    match status {
        Ok(code) => {
            span.record("http.response.status_code", i64::from(code));
            if code >= 500 {
                span.record("otel.status_code", "ERROR");
            }
        }
        Err(kind) => {
            span.record("error.type", kind);
            span.record("otel.status_code", "ERROR");
        }
    }
}

/// Pass `span`'s context on in an MCP request's `_meta` (the span of the
/// request made).
pub fn inject_meta_of(span: &tracing::Span, meta: &mut Map<String, Value>) {
    for (key, value) in fields_of(span) {
        meta.insert(key, Value::String(value));
    }
}

/// Make `parent` (a caller's context) the parent of `span`, made but not
/// entered yet.
pub fn adopt(span: &tracing::Span, parent: Context) {
    let _ = span.set_parent(parent);
}

/// The context of the innermost span now (to link a later span to it: a
/// call resumed by another request); `None` outside any trace.
pub fn here() -> Option<SpanContext> {
    if !exporting() {
        return None;
    }
    let cx = Context::current();
    let span = cx.span();
    let context = span.span_context();
    context.is_valid().then(|| context.clone())
}

/// The current span's `traceparent` (export on; none outside any trace).
pub fn traceparent() -> Option<String> {
    if !exporting() {
        return None;
    }
    fields()
        .into_iter()
        .find(|(k, _)| k == TRACEPARENT)
        .map(|(_, v)| v)
}

/// Link `span` to the span of `traceparent` (an earlier round's), saying
/// why; a malformed one is no link.
pub fn link_traceparent(span: &tracing::Span, traceparent: &str, why: &'static str) {
    if !exporting() {
        return;
    }
    let mut meta = Map::new();
    meta.insert(TRACEPARENT.into(), Value::String(traceparent.to_owned()));
    if let Some(cx) = from_meta(&meta) {
        link(span, cx.span().span_context(), why);
    }
}

/// Link `span` to `to` (a span of an earlier request that this one goes on
/// with), saying why.
pub fn link(span: &tracing::Span, to: &SpanContext, why: &'static str) {
    if to.is_valid() {
        span.add_link_with_attributes(to.clone(), vec![KeyValue::new("toolhost.link", why)]);
    }
}

/// Steps a node driver reports at most, and attributes of one.
const MAX_STEPS: usize = 64;
const MAX_STEP_ATTRIBUTES: usize = 16;

/// A node driver's steps (`[{name, start_ns, end_ns, attributes}]`, Unix
/// times in ns) as spans under `parent` (its `node.exec`); what is not
/// of that shape is skipped (a driver's output is not trusted).
pub fn record_steps(parent: &tracing::Span, steps: Option<&Value>) {
    use opentelemetry::trace::{Span as _, Tracer as _};
    let Some(steps) = steps.and_then(Value::as_array) else {
        return;
    };
    // No span to put them under: export off, or a trace not kept (the
    // driver was told a caller's context, passed on unchanged).
    if !exporting() || parent.is_disabled() {
        return;
    }
    let tracer = opentelemetry::global::tracer("toolhost");
    let cx = parent.context();
    let at = |v: &Value| {
        v.as_u64()
            .map(|ns| std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns))
    };
    for step in steps.iter().take(MAX_STEPS) {
        let (Some(name), Some(start), Some(end)) = (
            step.get("name").and_then(Value::as_str),
            step.get("start_ns").and_then(at),
            step.get("end_ns").and_then(at),
        ) else {
            continue;
        };
        let attributes = step
            .get("attributes")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .take(MAX_STEP_ATTRIBUTES)
            .filter_map(|(k, v)| {
                let key = format!("toolhost.driver.{}", crate::text::truncate(k, 64));
                Some(match v {
                    Value::String(s) => {
                        KeyValue::new(key, crate::text::truncate(s, 256).to_owned())
                    }
                    Value::Bool(b) => KeyValue::new(key, *b),
                    Value::Number(n) => match n.as_i64() {
                        Some(i) => KeyValue::new(key, i),
                        None => KeyValue::new(key, n.as_f64()?),
                    },
                    _ => return None,
                })
            })
            .collect::<Vec<_>>();
        let mut span = tracer
            .span_builder(format!("driver.{}", crate::text::truncate(name, 64)))
            .with_start_time(start)
            .with_attributes(attributes)
            .start_with_context(&tracer, &cx);
        span.end_with_timestamp(end.max(start));
    }
}

/// Spans by what became of them after they ended.
static EXPORTED: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);

/// `n` spans sent to the receiver.
pub fn note_exported(n: u64) {
    EXPORTED.fetch_add(n, Ordering::Relaxed);
}

/// A span dropped: the export queue was full.
pub fn note_dropped() {
    DROPPED.fetch_add(1, Ordering::Relaxed);
}

/// `n` spans lost: the receiver refused them or could not be reached.
pub fn note_failed(n: u64) {
    FAILED.fetch_add(n, Ordering::Relaxed);
}

/// The export's counts in Prometheus' text format.
pub fn render_metrics(text: &mut String) {
    text.push_str(
        "# HELP toolhost_trace_spans_total Spans by what became of them ([telemetry]: exported; dropped: the export queue was full; failed: the receiver refused them or was unreachable).\n\
         # TYPE toolhost_trace_spans_total counter\n",
    );
    for (outcome, n) in [
        ("exported", &EXPORTED),
        ("dropped", &DROPPED),
        ("failed", &FAILED),
    ] {
        let n = n.load(Ordering::Relaxed);
        text.push_str(&format!(
            "toolhost_trace_spans_total{{outcome=\"{outcome}\"}} {n}\n"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_traceparent_is_no_context() {
        for bad in [
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(TRACEPARENT, HeaderValue::from_static(bad));
            assert!(from_headers(&headers).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_caller_context_is_read_and_passed_on_unchanged() {
        let mut headers = HeaderMap::new();
        headers.insert(
            TRACEPARENT,
            HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
        headers.insert(TRACESTATE, HeaderValue::from_static("vendor=x"));
        let cx = from_headers(&headers).expect("a valid context");
        assert_eq!(
            cx.span().span_context().trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let _guard = cx.attach();
        let mut out = HeaderMap::new();
        inject_headers_of(&tracing::Span::none(), &mut out);
        assert_eq!(
            out[TRACEPARENT],
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(out[TRACESTATE], "vendor=x");
        let mut meta = Map::new();
        inject_meta_of(&tracing::Span::none(), &mut meta);
        let back = from_meta(&meta).expect("the same context from _meta");
        assert_eq!(
            back.span().span_context().span_id().to_string(),
            "00f067aa0ba902b7"
        );
    }
}
