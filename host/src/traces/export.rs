//! The export queue: a span that ends is handed to a bounded queue and
//! never waited for; one thread sends the queue in batches over OTLP/HTTP.
//! A full queue drops the span, a receiver that refuses or cannot be reached
//! loses the batch: both counted (`toolhost_trace_spans_total` in
//! `/metrics`), neither slows a call.

use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use opentelemetry::Context;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};

use toolhost_core::telemetry::{note_dropped, note_exported, note_failed};

/// Spans sent in one request at most.
const BATCH: usize = 512;
/// How long a span waits for its batch at most.
const DELAY: Duration = Duration::from_secs(1);

/// Where spans go.
pub(super) struct Target {
    pub url: String,
    pub headers: std::collections::HashMap<String, String>,
    pub timeout: Duration,
    pub capacity: usize,
    pub resource: Resource,
}

enum Message {
    Span(Box<SpanData>),
    /// Send what is queued, then answer.
    Flush(SyncSender<()>),
}

/// The span processor in front of the queue.
#[derive(Debug)]
pub(super) struct Queue {
    sender: SyncSender<Message>,
}

impl Queue {
    /// The queue and its sending thread.
    pub(super) fn start(target: Target) -> anyhow::Result<Queue> {
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(target.url.clone())
            .with_timeout(target.timeout)
            .with_headers(target.headers)
            .build()
            .with_context(|| format!("the OTLP exporter for {}", target.url))?;
        exporter.set_resource(&target.resource);
        let (sender, receiver) = std::sync::mpsc::sync_channel(target.capacity);
        std::thread::Builder::new()
            .name("toolhost-traces".into())
            .spawn(move || send_loop(receiver, exporter))
            .context("the trace export thread")?;
        Ok(Queue { sender })
    }

    fn ask(&self, timeout: Duration) -> OTelSdkResult {
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        self.sender
            .send(Message::Flush(done))
            .map_err(|_| OTelSdkError::AlreadyShutdown)?;
        wait.recv_timeout(timeout)
            .map_err(|_| OTelSdkError::Timeout(timeout))
    }
}

impl SpanProcessor for Queue {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        match self.sender.try_send(Message::Span(Box::new(span))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => note_dropped(),
            Err(TrySendError::Disconnected(_)) => note_failed(1),
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.ask(Duration::from_secs(5))
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.ask(timeout)
    }
}

/// Batches of up to [`BATCH`] spans, each sent when full or [`DELAY`]
/// after its first span; until every [`Queue`] is gone.
fn send_loop(receiver: Receiver<Message>, exporter: opentelemetry_otlp::SpanExporter) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut first: Option<Instant> = None;
    let mut failing = false;
    loop {
        let wait = first.map_or(Duration::from_secs(3600), |t| {
            DELAY.saturating_sub(t.elapsed())
        });
        match receiver.recv_timeout(wait) {
            Ok(Message::Span(span)) => {
                batch.push(*span);
                first.get_or_insert_with(Instant::now);
                if batch.len() < BATCH {
                    continue;
                }
            }
            Ok(Message::Flush(done)) => {
                send(&exporter, &mut batch, &mut failing);
                first = None;
                let _ = done.try_send(());
                continue;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                send(&exporter, &mut batch, &mut failing);
                return;
            }
        }
        send(&exporter, &mut batch, &mut failing);
        first = None;
    }
}

/// Send `batch`; the first failure after a success is a warning, the
/// first success after a failure a note.
fn send(
    exporter: &opentelemetry_otlp::SpanExporter,
    batch: &mut Vec<SpanData>,
    failing: &mut bool,
) {
    if batch.is_empty() {
        return;
    }
    let spans = std::mem::replace(batch, Vec::with_capacity(BATCH));
    let n = spans.len() as u64;
    match futures::executor::block_on(exporter.export(spans)) {
        Ok(()) => {
            note_exported(n);
            if std::mem::take(failing) {
                tracing::info!(spans = n, "trace export works again");
            }
        }
        Err(e) => {
            note_failed(n);
            if !std::mem::replace(failing, true) {
                tracing::warn!(error = %e, spans = n, "trace export failed: spans are lost until the receiver answers (counted in /metrics: toolhost_trace_spans_total)");
            }
        }
    }
}
