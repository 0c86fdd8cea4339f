//! The wasmtime engine, configured in one place: pooling allocator, fuel, epoch
//! interruption with one ticker thread per engine, stack sizes.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{
    CacheStore, Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel,
    PoolingAllocationConfig,
};

use super::config::EngineConfig;

/// Default guard region after each linear memory (wasmtime's default on 64-bit).
const GUARD_BYTES: u64 = 32 << 20;

/// Build the engine. Also returns the pool's virtual address reservation in
/// bytes, which is logged at start-up.
pub fn build(cfg: &EngineConfig) -> wasmtime::Result<(Engine, u64)> {
    let cache = (cfg.function_cache_mb > 0)
        .then(|| Arc::new(FunctionCache::new((cfg.function_cache_mb as usize) << 20)));
    build_with(cfg, cache)
}

/// [`build`], with `cache` as the function cache.
fn build_with(
    cfg: &EngineConfig,
    cache: Option<Arc<FunctionCache>>,
) -> wasmtime::Result<(Engine, u64)> {
    let instances = cfg.pool_instances;
    let core_instances = instances.saturating_mul(cfg.core_instances_per_component);
    // Components built by Rust, componentize-py and jco define one linear memory
    // each; leave room for one more.
    let memories = instances.saturating_mul(2);
    let reservation = cfg.memory_reservation_mb << 20;

    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(instances)
        .total_core_instances(core_instances)
        .total_memories(memories)
        .total_tables(core_instances)
        .total_stacks(instances)
        .max_memory_size((cfg.max_memory_mb as usize) << 20)
        .max_tables_per_module(4)
        .decommit_batch_size(cfg.decommit_batch_size as usize)
        .max_unused_warm_slots(cfg.max_unused_warm_slots);
    // Resetting a freed slot in place beats handing its pages back to the
    // kernel (madvise, then page faults on the next call) only when
    // PAGEMAP_SCAN tells which pages were touched; without it a large memset
    // costs more than it saves, so keep nothing resident.
    if cfg.pagemap_scan && kernel_has_pagemap_scan() {
        pool.pagemap_scan(Enabled::Auto)
            .linear_memory_keep_resident((cfg.memory_keep_resident_kb as usize) << 10)
            .table_keep_resident((cfg.table_keep_resident_kb as usize) << 10);
    }

    let mut config = shared(cfg);
    config
        .epoch_interruption(true)
        .cranelift_opt_level(OptLevel::Speed)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    if let Some(cache) = cache {
        config.enable_incremental_compilation(cache)?;
    }
    let engine = Engine::new(&config)?;
    Ok((engine, u64::from(memories) * (reservation + GUARD_BYTES)))
}

/// Fuel a call of a quick build (Winch) runs between two yields: its
/// wall-clock limit is checked there, as epochs are not counted by Winch's
/// code. About a millisecond of wasm at Winch's pace.
pub const QUICK_YIELD_FUEL: u64 = 1_000_000;

/// The quick engine: Winch, wasmtime's baseline compiler (a tenth of
/// Cranelift's compile time, slower code), for a new component's first
/// calls while Cranelift compiles it behind them (a hot swap served at
/// once). The same limits as [`build`]'s engine, but no epochs (Winch has
/// none: a call's time limit is checked every [`QUICK_YIELD_FUEL`] units of
/// fuel instead) and no pool (it serves a component for a moment).
pub fn build_quick(cfg: &EngineConfig) -> wasmtime::Result<Engine> {
    let mut config = shared(cfg);
    config.strategy(wasmtime::Strategy::Winch);
    Engine::new(&config)
}

