//! The one dispatch layer: (session, tool id, input) -> result.
//!
//! Every API surface calls [`Dispatcher::dispatch`]. It finds the tool, checks
//! the input against the tool's JSON Schema before any sandbox runs, applies
//! the toolkit's admission control (concurrency + bounded queue), lowers limits
//! as the caller asked, runs the call on the tool's backend, enforces the output
//! size, and records statistics.

mod fallback;
mod running;

pub use running::Running;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;

use tracing::Instrument;
use tracing::field::Empty;

use crate::backend::{Invocation, Usage};
use crate::catalog::{Catalog, ToolEntry};
use crate::metrics::Metrics;
use crate::registry::ToolStatus;
use crate::sessions::{Session, Sessions, WorkspaceFile};
use crate::tool::{CallError, Content, LimitOverrides, Limits, ProgressSink};

/// Most schema violations listed in one error.
const MAX_SCHEMA_ERRORS: usize = 8;

/// Options of one call.
#[derive(Default, Clone)]
pub struct CallOptions {
    pub limits: LimitOverrides,
    pub progress: Option<ProgressSink>,
    /// Call a `staging` tool too (a task testing what it installed; never
    /// set by a surface).
    pub staging: bool,
    /// Who answers the tool's questions ([`crate::input`]); none: nobody.
    pub ask: Option<Arc<dyn crate::input::Asker>>,
    /// Note the workspace files the call wrote ([`CallOutput::written`]),
    /// as the kernel tells them or by looking at the workspace before and
    /// after ([`Session::watch_writes`]; not for a toolkit that relays
    /// another server's answers: [`crate::backend::Toolkit::relays`]).
    pub note_written: bool,
    /// Who calls: its policy applies (an OAuth caller's scopes are its
    /// token's, not those of whoever made the session). None: the session's
    /// owner.
    pub caller: Option<crate::callers::Caller>,
    /// Call the tool itself even when it cannot serve: no fallback (a
    /// health probe, a fallback's own call).
    pub no_fallback: bool,
}

/// The successful result of a call.
#[derive(Debug)]
pub struct CallOutput {
    pub content: Vec<Content>,
    pub elapsed: Duration,
    /// Version (content hash) of the toolkit that ran the call.
    pub version: String,
    /// Fuel units the call consumed (wasm tools; `None` for Docker tools).
    pub fuel: Option<u64>,
    /// The workspace files created or changed while the call ran (asked for
    /// by [`CallOptions::note_written`]; files under hidden directories,
    /// such as a tool's index, are left out). A call of the same session
    /// running at the same time may have written some of them.
    pub written: Vec<WorkspaceFile>,
    /// The fallback that served the call, when the tool itself could not.
    pub served_by: Option<String>,
}

pub struct Dispatcher {
    catalog: Arc<Catalog>,
    sessions: Arc<Sessions>,
    metrics: Arc<Metrics>,
}

impl Dispatcher {
    pub fn new(catalog: Arc<Catalog>, sessions: Arc<Sessions>) -> Self {
        Dispatcher {
            catalog,
            sessions,
            metrics: Arc::default(),
        }
    }

