//! The wasm backend's own series in `/metrics`: per tool, the fuel a call
//! consumed, the largest linear memory of its instance and the time to
//! create its sandbox. Registered in the server's registry when the server
//! hands the backend its [`Metrics`]; recorded by the toolkit at the end of
//! each call.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus::{Histogram, HistogramVec, IntCounter, IntCounterVec};

use crate::metrics::{Metrics, TIME_BUCKETS, counter, histogram};

/// What one call of a wasm tool spent, as the sandbox measured it.
#[derive(Debug, Default, Clone, Copy)]
pub struct Spent {
    pub fuel: u64,
    /// Bytes.
    pub peak_memory: u64,
    pub instantiate: Option<Duration>,
}

/// One tool's series, resolved once (a call then records without hashing
/// label values).
struct ToolSeries {
    fuel: IntCounter,
    fuel_per_call: Histogram,
    peak_memory: Histogram,
    instantiate: Histogram,
}

pub struct WasmSeries {
    fuel: IntCounterVec,
    fuel_per_call: HistogramVec,
    peak_memory: HistogramVec,
    instantiate: HistogramVec,
    /// Tool id -> its series.
    tools: RwLock<HashMap<String, Arc<ToolSeries>>>,
}

impl WasmSeries {
    /// The series, registered in `metrics`' registry; none when metrics are
    /// off.
    pub fn register(metrics: &Metrics) -> Option<Self> {
        if !metrics.is_enabled() {
            return None;
        }
        let r = metrics.registry();
        let exponential = |start, factor, count| {
            prometheus::exponential_buckets(start, factor, count).expect("valid buckets")
        };
        Some(WasmSeries {
            fuel: counter(
                r,
                "wasm_fuel_consumed_total",
                "Fuel units consumed by wasm calls (about one per instruction).",
                &["tool"],
            ),
            fuel_per_call: histogram(
                r,
                "wasm_fuel_per_call",
                "Fuel units consumed per wasm call.",
                exponential(1e3, 10.0, 9),
                &["tool"],
            ),
            peak_memory: histogram(
                r,
                "wasm_peak_memory_bytes",
                "Largest linear memory of a wasm call's instance.",
                exponential(65536.0, 4.0, 9),
                &["tool"],
            ),
            instantiate: histogram(
                r,
                "wasm_instantiate_seconds",
                "Time to create a call's sandbox (Store + instance).",
                TIME_BUCKETS.to_vec(),
                &["tool"],
            ),
            tools: RwLock::default(),
        })
    }

    fn tool(&self, id: &str) -> Arc<ToolSeries> {
        if let Some(s) = self.tools.read().unwrap_or_else(|e| e.into_inner()).get(id) {
            return s.clone();
        }
        let mut all = self.tools.write().unwrap_or_else(|e| e.into_inner());
        all.entry(id.to_owned())
            .or_insert_with(|| {
                Arc::new(ToolSeries {
                    fuel: self.fuel.with_label_values(&[id]),
                    fuel_per_call: self.fuel_per_call.with_label_values(&[id]),
                    peak_memory: self.peak_memory.with_label_values(&[id]),
                    instantiate: self.instantiate.with_label_values(&[id]),
                })
            })
            .clone()
    }

    /// Record what one call of tool `id` spent.
    pub fn record(&self, id: &str, spent: &Spent) {
        let s = self.tool(id);
        if spent.fuel > 0 {
            s.fuel.inc_by(spent.fuel);
            s.fuel_per_call.observe(spent.fuel as f64);
        }
        if spent.peak_memory > 0 {
            s.peak_memory.observe(spent.peak_memory as f64);
        }
        if let Some(t) = spent.instantiate {
            s.instantiate.observe(t.as_secs_f64());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_call_spent_shows_in_the_text_format() {
        let m = Metrics::new();
        let series = WasmSeries::register(&m).unwrap();
        series.record(
            "calc_evaluate",
            &Spent {
                fuel: 1234,
                peak_memory: 1 << 20,
                instantiate: Some(Duration::from_micros(20)),
            },
        );
        let text = m.render();
        for line in [
            r#"toolhost_wasm_fuel_consumed_total{tool="calc_evaluate"} 1234"#,
            r#"toolhost_wasm_peak_memory_bytes_count{tool="calc_evaluate"} 1"#,
            r#"toolhost_wasm_instantiate_seconds_count{tool="calc_evaluate"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
        assert!(WasmSeries::register(&Metrics::off()).is_none());
    }
}
