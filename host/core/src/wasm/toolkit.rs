//! A loaded wasm plugin and how one call runs: a fresh Store and instance from
//! the cached `InstancePre` of the plugin's current build ([`Code`]), fuel, a
//! memory ceiling, a deadline (the epoch's, or for Winch's quick build the
//! yields'), and the output checked before it leaves the sandbox's terms.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;
use tracing::field::Empty;

use wasmtime::{Engine, PoolConcurrencyLimitError, Store, Trap, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use arc_swap::ArcSwap;

use super::LoadError;
use super::bindings::{PluginPre, exports::toolhost::plugin::toolkit as wit};
use super::engine::QUICK_YIELD_FUEL;
use super::limits::Sandbox;
use super::manifest::{Access, GUEST_ASSETS, GUEST_WORKSPACE};
use super::metrics::{Spent, WasmSeries};
use super::state::{CallState, PluginContext};
use crate::backend::{Invocation, Toolkit, Usage};
use crate::text::truncate;
use crate::tool::BoxFuture;
use crate::tool::{CallError, Content, Limits, ToolDescriptor};
use serde_json::Value;

/// Captured stdout + stderr of one call (panic messages land here).
const OUTPUT_CAPTURE: usize = 16 << 10;
/// How much of it goes into a trap message.
const OUTPUT_IN_ERROR: usize = 1024;
/// Extra time the async backstop gives the epoch deadline before dropping a call.
const BACKSTOP_GRACE: Duration = Duration::from_secs(1);

pub struct WasmToolkit {
    code: ArcSwap<Code>,
    ctx: Arc<PluginContext>,
    access: Access,
    /// What the sandbox enforces on each call (a call may lower it).
    sandbox: Sandbox,
    /// Where what a call spent is recorded (none: metrics are off).
    series: Option<Arc<WasmSeries>>,
}

/// The compiled code a call runs: the engine it was compiled for, and its
/// `InstancePre`.
pub struct Code {
    pub engine: Engine,
    pub pre: PluginPre<CallState>,
    /// Winch's quick build ([`super::engine::build_quick`]): no epochs, so
    /// a call's time limit is checked where it yields, every
    /// [`QUICK_YIELD_FUEL`] units of fuel.
    pub quick: bool,
}

/// What to run in the fresh instance.
pub enum Op<'a> {
    List,
    Call {
        tool: &'a str,
        input: &'a str,
        /// Who answers the tool's questions.
        ask: Option<Arc<dyn crate::input::Asker>>,
    },
}

pub enum OpResult {
    Tools(Vec<wit::ToolInfo>),
    Call(Result<Vec<wit::Content>, wit::ToolError>),
}

impl WasmToolkit {
    pub fn new(
        code: Code,
        ctx: Arc<PluginContext>,
        access: Access,
        sandbox: Sandbox,
        series: Option<Arc<WasmSeries>>,
    ) -> Self {
        WasmToolkit {
            code: ArcSwap::from_pointee(code),
            ctx,
            access,
            sandbox,
            series,
        }
    }

    /// Calls from now on run `code` (Cranelift's build of what a quick
    /// build served); calls running keep theirs.
    pub fn replace_code(&self, code: Code) {
        self.code.store(Arc::new(code));
    }

    /// Ask the plugin for its tools, under its own limits.
    pub async fn describe(&self, limits: &Limits) -> Result<Vec<ToolDescriptor>, LoadError> {
        let result = self
            .run(
                Op::List,
                None,
                None,
                (limits, &self.sandbox()),
                None,
                &mut Default::default(),
                false,
            )
            .await
            .map_err(|e| LoadError::Describe(format!("{} ({})", e, e.kind())))?;
        let OpResult::Tools(infos) = result else {
            return Err(LoadError::Describe("unexpected result".into()));
        };
        infos
            .into_iter()
            .map(|info| {
                let parse = |what: &str, text: &str| -> Result<Value, LoadError> {
                    let v: Value = serde_json::from_str(text).map_err(|e| {
                        LoadError::Describe(format!(
                            "tool `{}`: {what} is not JSON: {e}",
                            info.name
                        ))
                    })?;
                    if !v.is_object() {
                        return Err(LoadError::Describe(format!(
                            "tool `{}`: {what} is not a JSON object",
                            info.name
                        )));
                    }
                    Ok(v)
                };
                Ok(ToolDescriptor {
                    input_schema: parse("the input schema", &info.input_schema)?,
                    output_schema: info
                        .output_schema
                        .as_deref()
                        .map(|s| parse("the output schema", s))
                        .transpose()?,
                    description: info.description.clone(),
                    name: info.name,
                    continue_with: None,
                    hints: Default::default(),
                })
            })
            .collect()
    }

