//! Compiling a component: Cranelift's optimised build (on the compile
//! threads, then into the compile cache), and Winch's quick one, served
//! first when the cache has no entry (`[engine] quick_compile`): a new
//! version answers after Winch's compile (a tenth of Cranelift's), and its
//! calls move to Cranelift's build as soon as that is made
//! ([`optimise_behind`]); calls running keep the build they started on.
//! Winch's code counts no epochs: a call of it is stopped at its time limit
//! where it yields, every [`super::engine::QUICK_YIELD_FUEL`] units of fuel.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, oneshot};
use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, Linker};

use super::LoadError;
use super::bindings::{Plugin, PluginPre};
use super::cache::{CompileCache, Origin};
use super::config::EngineConfig;
use super::engine;
use super::state::CallState;
use super::toolkit::{Code, WasmToolkit};

/// Cranelift's compile: what it needs, cloned into a task compiling behind
/// a quick build.
#[derive(Clone)]
pub(super) struct Cranelift {
    pub engine: Engine,
    pub linker: Arc<Linker<CallState>>,
    pub cache: Option<CompileCache>,
    /// Compilations running at once (each also uses cranelift's own threads).
    pub slots: Arc<Semaphore>,
}

impl Cranelift {
    /// Compiled on a thread of its own at the compile priority (at most
    /// `slots` at once), then stored in the cache behind the answer: a swap
    /// does not wait for the serialization, the MAC and the disk's sync (the
    /// runtime finishes the write before the process ends).
    /// `report` is told `compiling` once a slot is taken; `wanted` is asked
    /// then whether the build is still wanted.
    pub async fn build(
        &self,
        bytes: Arc<Vec<u8>>,
        hash: &str,
        report: &(dyn Fn(&'static str) + Sync),
        wanted: &(dyn Fn() -> bool + Sync),
    ) -> Result<Code, LoadError> {
        let component = self.compile(bytes, hash, report, wanted).await?;
        self.code(&component)
    }

    async fn compile(
        &self,
        bytes: Arc<Vec<u8>>,
        hash: &str,
        report: &(dyn Fn(&'static str) + Sync),
        wanted: &(dyn Fn() -> bool + Sync),
    ) -> Result<Component, LoadError> {
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| LoadError::Compile("the engine is shutting down".into()))?;
        if !wanted() {
            return Err(LoadError::Compile("no longer wanted".into()));
        }
        report("compiling");
        let (engine, cache, hash) = (self.engine.clone(), self.cache.clone(), hash.to_owned());
        let runtime = tokio::runtime::Handle::current();
        engine::in_background(move || {
            let component = Component::new(&engine, &*bytes)
                .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
            if let Some(cache) = cache {
                cache.put_behind(&runtime, hash, component.clone());
            }
            Ok(component)
        })
        .await
        .unwrap_or_else(|| Err(LoadError::Compile("the compile thread failed".into())))
    }

    /// Code for calls of `component` (this engine's build), its exports
    /// checked.
    pub fn code(&self, component: &Component) -> Result<Code, LoadError> {
        code(&self.engine, &self.linker, component, false)
    }
}

/// A linker of all a plugin may import (WASI, wasi:http for plugins whose
/// manifest grants hosts, checked on every request by `http::PolicyHooks`,
/// and the world's own interfaces), for `engine`.
pub(super) fn linker(engine: &Engine) -> anyhow::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| anyhow::anyhow!("{e:#}"))?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    Plugin::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |s| s)
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    Ok(linker)
}

/// Winch's engine and linker, and threads of its own to compile on.
pub(super) struct Quick {
    engine: Engine,
    linker: Linker<CallState>,
    /// Winch compiles a component's functions in parallel on rayon's
    /// current pool: run in this one (request priority), not the global
    /// pool, where they would queue behind a Cranelift compile of the
    /// version before (measured: a swap 240 -> 415 ms so).
    threads: Arc<rayon::ThreadPool>,
}