/// What both engines are: components, fuel, the memory reservation and
/// its guard, the stack ceiling, and the profiler's map if asked for.
fn shared(cfg: &EngineConfig) -> Config {
    let stack = (cfg.max_wasm_stack_kb as usize) << 10;
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .memory_reservation(cfg.memory_reservation_mb << 20)
        .memory_guard_size(GUARD_BYTES)
        .max_wasm_stack(stack)
        // The fiber a call runs on holds the wasm stack plus host frames.
        .async_stack_size(stack + (1 << 20));
    if cfg.perf_map {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    config
}

/// Cranelift's compiled functions, kept across compiles in memory (its
/// incremental cache): each is keyed by the SHA-256 of the function's IR
/// and the compiler's settings, and holds what Cranelift made of it, so a
/// new version of a plugin (a rebuild, a tag) compiles only the functions
/// that changed, and identical functions of other plugins are compiled
/// once. Only this process's own compiles fill it; nothing is read from
/// disk. The oldest entries go first past the byte budget.
#[derive(Debug)]
struct FunctionCache {
    budget: usize,
    inner: Mutex<Cached>,
    /// Functions found compiled (tests).
    hits: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Default)]
struct Cached {
    entries: HashMap<Vec<u8>, Vec<u8>>,
    order: VecDeque<Vec<u8>>,
    bytes: usize,
}

impl FunctionCache {
    fn new(budget: usize) -> Self {
        FunctionCache {
            budget,
            inner: Mutex::default(),
            hits: Default::default(),
        }
    }
}

impl CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let found = inner.entries.get(key).map(|v| Cow::Owned(v.clone()));
        if found.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let size = key.len() + value.len();
        if size > self.budget {
            return false;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        while inner.bytes + size > self.budget {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            if let Some(v) = inner.entries.remove(&old) {
                inner.bytes -= old.len() + v.len();
            }
        }
        if let Some(v) = inner.entries.insert(key.to_vec(), value) {
            inner.bytes -= key.len() + v.len();
        } else {
            inner.order.push_back(key.to_vec());
        }
        inner.bytes += size;
        true
    }
}

/// Niceness of compile threads: under load, request handling (nice 0) gets
/// the cores first and compiles take what is left.
const COMPILE_NICE: i32 = 10;

/// Lower the calling thread's scheduling priority (Linux: per thread).
fn lower_priority() {
    // SAFETY: setpriority with `who` 0 changes only the calling thread's
    // niceness; it has no memory effects.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, COMPILE_NICE) };
    if r != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "cannot lower a compile thread's priority");
    }
}

/// Cranelift's parallel compilation runs on rayon's global pool: give its
/// threads the compile priority (once per process; a pool someone else made
/// first is left as it is).
pub fn configure_compile_pool() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let built = rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("toolhost-compile-{i}"))
            .start_handler(|_| lower_priority())
            .build_global();
        if let Err(e) = built {
            tracing::debug!(error = %e, "rayon's global pool was already built");
        }
    });
}

/// Run `f` (a compile) on a thread of its own at the compile priority; none
/// if the thread could not be made or panicked.
pub async fn in_background<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("toolhost-compile".into())
        .spawn(move || {
            lower_priority();
            let _ = tx.send(f());
        })
        .ok()?;
    rx.await.ok()
}

/// PAGEMAP_SCAN arrived in Linux 6.7.
fn kernel_has_pagemap_scan() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (6, 7)
}

