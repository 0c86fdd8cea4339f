//! The wasmtime engine, configured in one place: pooling allocator, fuel, epoch
//! interruption with one ticker thread per engine, stack sizes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig,
};

use super::config::EngineConfig;

/// Default guard region after each linear memory (wasmtime's default on 64-bit).
const GUARD_BYTES: u64 = 32 << 20;

/// Build the engine. Also returns the pool's virtual address reservation in
/// bytes, which is logged at start-up.
pub fn build(cfg: &EngineConfig) -> wasmtime::Result<(Engine, u64)> {
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

    let stack = (cfg.max_wasm_stack_kb as usize) << 10;
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .cranelift_opt_level(OptLevel::Speed)
        .memory_reservation(reservation)
        .memory_guard_size(GUARD_BYTES)
        .max_wasm_stack(stack)
        // The fiber a call runs on holds the wasm stack plus host frames.
        .async_stack_size(stack + (1 << 20))
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    let engine = Engine::new(&config)?;
    Ok((engine, u64::from(memories) * (reservation + GUARD_BYTES)))
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
