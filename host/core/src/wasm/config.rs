//! `[engine]`: the wasm engine's pool, memory and epoch settings.

use serde::{Deserialize, Serialize};

/// The wasm engine: one per server, shared by every plugin.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Ceiling for any plugin's `memory_mb`; also the pool's slot size.
    pub max_memory_mb: u32,
    /// Component instances alive at once across all plugins (pool size).
    /// Each reserves one linear-memory slot of virtual address space.
    pub pool_instances: u32,
    /// Core instances (and memories) per component instance, on average; the
    /// pool holds `pool_instances * core_instances_per_component` of them.
    pub core_instances_per_component: u32,
    /// Virtual reservation per linear memory, MiB. 4096 (the default) lets
    /// wasmtime elide bounds checks using guard pages; lower it to shrink the
    /// pool's address-space reservation at some speed cost.
    pub memory_reservation_mb: u64,
    /// Pool slots decommitted together (batching madvise calls).
    pub decommit_batch_size: u32,
    /// Bytes of each linear memory (KiB) reset in place when an instance is
    /// freed, instead of being returned to the kernel: no madvise, no page
    /// faults on the next call. With `pagemap_scan` only pages actually touched
    /// are reset.
    pub memory_keep_resident_kb: u32,
    /// Likewise for tables, KiB.
    pub table_keep_resident_kb: u32,
    /// Use Linux's PAGEMAP_SCAN (kernel 6.7+) to find the pages to reset;
    /// ignored where unsupported.
    pub pagemap_scan: bool,
    /// Warm pool slots kept for reuse.
    pub max_unused_warm_slots: u32,
    /// Epoch tick: the granularity of timeouts, and how often a long call
    /// yields to other tasks.
    pub epoch_tick_ms: u64,
    /// Wasm stack per call, KiB.
    pub max_wasm_stack_kb: u32,
    /// Compiled functions kept in memory, MiB (0: none): a new version of a
    /// plugin compiles only the functions that changed (hot swap).
    pub function_cache_mb: u32,
    /// Serve a component that is not in the compile cache at once, compiled
    /// by Winch (wasmtime's baseline compiler), while Cranelift compiles it
    /// behind (a hot swap in tens of milliseconds rather than hundreds);
    /// calls then move to Cranelift's build. Off: every component waits for
    /// Cranelift.
    pub quick_compile: bool,
    /// Write `/tmp/perf-<pid>.map` naming the plugins' compiled functions,
    /// so that `perf` profiles of the server show where in a plugin its
    /// time goes (a developer's switch; the file grows with every load).
    pub perf_map: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_memory_mb: 512,
            pool_instances: 256,
            core_instances_per_component: 8,
            memory_reservation_mb: 4096,
            decommit_batch_size: 16,
            memory_keep_resident_kb: 1024,
            table_keep_resident_kb: 64,
            pagemap_scan: true,
            max_unused_warm_slots: 100,
            epoch_tick_ms: 5,
            max_wasm_stack_kb: 1024,
            function_cache_mb: 128,
            quick_compile: true,
            perf_map: false,
        }
    }
}

impl EngineConfig {
    /// Why these settings cannot work, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        let e = self;
        let at_least_1 = [
            ("pool_instances", u64::from(e.pool_instances)),
            (
                "core_instances_per_component",
                u64::from(e.core_instances_per_component),
            ),
            ("epoch_tick_ms", e.epoch_tick_ms),
            ("max_memory_mb", u64::from(e.max_memory_mb)),
        ];
        if let Some((key, _)) = at_least_1.iter().find(|(_, v)| *v < 1) {
            return Err(format!("engine.{key} must be at least 1"));
        }
        if u64::from(e.max_memory_mb) > e.memory_reservation_mb {
            return Err(format!(
                "engine.max_memory_mb ({}) cannot exceed engine.memory_reservation_mb ({})",
                e.max_memory_mb, e.memory_reservation_mb
            ));
        }
        Ok(())
    }
}
