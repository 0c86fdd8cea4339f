//! JSON log lines (`[telemetry] log_format = "json"`): one object a line
//! with `timestamp`, `level`, `target`, the event's fields (`message`
//! among them), the fields of the spans it is in (`spans`, outermost
//! first: the request's id, method and path), and `trace_id` / `span_id` of
//! the innermost span of the trace when there is one, so a line is found
//! from its trace and a trace from its line.

use std::fmt;

use opentelemetry::trace::TraceContextExt;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The JSON line format.
pub(super) struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        let mut time = String::new();
        SystemTime.format_time(&mut Writer::new(&mut time))?;
        line.insert("timestamp".into(), time.into());
        let meta = event.metadata();
        line.insert("level".into(), meta.level().as_str().into());
        line.insert("target".into(), meta.target().into());
        event.record(&mut Fields(&mut line));
        if let Some(scope) = ctx.event_scope() {
            let spans: Vec<Value> = scope
                .from_root()
                .map(|span| {
                    let mut fields = span
                        .extensions()
                        .get::<FormattedFields<N>>()
                        .and_then(|f| serde_json::from_str::<Map<String, Value>>(f).ok())
                        .unwrap_or_default();
                    fields.insert("name".into(), span.name().into());
                    Value::Object(fields)
                })
                .collect();
            line.insert("spans".into(), spans.into());
        }
        let cx = opentelemetry::Context::current();
        let span = cx.span();
        let context = span.span_context();
        if context.is_valid() {
            line.insert("trace_id".into(), context.trace_id().to_string().into());
            line.insert("span_id".into(), context.span_id().to_string().into());
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// An event's fields as JSON values.
struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
}
