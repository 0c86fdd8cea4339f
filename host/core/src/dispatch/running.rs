//! A call that may outlive the request that started it: the machinery that
//! XAgent's 450 continuation and MCP tasks share. It runs inline while the
//! request waits for it (a quick call costs no task), keeps its latest
//! progress report, and goes on on a task of its own when the request
//! answers without its result ([`Running::detach`]). Dropping it cancels
//! the call.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::context::FutureExt as _;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::{CallOptions, CallOutput, Dispatcher};
use crate::sessions::Session;
use crate::tool::{CallError, Progress, ProgressSink};

type Call = std::pin::Pin<Box<dyn Future<Output = Result<CallOutput, CallError>> + Send>>;

/// Where a call runs: polled by the request that made it until it is
/// parked, then on a task of its own (so a quick call costs no task).
enum Where {
    Inline(Call),
    Task(JoinHandle<Result<CallOutput, CallError>>),
    Done,
}

/// A call with its latest progress. Dropping it cancels the call.
pub struct Running {
    call: Where,
    latest: Arc<Mutex<Option<Progress>>>,
    started: Instant,
    /// The span of the request that started it (export on): the requests
    /// that wait for it later link to it.
    origin: Option<opentelemetry::trace::SpanContext>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Where::Task(task) = &self.call {
            task.abort();
        }
    }
}

impl Running {
    /// Start `tool` in `session` (it runs as it is waited for) with
    /// `options` (who answers its questions, ...; its progress is kept here).
    pub fn start(
        dispatcher: Arc<Dispatcher>,
        session: Arc<Session>,
        tool: String,
        arguments: Value,
        options: CallOptions,
    ) -> Running {
        let (sink, mut reports) = ProgressSink::channel();
        let latest = Arc::new(Mutex::new(None));
        let keep = latest.clone();
        let call = Box::pin(async move {
            let options = CallOptions {
                progress: Some(sink),
                ..options
            };
            let call = dispatcher.dispatch(&session, &tool, arguments, options);
            tokio::pin!(call);
            loop {
                tokio::select! {
                    done = &mut call => return done,
                    Some(p) = reports.recv() => *keep.lock().unwrap_or_else(|e| e.into_inner()) = Some(p),
                }
            }
        });
        Running {
            call: Where::Inline(call),
            latest,
            started: Instant::now(),
            origin: crate::telemetry::here(),
        }
    }

    /// The result if the call ends within `patience`.
    pub async fn wait(&mut self, patience: Duration) -> Option<Result<CallOutput, CallError>> {
        let done = match &mut self.call {
            Where::Inline(call) => tokio::time::timeout(patience, call).await.ok()?,
            Where::Task(task) => match tokio::time::timeout(patience, task).await {
                Ok(Ok(done)) => done,
                Ok(Err(e)) => Err(ended(e)),
                Err(_) => return None,
            },
            Where::Done => Err(CallError::Internal("the call was already answered".into())),
        };
        self.call = Where::Done;
        Some(done)
    }

    /// Go on running on a task of its own (the request is answering).
    pub fn detach(&mut self) {
        if let Where::Inline(_) = &self.call
            && let Where::Inline(call) = std::mem::replace(&mut self.call, Where::Done)
        {
            // In the request's trace context (a caller's, with export off).
            self.call = Where::Task(tokio::spawn(call.with_current_context()));
        }
    }

    /// The result, however long it takes.
    pub async fn finish(mut self) -> Result<CallOutput, CallError> {
        match std::mem::replace(&mut self.call, Where::Done) {
            Where::Inline(call) => call.await,
            Where::Task(task) => task.await.unwrap_or_else(|e| Err(ended(e))),
            Where::Done => Err(CallError::Internal("the call was already answered".into())),
        }
    }

    /// The span of the request that started the call, if traced.
    pub fn origin(&self) -> Option<&opentelemetry::trace::SpanContext> {
        self.origin.as_ref()
    }

    /// What a 450 answer (or a task's status) shows of the call so far.
    pub fn partial(&self) -> Value {
        json!({
            "finished": false,
            "elapsed_ms": self.started.elapsed().as_millis() as u64,
            "progress": self.latest.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        })
    }
}

/// A call's task that ended without a result (it panicked).
fn ended(e: tokio::task::JoinError) -> CallError {
    CallError::Internal(format!("the call's task ended: {e}"))
}