impl Quick {
    /// None when `[engine] quick_compile` is off, or Winch's engine cannot
    /// be made here (logged: every component then waits for Cranelift).
    pub fn new(cfg: &EngineConfig) -> Option<Quick> {
        if !cfg.quick_compile {
            return None;
        }
        let made = engine::build_quick(cfg)
            .map_err(|e| anyhow::anyhow!("{e:#}"))
            .and_then(|engine| {
                let linker = linker(&engine)?;
                let threads = rayon::ThreadPoolBuilder::new()
                    .thread_name(|i| format!("toolhost-quick-{i}"))
                    .build()?;
                Ok(Quick {
                    engine,
                    linker,
                    threads: Arc::new(threads),
                })
            });
        match made {
            Ok(quick) => Some(quick),
            Err(e) => {
                tracing::warn!(error = %e, "no quick compiles (Winch): every component waits for Cranelift");
                None
            }
        }
    }

    /// Winch's build of `bytes`, on its own threads at the request
    /// priority (it is what the swap waits for); none if Winch cannot
    /// compile it (a proposal it lacks: the component waits for Cranelift).
    pub async fn compile(&self, bytes: Arc<Vec<u8>>) -> Option<Component> {
        let (engine, threads) = (self.engine.clone(), self.threads.clone());
        let compiled = tokio::task::spawn_blocking(move || {
            threads.install(|| Component::new(&engine, &*bytes))
        })
        .await;
        match compiled {
            Ok(Ok(component)) => Some(component),
            Ok(Err(e)) => {
                tracing::debug!(error = %format!("{e:#}"), "Winch cannot compile the component: Cranelift's build only");
                None
            }
            Err(_) => None,
        }
    }

    /// Code for calls of `component` (Winch's build), its exports checked.
    pub fn code(&self, component: &Component) -> Result<Code, LoadError> {
        code(&self.engine, &self.linker, component, true)
    }
}

fn code(
    engine: &Engine,
    linker: &Linker<CallState>,
    component: &Component,
    quick: bool,
) -> Result<Code, LoadError> {
    super::check_exports(component)?;
    let pre = linker
        .instantiate_pre(component)
        .map_err(|e| LoadError::Link(format!("{e:#}")))?;
    let pre = PluginPre::new(pre).map_err(|e| LoadError::Link(format!("{e:#}")))?;
    Ok(Code {
        engine: engine.clone(),
        pre,
        quick,
    })
}

/// Compile `bytes` with Cranelift behind `toolkit`'s quick build and move
/// its calls to it; the receiver is told the compile's time when they have
/// moved (dropped if the compile failed: the quick build keeps serving,
/// logged; or if the toolkit is gone before the compile starts: a version
/// replaced meanwhile is not compiled again).
pub(super) fn optimise_behind(
    cranelift: Cranelift,
    toolkit: std::sync::Weak<WasmToolkit>,
    name: String,
    bytes: Arc<Vec<u8>>,
    hash: String,
) -> oneshot::Receiver<(Duration, &'static str)> {
    let (tx, rx) = oneshot::channel();
    // Tests keep a quick build serving, to try the sandbox's limits on it.
    if std::env::var_os("TOOLHOST_QUICK_ONLY").is_some_and(|v| v == "1") {
        return rx;
    }
    tokio::spawn(async move {
        let started = Instant::now();
        let built = cranelift
            .build(bytes, &hash, &|_| {}, &|| toolkit.strong_count() > 0)
            .await;
        match built {
            Ok(code) => {
                let Some(toolkit) = toolkit.upgrade() else {
                    return;
                };
                toolkit.replace_code(code);
                let took = started.elapsed();
                tracing::info!(plugin = %name, compile_ms = took.as_millis() as u64, "calls moved to Cranelift's build");
                let _ = tx.send((took, Origin::Compiled.as_str()));
            }
            // Replaced or removed before its turn came.
            Err(_) if toolkit.strong_count() == 0 => {}
            Err(e) => {
                tracing::warn!(plugin = %name, error = %e, "Cranelift's build failed: Winch's keeps serving")
            }
        }
    });
    rx
}