    /// Use `metrics` (e.g. [`Metrics::off`]) instead of a fresh registry.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    pub fn sessions(&self) -> &Arc<Sessions> {
        &self.sessions
    }

    /// Run tool `tool_id` itself on `input` for `session` (no fallback:
    /// [`Dispatcher::dispatch`]), in its span (OpenTelemetry's GenAI
    /// `execute_tool`).
    async fn dispatch_one(
        &self,
        session: &Arc<Session>,
        tool_id: &str,
        input: Value,
        options: CallOptions,
    ) -> Result<CallOutput, CallError> {
        let span = crate::trace_span!(
            "execute_tool",
            otel.name = %format_args!("execute_tool {tool_id}"),
            otel.status_code = Empty,
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = tool_id,
            "gen_ai.tool.type" = "function",
            "toolhost.session" = session.id(),
            "enduser.id" = Empty,
            "toolhost.backend" = Empty,
            "toolhost.version" = Empty,
            "toolhost.outcome" = Empty,
            "error.type" = Empty,
            "toolhost.fuel" = Empty,
        );
        self.call_one(session, tool_id, input, options, &span)
            .instrument(span.clone())
            .await
    }

    async fn call_one(
        &self,
        session: &Arc<Session>,
        tool_id: &str,
        input: Value,
        options: CallOptions,
        span: &tracing::Span,
    ) -> Result<CallOutput, CallError> {
        let tool = match self.catalog.get(tool_id) {
            Some(tool) => tool,
            None => self.wait_for_tool(tool_id, &options).await?,
        };
        let owner = match &options.caller {
            Some(caller) => caller.clone(),
            None => session.owner().clone(),
        };
        span.record("enduser.id", owner.name());
        span.record("toolhost.backend", tool.toolkit.backend.name());
        span.record("toolhost.version", tool.toolkit.version.as_str());
        if !owner.policy().allows_tool(tool_id) {
            owner.note_refused();
            tracing::info!(
                caller = owner.name(),
                tool = tool_id,
                rule = "auth.callers.tools",
                "call refused: the tool is not in the caller's tools"
            );
            return Err(CallError::Forbidden(format!(
                "this caller may not call `{tool_id}`"
            )));
        }
        let _running = owner.start_call().map_err(|running| {
            owner.note_refused();
            tracing::info!(
                caller = owner.name(),
                tool = tool_id,
                running,
                rule = "auth.callers.max_concurrent_calls",
                "call refused: the caller's calls are all running"
            );
            CallError::Overloaded(format!(
                "this caller has {running} calls running, its limit: retry when one ends"
            ))
        })?;
        let status = tool.record.status();
        if !(status.serves() || options.staging && status == ToolStatus::Staging) {
            return Err(CallError::NotActive {
                tool: tool_id.to_owned(),
                status: status.as_str(),
            });
        }
        let (relays, seen_here) = (
            tool.toolkit.toolkit.relays(),
            tool.toolkit.toolkit.writes_seen_here(),
        );
        if !relays && !seen_here {
            // From now on its workspace may change out of the kernel's sight.
            session.writes_elsewhere();
        }
        let before = if options.note_written && !relays {
            Some(session.watch_writes(seen_here).await)
        } else {
            None
        };
        let started = Instant::now();
        let usage = Arc::new(Usage::default());
        let ask = options.ask.clone();
        let result = run(&tool, session, input, options, &usage, &self.metrics).await;
        let elapsed = started.elapsed();
        // A call ended on questions the caller answers in a second request
        // (input requests) neither failed nor finished: its statistics are
        // the resumed call's.
        let asked = result.is_err() && ask.is_some_and(|a| a.ended_the_call());
        if !asked {
            tool.record.stats.record_result(elapsed, &result);
            owner.note_call(tool_id, result.is_ok(), elapsed);
        }
        let outcome = match &result {
            _ if asked => "input_required",
            Ok(_) => "ok",
            Err(e) => e.kind().as_str(),
        };
        self.metrics
            .record_call(tool_id, tool.toolkit.backend.name(), outcome, elapsed);
        span.record("toolhost.outcome", outcome);
        if result.is_err() && !asked {
            span.record("error.type", outcome);
            span.record("otel.status_code", "ERROR");
        }
        match &result {
            Ok(_) => {
                tracing::debug!(
                    tool = tool_id,
                    session = session.id(),
                    caller = owner.name(),
                    ?elapsed,
                    "call ok"
                )
            }
            Err(_) if asked => {
                tracing::debug!(
                    tool = tool_id,
                    session = session.id(),
                    ?elapsed,
                    "call ended on questions"
                )
            }
            Err(e) => {
                tracing::info!(tool = tool_id, session = session.id(), caller = owner.name(), ?elapsed, kind = %e.kind(), error = %e, "call failed")
            }
        }
        let fuel = usage.fuel.load(Ordering::Relaxed);
        if fuel > 0 {
            span.record("toolhost.fuel", fuel as i64);
        }
        tool.record
            .stats
            .record_usage(fuel, usage.peak_memory.load(Ordering::Relaxed));
        let content = result?;
        let written = match before {
            Some(before) => session.writes_since(before).await,
            None => Vec::new(),
        };
        Ok(CallOutput {
            content,
            elapsed,
            version: tool.toolkit.version.clone(),
            fuel: (fuel > 0).then_some(fuel),
            written,
            served_by: None,
        })
    }
}

impl Dispatcher {
    /// A tool not in the catalog: if its plugin is on disk and still
    /// compiling, wait for it up to the call's time limit; then a 503 to
    /// retry, never a 404 for a tool that is coming.
    async fn wait_for_tool(
        &self,
        tool_id: &str,
        options: &CallOptions,
    ) -> Result<Arc<ToolEntry>, CallError> {
        let limit = options
            .limits
            .timeout_ms
            .unwrap_or(Limits::default().timeout_ms)
            .min(Limits::default().timeout_ms);
        match self
            .catalog
            .get_or_wait(tool_id, Duration::from_millis(limit))
            .await
        {
            Ok(tool) => Ok(tool),
            Err(true) => {
                let plugin = crate::tool::toolkit_of(tool_id);
                Err(CallError::BackendUnavailable(format!(
                    "plugin `{plugin}` is still compiling (it is on disk and loading); retry in a few seconds"
                )))
            }
            Err(false) => Err(CallError::NotFound(tool_id.to_owned())),
        }
    }
}

