//! Call statistics of a tool: lock-free counters on the call path, a
//! latency histogram for percentiles, and the row they persist as.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Histogram buckets: four per octave of microseconds, from 1 µs to 2³² µs
/// (71 minutes); a percentile is within ±9 % of the truth.
const BUCKETS: usize = 128;
const PER_OCTAVE: f64 = 4.0;

/// Call statistics of a tool id; kept across reloads of its toolkit and,
/// through the registry, across restarts.
pub struct ToolStats {
    calls: AtomicU64,
    errors: AtomicU64,
    total_latency_us: AtomicU64,
    last_used_ms: AtomicU64,
    latency: [AtomicU64; BUCKETS],
    /// `calls` when last written to the registry.
    persisted: AtomicU64,
    /// Resources the calls used (this run only; wasm tools).
    fuel: AtomicU64,
    peak_memory: AtomicU64,
    /// Calls restored from the registry (made by earlier runs).
    persisted_at_start: AtomicU64,
}

impl Default for ToolStats {
    fn default() -> Self {
        ToolStats {
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            total_latency_us: AtomicU64::new(0),
            last_used_ms: AtomicU64::new(0),
            latency: std::array::from_fn(|_| AtomicU64::new(0)),
            persisted: AtomicU64::new(0),
            fuel: AtomicU64::new(0),
            peak_memory: AtomicU64::new(0),
            persisted_at_start: AtomicU64::new(0),
        }
    }
}

/// A snapshot of [`ToolStats`] for the API.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatsView {
    pub call_count: u64,
    pub error_count: u64,
    pub avg_latency_ms: f64,
    /// Median and 95th percentile latency (±9 %), none before the first call.
    pub p50_latency_ms: Option<f64>,
    pub p95_latency_ms: Option<f64>,
    pub error_rate: f64,
    /// Unix time in milliseconds, none before the first call.
    pub last_used_time: Option<u64>,
}

/// [`ToolStats`] as the registry stores them.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsRow {
    pub calls: u64,
    pub errors: u64,
    pub total_latency_us: u64,
    pub last_used_ms: u64,
    /// Non-empty histogram buckets: (bucket, count).
    pub latency: Vec<(usize, u64)>,
}

fn bucket(latency: Duration) -> usize {
    let us = latency.as_micros().max(1) as f64;
    ((us.log2() * PER_OCTAVE) as usize).min(BUCKETS - 1)
}

/// The middle of bucket `i`, in milliseconds.
fn bucket_ms(i: usize) -> f64 {
    2f64.powf((i as f64 + 0.5) / PER_OCTAVE) / 1000.0
}

impl ToolStats {
    pub fn record(&self, latency: Duration, ok: bool) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.total_latency_us.fetch_add(
            latency.as_micros().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
        self.latency[bucket(latency)].fetch_add(1, Ordering::Relaxed);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.last_used_ms
            .store(now.as_millis() as u64, Ordering::Relaxed);
    }

    /// Add a call's fuel and linear-memory peak (bytes).
    pub fn record_usage(&self, fuel: u64, peak_memory: u64) {
        if fuel > 0 {
            self.fuel.fetch_add(fuel, Ordering::Relaxed);
        }
        if peak_memory > 0 {
            self.peak_memory.fetch_max(peak_memory, Ordering::Relaxed);
        }
    }

    /// Seed 004's ResourceUsage of the tool's calls since the start: the
    /// average fuel per call and the largest linear memory (wasm tools).
    pub fn usage(&self) -> serde_json::Value {
        let calls =
            self.calls.load(Ordering::Relaxed) - self.persisted_at_start.load(Ordering::Relaxed);
        let fuel = self.fuel.load(Ordering::Relaxed);
        let peak = self.peak_memory.load(Ordering::Relaxed);
        serde_json::json!({
            "calls_since_start": calls,
            "avg_fuel": (calls > 0 && fuel > 0).then(|| fuel / calls),
            "peak_memory_mb": (peak > 0).then(|| ((peak as f64 / (1u64 << 20) as f64) * 100.0).round() / 100.0),
        })
    }

