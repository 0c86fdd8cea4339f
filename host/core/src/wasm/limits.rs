//! A wasm plugin's limits: the common ones dispatch enforces for every
//! toolkit ([`Limits`]) and the sandbox's own ([`Sandbox`]: fuel and linear
//! memory), set by `[limits]` in the server's configuration (the defaults)
//! and in a plugin's manifest, lowered per call by the caller.

use serde::{Deserialize, Serialize};

use crate::tool::{LimitOverrides, Limits};

/// What the wasm sandbox itself enforces on each call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sandbox {
    /// Fuel per call (about one unit per wasm instruction).
    pub fuel: u64,
    /// Linear memory ceiling per instance, MiB.
    pub memory_mb: u32,
}

impl Sandbox {
    /// These limits lowered by `o` where it asks for less.
    pub fn lowered_by(mut self, o: &LimitOverrides) -> Sandbox {
        if let Some(f) = o.fuel {
            self.fuel = self.fuel.min(f);
        }
        if let Some(m) = o.memory_mb {
            self.memory_mb = self.memory_mb.min(m);
        }
        self
    }

    /// As admin views show them, beside the common limits.
    pub fn view(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("fuel".into(), self.fuel.into());
        m.insert("memory_mb".into(), self.memory_mb.into());
        m
    }
}

/// `[limits]`: every limit of a wasm plugin, for plugins whose manifest does
/// not set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginLimits {
    /// Fuel per call (about one unit per wasm instruction).
    pub fuel: u64,
    /// Linear memory ceiling per instance, MiB.
    pub memory_mb: u32,
    /// Wall-clock limit per call, milliseconds.
    pub timeout_ms: u64,
    /// Calls of this plugin running at once; further calls wait in a queue.
    pub max_concurrency: u32,
    /// Calls waiting for a slot beyond which new calls are refused (`overloaded`).
    pub max_queue: u32,
    /// Largest result, KiB.
    pub max_output_kb: u32,
}

impl Default for PluginLimits {
    fn default() -> Self {
        let common = Limits::default();
        PluginLimits {
            fuel: 1_000_000_000,
            memory_mb: 64,
            timeout_ms: common.timeout_ms,
            max_concurrency: common.max_concurrency,
            max_queue: common.max_queue,
            max_output_kb: common.max_output_kb,
        }
    }
}

impl PluginLimits {
    /// The common part, which dispatch enforces.
    pub fn common(&self) -> Limits {
        Limits {
            timeout_ms: self.timeout_ms,
            max_concurrency: self.max_concurrency,
            max_queue: self.max_queue,
            max_output_kb: self.max_output_kb,
        }
    }

    /// The sandbox's part.
    pub fn sandbox(&self) -> Sandbox {
        Sandbox {
            fuel: self.fuel,
            memory_mb: self.memory_mb,
        }
    }

    /// Why no call could run under these limits, if none could.
    pub fn check(&self, max_memory_mb: u32) -> Result<(), String> {
        let range = |name: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("{name} = {v} is out of range {lo}..={hi}"))
            }
        };
        range("fuel", self.fuel, 1_000, u64::MAX / 2)?;
        range("memory_mb", self.memory_mb.into(), 1, max_memory_mb.into())
            .map_err(|e| format!("{e} (the server's engine.max_memory_mb)"))?;
        range("timeout_ms", self.timeout_ms, 1, 3_600_000)?;
        range("max_concurrency", self.max_concurrency.into(), 1, 4096)?;
        range("max_queue", self.max_queue.into(), 0, 100_000)?;
        range("max_output_kb", self.max_output_kb.into(), 1, 1 << 20)?;
        Ok(())
    }
}

/// `[limits]` of a plugin's manifest; unset ones come from the server's
/// defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestLimits {
    pub fuel: Option<u64>,
    pub memory_mb: Option<u32>,
    pub timeout_ms: Option<u64>,
    pub max_concurrency: Option<u32>,
    pub max_queue: Option<u32>,
    pub max_output_kb: Option<u32>,
}

impl ManifestLimits {
    /// The effective limits: these over `defaults`, checked against the
    /// engine's `max_memory_mb`.
    pub fn over(
        &self,
        defaults: &PluginLimits,
        max_memory_mb: u32,
    ) -> Result<PluginLimits, String> {
        let limits = PluginLimits {
            fuel: self.fuel.unwrap_or(defaults.fuel),
            memory_mb: self.memory_mb.unwrap_or(defaults.memory_mb),
            timeout_ms: self.timeout_ms.unwrap_or(defaults.timeout_ms),
            max_concurrency: self.max_concurrency.unwrap_or(defaults.max_concurrency),
            max_queue: self.max_queue.unwrap_or(defaults.max_queue),
            max_output_kb: self.max_output_kb.unwrap_or(defaults.max_output_kb),
        };
        limits.check(max_memory_mb)?;
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_lowers_the_sandbox_never_raises_it() {
        let s = PluginLimits::default().sandbox();
        let lower = LimitOverrides {
            fuel: Some(10),
            memory_mb: Some(1 << 20),
            ..Default::default()
        };
        let l = s.lowered_by(&lower);
        assert_eq!((l.fuel, l.memory_mb), (10, s.memory_mb));
    }

    #[test]
    fn the_manifest_goes_over_the_defaults_and_is_checked() {
        let defaults = PluginLimits::default();
        let m = ManifestLimits {
            fuel: Some(5000),
            memory_mb: Some(16),
            ..Default::default()
        };
        let l = m.over(&defaults, 512).unwrap();
        assert_eq!((l.fuel, l.memory_mb), (5000, 16));
        assert_eq!(l.common().timeout_ms, defaults.timeout_ms);
        let big = ManifestLimits {
            memory_mb: Some(1024),
            ..Default::default()
        };
        let err = big.over(&defaults, 512).unwrap_err();
        assert!(err.contains("engine.max_memory_mb"), "{err}");
    }
}