async fn run(
    tool: &ToolEntry,
    session: &Arc<Session>,
    input: Value,
    options: CallOptions,
    usage: &Arc<Usage>,
    metrics: &Metrics,
) -> Result<Vec<Content>, CallError> {
    validate(tool, &input)?;
    let toolkit = &tool.toolkit;
    let limits = toolkit.limits.lowered_by(&options.limits);

    // Admission: a free slot now, or a place in the bounded queue.
    let _permit = match toolkit.slots.try_acquire() {
        Ok(permit) => permit,
        Err(_) => {
            let waiting = toolkit.waiting.fetch_add(1, Ordering::AcqRel);
            let _unqueue = scopeguard(|| {
                toolkit.waiting.fetch_sub(1, Ordering::AcqRel);
            });
            if waiting >= u64::from(toolkit.limits.max_queue) {
                return Err(CallError::Overloaded(format!(
                    "plugin `{}` is busy: {} calls running and {} waiting; retry later",
                    toolkit.name, toolkit.limits.max_concurrency, waiting
                )));
            }
            let wait = Duration::from_millis(limits.timeout_ms);
            let queued = Instant::now();
            let span = crate::trace_span!("queue", "toolhost.queue.ahead" = waiting as i64);
            match tokio::time::timeout(wait, toolkit.slots.acquire())
                .instrument(span)
                .await
            {
                Ok(Ok(permit)) => {
                    metrics.record_queue_wait(&tool.id, toolkit.backend.name(), queued.elapsed());
                    permit
                }
                Ok(Err(_)) => {
                    return Err(CallError::Overloaded("the plugin is shutting down".into()));
                }
                Err(_) => {
                    return Err(CallError::Overloaded(format!(
                        "plugin `{}` had no free slot within {} ms; retry later",
                        toolkit.name, limits.timeout_ms
                    )));
                }
            }
        }
    };

    let content = toolkit
        .toolkit
        .clone()
        .invoke(Invocation {
            tool: tool.descriptor.name.clone(),
            id: tool.id.clone(),
            input,
            session: session.clone(),
            limits,
            lower: options.limits,
            progress: options.progress,
            ask: options.ask,
            usage: usage.clone(),
        })
        .await?;
    let size: usize = content.iter().map(Content::size).sum();
    if size > limits.max_output_bytes() {
        return Err(CallError::OutputTooLarge {
            size,
            limit: limits.max_output_bytes(),
        });
    }
    Ok(content)
}

/// Check `input` against the tool's input schema.
pub fn validate(tool: &ToolEntry, input: &Value) -> Result<(), CallError> {
    if tool.validator.is_valid(input) {
        return Ok(());
    }
    let details = crate::schema::violations(&tool.validator, input, MAX_SCHEMA_ERRORS);
    Err(CallError::InvalidInput {
        message: format!(
            "input does not match the schema of `{}`: {}",
            tool.id,
            details.first().map(String::as_str).unwrap_or("invalid")
        ),
        details,
    })
}

/// Run `f` when the guard drops.
fn scopeguard<F: FnOnce()>(f: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

/// Tools calling tools ([`crate::backend::ToolCalls`]) go through
/// [`Dispatcher::dispatch`] like any call.
impl crate::backend::ToolCalls for Dispatcher {
    fn ready(&self, id: &str) -> Result<(&'static str, Value), String> {
        let tool = self
            .catalog
            .get(id)
            .ok_or_else(|| "not loaded".to_owned())?;
        if !tool.record.status().serves() {
            return Err(tool.record.status().as_str().to_owned());
        }
        if let Some(problem) = tool.toolkit.backend.problem(&tool.toolkit.name) {
            return Err(problem.reason);
        }
        Ok((
            tool.toolkit.backend.name(),
            tool.descriptor.input_schema.clone(),
        ))
    }

    fn call(
        self: Arc<Self>,
        session: Arc<Session>,
        id: String,
        input: Value,
        progress: Option<ProgressSink>,
    ) -> crate::tool::BoxFuture<Result<Vec<Content>, CallError>> {
        Box::pin(async move {
            let options = CallOptions {
                progress,
                ..CallOptions::default()
            };
            self.dispatch(&session, &id, input, options)
                .await
                .map(|out| out.content)
        })
    }
}

#[cfg(test)]
mod tests;