    /// What the sandbox enforces on each call, before a caller lowers it.
    pub fn sandbox(&self) -> Sandbox {
        self.sandbox
    }

    /// Run `op` in a fresh sandbox under `limits` and `sandbox`; what it
    /// spent goes to `spent`. `own_thread`: this runs on a thread of its own
    /// (see [`WasmToolkit::invoke`]), where the guest's file operations may
    /// block it.
    #[allow(clippy::too_many_arguments)]
    pub async fn run(
        &self,
        op: Op<'_>,
        workspace: Option<&Path>,
        session: Option<&Arc<crate::sessions::Session>>,
        (limits, sandbox): (&Limits, &Sandbox),
        progress: Option<crate::tool::ProgressSink>,
        spent: &mut Spent,
        own_thread: bool,
    ) -> Result<OpResult, CallError> {
        let output = MemoryOutputPipe::new(OUTPUT_CAPTURE);
        let mut wasi = WasiCtxBuilder::new();
        // On its own thread, a file operation (stat, open, a read) runs
        // right there instead of hopping to the blocking pool and back.
        wasi.allow_blocking_current_thread(own_thread);
        // Deny by default: no env (but what the manifest passes), no args, no
        // sockets, no name lookups (outbound HTTP goes through wasi:http and
        // the manifest's allow-list); stdio captured (stdin closed).
        for (name, value) in &self.ctx.env {
            wasi.env(name, value);
        }
        wasi.stdout(output.clone())
            .stderr(output.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        if let Some(dir) = workspace {
            let perms = match self.access {
                Access::None => None,
                Access::ReadOnly => Some(FsPerms::ReadOnly),
                Access::ReadWrite => Some(FsPerms::ReadWrite),
            };
            if let Some(perms) = perms {
                wasi.preopened_dir(dir, GUEST_WORKSPACE, perms)
                    .map_err(|e| {
                        CallError::Internal(format!("cannot open the session workspace: {e}"))
                    })?;
            }
        }
        if let Some(assets) = &self.ctx.assets {
            wasi.preopened_dir(assets, GUEST_ASSETS, FsPerms::ReadOnly)
                .map_err(|e| {
                    CallError::Internal(format!("cannot open the plugin's assets: {e}"))
                })?;
        }
        let (tool, ask) = match &op {
            Op::List => ("list-tools", None),
            Op::Call { tool, ask, .. } => (*tool, ask.clone()),
        };
        let mut state = CallState::new(
            wasi.build(),
            (sandbox.memory_mb as usize) << 20,
            self.ctx.clone(),
            tool.to_owned(),
            session.map_or("-", |s| s.id()).to_owned(),
            progress,
        );
        state.logs = session.cloned();
        state.ask = ask;
        // What `toolhost:workspace/changes` tells of: the workspace the
        // call sees, if it sees one.
        state.workspace = session.filter(|_| workspace.is_some()).cloned();
        let code = self.code.load_full();
        let mut store = Store::new(&code.engine, state);
        store.limiter(|s| &mut s.limiter);
        store
            .set_fuel(sandbox.fuel)
            .map_err(|e| CallError::Internal(e.to_string()))?;
        let timeout = Duration::from_millis(limits.timeout_ms);
        let deadline = Instant::now() + timeout;
        // What stops wasm code at the time limit: the epoch deadline, or
        // for a quick build the timeout below, at its next yield.
        let backstop = if code.quick {
            store
                .fuel_async_yield_interval(Some(QUICK_YIELD_FUEL))
                .map_err(|e| CallError::Internal(e.to_string()))?;
            timeout
        } else {
            store.set_epoch_deadline(1);
            store.epoch_deadline_callback(move |_| {
                if Instant::now() >= deadline {
                    Ok(UpdateDeadline::Interrupt)
                } else {
                    // Let other calls on this worker thread run, then go on.
                    Ok(UpdateDeadline::Yield(1))
                }
            });
            timeout + BACKSTOP_GRACE
        };

        let mut instantiated = None;
        // The run's span starts once the instance is made.
        let mut running = tracing::Span::none();
        let work = async {
            let started = Instant::now();
            let plugin = code
                .pre
                .instantiate_async(&mut store)
                .instrument(crate::trace_span!("wasm.instantiate"))
                .await?;
            instantiated = Some(started.elapsed());
            running = crate::trace_span!(
                "wasm.run",
                "toolhost.wasm.fuel" = Empty,
                "toolhost.wasm.peak_memory_bytes" = Empty,
            );
            let kit = plugin.toolhost_plugin_toolkit();
            match op {
                Op::List => kit.call_list_tools(&mut store).await.map(OpResult::Tools),
                Op::Call { tool, input, .. } => kit
                    .call_call(&mut store, tool, input)
                    .instrument(running.clone())
                    .await
                    .map(OpResult::Call),
            }
        };
        // This also bounds time spent in host calls.
        let result = tokio::time::timeout(backstop, work).await;
        *spent = Spent {
            fuel: sandbox.fuel.saturating_sub(store.get_fuel().unwrap_or(0)),
            peak_memory: store.data().limiter.peak as u64,
            instantiate: instantiated,
        };
        // As i64: OpenTelemetry has no unsigned integers (a u64 would be text).
        running.record("toolhost.wasm.fuel", spent.fuel as i64);
        running.record("toolhost.wasm.peak_memory_bytes", spent.peak_memory as i64);
        match result {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(classify(e, store.data(), limits, sandbox, &output)),
            Err(_) => Err(CallError::Timeout {
                limit_ms: limits.timeout_ms,
            }),
        }
    }
}

impl Toolkit for WasmToolkit {
    fn writes_seen_here(&self) -> bool {
        true
    }

