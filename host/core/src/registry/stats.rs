//! Call statistics of a tool: lock-free counters on the call path, a
//! latency histogram for percentiles, and the rows they persist as.
//!
//! The counters count this process's calls. The registry keeps the sum of
//! every process's (every replica's, on a shared database): each flush adds
//! what this process counted since the last one ([`ToolStats::delta`]), and
//! the totals the store then holds come back ([`ToolStats::stored`]). What
//! the API shows is those totals plus the calls not written yet.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Histogram buckets: four per octave of microseconds, from 1 µs to 2³² µs
/// (71 minutes); a percentile is within ±9 % of the truth.
const BUCKETS: usize = 128;
const PER_OCTAVE: f64 = 4.0;

/// Call statistics of a tool id; kept across reloads of its toolkit and,
/// through the registry, across restarts and replicas.
#[derive(Default)]
pub struct ToolStats {
    own: Counters,
    /// This process's counters as last handed to the registry.
    sent: Mutex<StatsRow>,
    /// The registry's totals as last read, and this process's counters as
    /// they were when those totals included them.
    stored: Mutex<(StatsRow, StatsRow)>,
    /// Calls that failed for the tool's own health's sake (this process
    /// only; [`crate::health::is_trouble`]).
    trouble: AtomicU64,
    /// The last troubled calls' errors (kind: message), newest last.
    recent: Mutex<std::collections::VecDeque<String>>,
    /// Resources the calls used (this process only; wasm tools).
    fuel: AtomicU64,
    peak_memory: AtomicU64,
}