    pub fn view(&self) -> StatsView {
        let calls = self.calls.load(Ordering::Relaxed);
        let errors = self.errors.load(Ordering::Relaxed);
        let total_us = self.total_latency_us.load(Ordering::Relaxed);
        let last = self.last_used_ms.load(Ordering::Relaxed);
        let ratio = |n: f64| if calls == 0 { 0.0 } else { n / calls as f64 };
        StatsView {
            call_count: calls,
            error_count: errors,
            avg_latency_ms: ratio(total_us as f64 / 1000.0),
            p50_latency_ms: self.percentile(0.50),
            p95_latency_ms: self.percentile(0.95),
            error_rate: ratio(errors as f64),
            last_used_time: (last != 0).then_some(last),
        }
    }

    fn percentile(&self, q: f64) -> Option<f64> {
        let counts: Vec<u64> = self
            .latency
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some((bucket_ms(i) * 1000.0).round() / 1000.0);
            }
        }
        None
    }

    /// The row to write if calls were made since the last one written.
    pub fn unpersisted(&self) -> Option<StatsRow> {
        let calls = self.calls.load(Ordering::Relaxed);
        if calls == self.persisted.load(Ordering::Relaxed) {
            return None;
        }
        self.persisted.store(calls, Ordering::Relaxed);
        Some(self.row())
    }

    pub fn row(&self) -> StatsRow {
        StatsRow {
            calls: self.calls.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            total_latency_us: self.total_latency_us.load(Ordering::Relaxed),
            last_used_ms: self.last_used_ms.load(Ordering::Relaxed),
            latency: self
                .latency
                .iter()
                .enumerate()
                .map(|(i, c)| (i, c.load(Ordering::Relaxed)))
                .filter(|(_, n)| *n > 0)
                .collect(),
        }
    }

    /// Statistics as a registry row had them (before any call of this run).
    pub fn restore(row: &StatsRow) -> ToolStats {
        let stats = ToolStats::default();
        stats.calls.store(row.calls, Ordering::Relaxed);
        stats.errors.store(row.errors, Ordering::Relaxed);
        stats
            .total_latency_us
            .store(row.total_latency_us, Ordering::Relaxed);
        stats
            .last_used_ms
            .store(row.last_used_ms, Ordering::Relaxed);
        for &(i, n) in &row.latency {
            if let Some(c) = stats.latency.get(i) {
                c.store(n, Ordering::Relaxed);
            }
        }
        stats.persisted.store(row.calls, Ordering::Relaxed);
        stats.persisted_at_start.store(row.calls, Ordering::Relaxed);
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_histogram_within_its_precision() {
        let s = ToolStats::default();
        assert_eq!(s.view().p50_latency_ms, None);
        for ms in 1..=100 {
            s.record(Duration::from_millis(ms), ms % 10 != 0);
        }
        let v = s.view();
        assert_eq!((v.call_count, v.error_count), (100, 10));
        assert_eq!(v.error_rate, 0.1);
        let p50 = v.p50_latency_ms.unwrap();
        let p95 = v.p95_latency_ms.unwrap();
        assert!((50.0 * 0.91..=50.0 * 1.09).contains(&p50), "{p50}");
        assert!((95.0 * 0.91..=95.0 * 1.09).contains(&p95), "{p95}");
    }

    #[test]
    fn a_row_restores_the_same_statistics_and_is_written_once_per_change() {
        let s = ToolStats::default();
        assert_eq!(s.unpersisted(), None);
        s.record(Duration::from_micros(1500), true);
        s.record(Duration::from_secs(2), false);
        let row = s.unpersisted().expect("calls were made");
        assert_eq!(s.unpersisted(), None, "nothing new since");
        let back = ToolStats::restore(&row);
        assert_eq!(back.view(), s.view());
        assert_eq!(back.unpersisted(), None);
        back.record(Duration::from_millis(1), true);
        assert_eq!(back.unpersisted().unwrap().calls, 3);
    }
}