/// The one thread that advances an engine's epoch every tick. Timeouts are
/// counted in ticks; a call also yields to other tasks at every tick.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub fn start(engine: &Engine, tick: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let thread = std::thread::Builder::new()
            .name("toolhost-epoch".into())
            .spawn({
                let stop = stop.clone();
                move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(tick);
                        match weak.upgrade() {
                            Some(engine) => engine.increment_epoch(),
                            None => return,
                        }
                    }
                }
            })
            .expect("failed to spawn the epoch ticker thread");
        EpochTicker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_function_cache_keeps_the_newest_within_its_budget() {
        let cache = FunctionCache::new(100);
        assert!(cache.insert(b"a", vec![1; 40]));
        assert!(cache.insert(b"b", vec![2; 40]));
        assert_eq!(cache.get(b"a").as_deref(), Some(&[1u8; 40][..]));
        // Over the budget: the oldest goes.
        assert!(cache.insert(b"c", vec![3; 40]));
        assert!(cache.get(b"a").is_none());
        assert!(cache.get(b"b").is_some() && cache.get(b"c").is_some());
        // Replaced in place, counted once.
        assert!(cache.insert(b"c", vec![4; 10]));
        assert_eq!(cache.get(b"c").as_deref(), Some(&[4u8; 10][..]));
        assert!(cache.insert(b"d", vec![5; 40]));
        assert!(cache.get(b"b").is_some(), "41 + 11 + 41 bytes fit");
        // Larger than the whole budget: refused, nothing evicted.
        assert!(!cache.insert(b"e", vec![6; 200]));
        assert!(cache.get(b"d").is_some());
    }

    /// Winch's code counts fuel and yields every [`QUICK_YIELD_FUEL`]: a
    /// spinning call is stopped by the timeout around it (what a quick
    /// build's time limit rests on: no epochs), and fuel runs out as it does
    /// on Cranelift's.
    #[tokio::test(flavor = "current_thread")]
    async fn a_quick_build_yields_to_its_time_limit_and_counts_fuel() {
        use wasmtime::component::{Component, Linker};
        let engine = build_quick(&EngineConfig::default()).expect("Winch's engine");
        let wat = r#"(component
            (core module $m (func (export "spin") (loop br 0)))
            (core instance $i (instantiate $m))
            (func (export "spin") (canon lift (core func $i "spin"))))"#;
        let component = Component::new(&engine, wat).expect("Winch compiles it");
        let linker = Linker::<()>::new(&engine);
        let run = |fuel: u64| {
            let (engine, component, linker) = (&engine, &component, &linker);
            async move {
                let mut store = wasmtime::Store::new(engine, ());
                store.set_fuel(fuel)?;
                store.fuel_async_yield_interval(Some(QUICK_YIELD_FUEL))?;
                let instance = linker.instantiate_async(&mut store, component).await?;
                let spin = instance.get_typed_func::<(), ()>(&mut store, "spin")?;
                spin.call_async(&mut store, ()).await
            }
        };
        let started = std::time::Instant::now();
        let stopped = tokio::time::timeout(Duration::from_millis(100), run(u64::MAX)).await;
        assert!(stopped.is_err(), "the spin ended by itself: {stopped:?}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let error = run(20 * QUICK_YIELD_FUEL).await.expect_err("out of fuel");
        assert_eq!(
            error.downcast_ref::<wasmtime::Trap>(),
            Some(&wasmtime::Trap::OutOfFuel),
            "{error:?}"
        );
    }

    #[test]
    fn a_new_version_compiles_only_the_functions_that_changed() {
        let cfg = EngineConfig {
            pool_instances: 4,
            ..EngineConfig::default()
        };
        let cache = Arc::new(FunctionCache::new(1 << 20));
        let (engine, _) = build_with(&cfg, Some(cache.clone())).expect("engine");
        let component = |answer: i32| {
            format!(
                r#"(component
                (core module $m
                    (func (export "f") (result i32) i32.const {answer})
                    (func (export "g") (param i32) (result i32) local.get 0 i32.const 7 i32.mul))
                (core instance $i (instantiate $m))
                (func (export "f") (result s32) (canon lift (core func $i "f")))
                (func (export "g") (param "x" s32) (result s32) (canon lift (core func $i "g"))))"#
            )
        };
        let call = |wat: &str| {
            let c = wasmtime::component::Component::new(&engine, wat).expect("compiles");
            let linker = wasmtime::component::Linker::<()>::new(&engine);
            let mut store = wasmtime::Store::new(&engine, ());
            store.set_fuel(1_000_000).unwrap();
            store.set_epoch_deadline(1_000);
            let i = linker.instantiate(&mut store, &c).expect("instance");
            let f = i.get_typed_func::<(), (i32,)>(&mut store, "f").unwrap();
            let g = i.get_typed_func::<(i32,), (i32,)>(&mut store, "g").unwrap();
            (
                f.call(&mut store, ()).unwrap().0,
                g.call(&mut store, (6,)).unwrap().0,
            )
        };
        assert_eq!(call(&component(1)), (1, 42));
        let before = cache.hits.load(Ordering::Relaxed);
        // `g` and the glue are the same; `f` changed and answers anew.
        assert_eq!(call(&component(2)), (2, 42));
        assert!(
            cache.hits.load(Ordering::Relaxed) > before,
            "unchanged functions reused"
        );
    }
}