struct Counters {
    calls: AtomicU64,
    errors: AtomicU64,
    total_latency_us: AtomicU64,
    last_used_ms: AtomicU64,
    latency: [AtomicU64; BUCKETS],
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            total_latency_us: AtomicU64::new(0),
            last_used_ms: AtomicU64::new(0),
            latency: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Counters {
    fn row(&self) -> StatsRow {
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

/// Statistics as the registry stores them: totals in a row, and what a
/// flush adds to them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatsRow {
    pub calls: u64,
    pub errors: u64,
    pub total_latency_us: u64,
    pub last_used_ms: u64,
    /// Non-empty histogram buckets, by bucket: (bucket, count).
    pub latency: Vec<(usize, u64)>,
}

impl StatsRow {
    /// `self` with `other` added (the later of the last uses).
    pub fn plus(&self, other: &StatsRow) -> StatsRow {
        self.combine(other, |a, b| a.saturating_add(b))
    }

    /// What `self` counts beyond `earlier` (the later last use).
    pub fn minus(&self, earlier: &StatsRow) -> StatsRow {
        self.combine(earlier, |a, b| a.saturating_sub(b))
    }

    fn combine(&self, other: &StatsRow, op: impl Fn(u64, u64) -> u64) -> StatsRow {
        let mut buckets = [0u64; BUCKETS];
        for &(i, n) in &self.latency {
            if let Some(b) = buckets.get_mut(i) {
                *b = n;
            }
        }
        for &(i, n) in &other.latency {
            if let Some(b) = buckets.get_mut(i) {
                *b = op(*b, n);
            }
        }
        StatsRow {
            calls: op(self.calls, other.calls),
            errors: op(self.errors, other.errors),
            total_latency_us: op(self.total_latency_us, other.total_latency_us),
            last_used_ms: self.last_used_ms.max(other.last_used_ms),
            latency: buckets
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| (i, *n))
                .collect(),
        }
    }
}

fn bucket(latency: Duration) -> usize {
    let us = latency.as_micros().max(1) as f64;
    ((us.log2() * PER_OCTAVE) as usize).min(BUCKETS - 1)
}

/// The middle of bucket `i`, in milliseconds.
fn bucket_ms(i: usize) -> f64 {
    2f64.powf((i as f64 + 0.5) / PER_OCTAVE) / 1000.0
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Troubled calls' errors kept per tool.
const RECENT_ERRORS: usize = 10;

impl ToolStats {
    /// [`ToolStats::record`] a call's result, counting its trouble.
    pub fn record_result<T>(&self, latency: Duration, result: &Result<T, crate::tool::CallError>) {
        if let Err(e) = result
            && crate::health::is_trouble(e.kind())
        {
            self.trouble.fetch_add(1, Ordering::Relaxed);
            let mut recent = lock(&self.recent);
            if recent.len() == RECENT_ERRORS {
                recent.pop_front();
            }
            let mut line = format!("{}: {e}", e.kind());
            line.truncate(line.floor_char_boundary(500));
            recent.push_back(line);
        }
        self.record(latency, result.is_ok());
    }

    /// The last troubled calls' errors, oldest first (a repair task's).
    pub fn recent_errors(&self) -> Vec<String> {
        lock(&self.recent).iter().cloned().collect()
    }

    /// This process's calls and the troubled ones among them, since start.
    pub fn health_counts(&self) -> (u64, u64) {
        (
            self.own.calls.load(Ordering::Relaxed),
            self.trouble.load(Ordering::Relaxed),
        )
    }

    pub fn record(&self, latency: Duration, ok: bool) {
        let own = &self.own;
        own.calls.fetch_add(1, Ordering::Relaxed);
        if !ok {
            own.errors.fetch_add(1, Ordering::Relaxed);
        }
        own.total_latency_us.fetch_add(
            latency.as_micros().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
        own.latency[bucket(latency)].fetch_add(1, Ordering::Relaxed);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        own.last_used_ms
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
        let calls = self.own.calls.load(Ordering::Relaxed);
        let fuel = self.fuel.load(Ordering::Relaxed);
        let peak = self.peak_memory.load(Ordering::Relaxed);
        serde_json::json!({
            "calls_since_start": calls,
            "avg_fuel": (calls > 0 && fuel > 0).then(|| fuel / calls),
            "peak_memory_mb": (peak > 0).then(|| ((peak as f64 / (1u64 << 20) as f64) * 100.0).round() / 100.0),
        })
    }

    /// Every process's calls: the stored totals and this process's calls
    /// not in them yet.
    pub fn row(&self) -> StatsRow {
        let own = self.own.row();
        let (total, counted) = lock(&self.stored).clone();
        total.plus(&own.minus(&counted))
    }

    pub fn view(&self) -> StatsView {
        let row = self.row();
        let ratio = |n: f64| {
            if row.calls == 0 {
                0.0
            } else {
                n / row.calls as f64
            }
        };
        StatsView {
            call_count: row.calls,
            error_count: row.errors,
            avg_latency_ms: ratio(row.total_latency_us as f64 / 1000.0),
            p50_latency_ms: percentile(&row.latency, 0.50),
            p95_latency_ms: percentile(&row.latency, 0.95),
            error_rate: ratio(row.errors as f64),
            last_used_time: (row.last_used_ms != 0).then_some(row.last_used_ms),
        }
    }

    /// What this process counted since the last delta, to add to the
    /// registry's totals, and its counters now (to give back to
    /// [`ToolStats::stored`] once written); none without new calls.
    pub fn delta(&self) -> Option<(StatsRow, StatsRow)> {
        let now = self.own.row();
        let mut sent = lock(&self.sent);
        if now.calls == sent.calls {
            return None;
        }
        let delta = now.minus(&sent);
        *sent = now.clone();
        Some((delta, now))
    }

    /// The registry's totals, read after it wrote this process's counters
    /// as `counted` had them (`None`: unchanged since the last totals).
    pub fn stored(&self, total: StatsRow, counted: Option<StatsRow>) {
        let mut stored = lock(&self.stored);
        stored.0 = total;
        if let Some(counted) = counted {
            stored.1 = counted;
        }
    }

    /// Statistics as a registry row had them (before any call of this run).
    pub fn restore(row: &StatsRow) -> ToolStats {
        let stats = ToolStats::default();
        stats.stored(row.clone(), None);
        stats
    }
}

fn percentile(latency: &[(usize, u64)], q: f64) -> Option<f64> {
    let total: u64 = latency.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for &(i, n) in latency {
        seen += n;
        if seen >= rank {
            return Some((bucket_ms(i) * 1000.0).round() / 1000.0);
        }
    }
    None
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
    fn a_row_restores_the_same_statistics_and_deltas_add_up() {
        let s = ToolStats::default();
        assert_eq!(s.delta(), None);
        s.record(Duration::from_micros(1500), true);
        s.record(Duration::from_secs(2), false);
        let (delta, now) = s.delta().expect("calls were made");
        assert_eq!(s.delta(), None, "nothing new since");
        assert_eq!(delta, now);
        let back = ToolStats::restore(&delta);
        assert_eq!(back.view(), s.view());
        assert_eq!(back.delta(), None);
        back.record(Duration::from_millis(1), true);
        let (more, _) = back.delta().unwrap();
        assert_eq!(more.calls, 1, "only the new call is added");
        assert_eq!(back.view().call_count, 3);
    }

    /// Two processes adding to one store: each shows the sum once the
    /// totals come back, and its own unwritten calls before.
    #[test]
    fn two_processes_add_up_in_the_store() {
        let (a, b) = (ToolStats::default(), ToolStats::default());
        let mut store = StatsRow::default();
        for _ in 0..3 {
            a.record(Duration::from_millis(2), true);
        }
        b.record(Duration::from_millis(40), false);
        let (da, na) = a.delta().unwrap();
        store = store.plus(&da);
        a.stored(store.clone(), Some(na));
        let (db, nb) = b.delta().unwrap();
        store = store.plus(&db);
        b.stored(store.clone(), Some(nb));
        assert_eq!(b.view().call_count, 4);
        assert_eq!(a.view().call_count, 3, "a has not read the totals again");
        a.record(Duration::from_millis(2), true);
        assert_eq!(a.view().call_count, 4, "its own unwritten call counts");
        a.stored(store.clone(), None);
        assert_eq!((a.view().call_count, a.view().error_count), (5, 1));
        let (da, na) = a.delta().unwrap();
        assert_eq!(da.calls, 1);
        store = store.plus(&da);
        a.stored(store.clone(), Some(na));
        b.stored(store.clone(), None);
        assert_eq!(a.view(), b.view());
        assert_eq!(a.view().call_count, 5);
    }
}