    fn declared(&self) -> Option<&crate::declared::Declared> {
        Some(&self.ctx.declared)
    }

    fn own_limits(&self) -> serde_json::Map<String, serde_json::Value> {
        self.sandbox.view()
    }

    /// A call of a plugin that mounts folders (the session workspace, its
    /// assets) runs on a blocking-pool thread of its own, its file
    /// operations on that thread: a retrieval call stats every document of
    /// the workspace, and each stat was a hop to the pool and back (~60 us
    /// here). A file operation that never ends (a FIFO named like a
    /// document) holds that thread, as it held a pool thread before, and
    /// the call still ends at its time limit. Other calls stay on the
    /// worker: they have no file to touch.
    fn invoke(self: Arc<Self>, call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
        let own_thread = self.access != Access::None || self.ctx.assets.is_some();
        let limit_ms = call.limits.timeout_ms;
        let work = self.call(call, own_thread);
        if !own_thread {
            return work;
        }
        let span = tracing::Span::current();
        let runtime = tokio::runtime::Handle::current();
        // Dropped with this future (the caller went away, the call was
        // cancelled): the sandbox is dropped at its next yield, as a call on
        // the worker would be.
        let (_dropped, gone) = tokio::sync::oneshot::channel::<()>();
        let guarded = async move {
            tokio::select! {
                result = work => result,
                _ = gone => Err(CallError::Internal("the call was dropped".into())),
            }
        };
        Box::pin(async move {
            let _dropped = _dropped;
            let thread =
                tokio::task::spawn_blocking(move || runtime.block_on(guarded.instrument(span)));
            let limit = Duration::from_millis(limit_ms) + 2 * BACKSTOP_GRACE;
            match tokio::time::timeout(limit, thread).await {
                Ok(Ok(result)) => result,
                Ok(Err(e)) => Err(CallError::Internal(format!(
                    "the call's thread failed: {e}"
                ))),
                // Its own deadlines did not end it: a file operation that
                // does not return holds the thread.
                Err(_) => Err(CallError::Timeout { limit_ms }),
            }
        })
    }
}

impl WasmToolkit {
    fn call(
        self: Arc<Self>,
        call: Invocation,
        own_thread: bool,
    ) -> BoxFuture<Result<Vec<Content>, CallError>> {
        let this = self;
        Box::pin(async move {
            let workspace = match this.access {
                Access::None => None,
                _ => Some(
                    call.session
                        .prepare_workspace()
                        .await
                        .map_err(|e| CallError::Internal(e.to_string()))?
                        .to_owned(),
                ),
            };
            // The guest takes its input as JSON text.
            let input = serde_json::to_string(&call.input)
                .map_err(|e| CallError::Internal(e.to_string()))?;
            let op = Op::Call {
                tool: &call.tool,
                input: &input,
                ask: call.ask.clone(),
            };
            let sandbox = this.sandbox.lowered_by(&call.lower);
            let mut spent = Spent::default();
            let result = this
                .run(
                    op,
                    workspace.as_deref(),
                    Some(&call.session),
                    (&call.limits, &sandbox),
                    call.progress,
                    &mut spent,
                    own_thread,
                )
                .await;
            Usage::set(&call.usage.fuel, spent.fuel);
            Usage::set(&call.usage.peak_memory, spent.peak_memory);
            if let Some(series) = &this.series {
                series.record(&call.id, &spent);
            }
            match result? {
                OpResult::Call(Ok(items)) => convert(items, call.limits.max_output_bytes()),
                OpResult::Call(Err(wit::ToolError::InvalidInput(m))) => {
                    Err(CallError::invalid_input(m))
                }
                OpResult::Call(Err(wit::ToolError::Failed(m))) => Err(CallError::ToolError(m)),
                OpResult::Tools(_) => Err(CallError::Internal("unexpected result".into())),
            }
        })
    }
}

/// Turn a wasmtime error into the call's error kind.
fn classify(
    err: wasmtime::Error,
    state: &CallState,
    limits: &Limits,
    sandbox: &Sandbox,
    output: &MemoryOutputPipe,
) -> CallError {
    if state.limiter.denied {
        return CallError::OutOfMemory {
            limit_mb: sandbox.memory_mb,
        };
    }
    if let Some(trap) = err.downcast_ref::<Trap>() {
        return match trap {
            Trap::OutOfFuel => CallError::OutOfFuel {
                limit: sandbox.fuel,
            },
            Trap::Interrupt => CallError::Timeout {
                limit_ms: limits.timeout_ms,
            },
            Trap::StackOverflow => {
                CallError::Trap("stack overflow: the call stack is exhausted".into())
            }
            other => CallError::Trap(with_output(other.to_string(), output)),
        };
    }
    if let Some(e) = err.downcast_ref::<PoolConcurrencyLimitError>() {
        return CallError::Overloaded(format!("no sandbox slot free ({e}); retry later"));
    }
    let message = format!("{err:#}");
    if message.contains("invalid utf-8") {
        // Lifting a WIT `string` that is not UTF-8: the plugin broke the
        // contract (a C plugin can); the instance is thrown away like a trap.
        return CallError::Trap(format!(
            "the plugin returned a string that is not valid UTF-8 ({message})"
        ));
    }
    CallError::Trap(with_output(message, output))
}

/// `message` plus the tail of what the guest printed (a panic message, say).
fn with_output(message: String, output: &MemoryOutputPipe) -> String {
    let bytes = output.contents();
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    if text.is_empty() {
        return message;
    }
    let start = text.len().saturating_sub(OUTPUT_IN_ERROR);
    let mut start_at = start;
    while !text.is_char_boundary(start_at) {
        start_at += 1;
    }
    format!(
        "{message}; plugin output: {}",
        truncate(&text[start_at..], OUTPUT_IN_ERROR)
    )
}

/// Content items from the guest, size-checked before JSON items are parsed.
fn convert(items: Vec<wit::Content>, max_bytes: usize) -> Result<Vec<Content>, CallError> {
    let size: usize = items
        .iter()
        .map(|c| match c {
            wit::Content::Text(t) | wit::Content::Json(t) => t.len(),
            wit::Content::Binary(b) => b.data.len() + b.media_type.len(),
        })
        .sum();
    if size > max_bytes {
        return Err(CallError::OutputTooLarge {
            size,
            limit: max_bytes,
        });
    }
    items
        .into_iter()
        .map(|c| {
            Ok(match c {
                wit::Content::Text(t) => Content::Text(t),
                wit::Content::Json(j) => Content::Json(serde_json::from_str(&j).map_err(|e| {
                    CallError::ToolError(format!("the plugin returned invalid JSON: {e}"))
                })?),
                wit::Content::Binary(b) => Content::Binary {
                    media_type: b.media_type,
                    data: b.data,
                    name: b.name,
                },
            })
        })
        .collect()
}
