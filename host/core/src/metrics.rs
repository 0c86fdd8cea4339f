//! What operators see of a running server: Prometheus metrics, served as text
//! by `GET /metrics`.
//!
//! One [`Metrics`] per server (its own registry, no global state, so servers
//! in one process, as in tests and benchmarks, do not mix figures). Dispatch
//! records every call, whatever its backend; a backend registers its own
//! series in [`Metrics::registry`] (the wasm backend its per-call fuel,
//! memory and instantiation, the node backend its nodes, read at each
//! scrape).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts, Registry,
    TextEncoder,
};

/// The series of one tool, resolved once: a call then records without
/// hashing label values (the per-call cost stays well under a microsecond).
struct ToolSeries {
    /// Keyed by outcome (`ok` or an error kind), created on first use.
    calls: RwLock<HashMap<&'static str, IntCounter>>,
    duration: Histogram,
    queue_wait: OnceLock<Histogram>,
}

pub struct Metrics {
    /// Off: nothing is recorded and the text is empty (`[server] metrics`).
    enabled: bool,
    /// Tool id -> its series.
    series: RwLock<HashMap<String, Arc<ToolSeries>>>,
    registry: Registry,
    calls: IntCounterVec,
    duration: HistogramVec,
    queue_wait: HistogramVec,
    /// Per caller, brought up to date at each scrape ([`Metrics::observe_callers`]).
    caller_calls: IntCounterVec,
    caller_busy: IntCounterVec,
}

/// Seconds: 100 us .. 60 s.
pub const TIME_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
];

/// A counter family, registered in `registry`.
pub fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let family = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(family.clone()))
        .expect("metric names are unique");
    family
}

/// A histogram family with `buckets`, registered in `registry`.
pub fn histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    buckets: Vec<f64>,
    labels: &[&str],
) -> HistogramVec {
    let family = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
        .expect("valid metric");
    registry
        .register(Box::new(family.clone()))
        .expect("metric names are unique");
    family
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let registry =
            Registry::new_custom(Some("toolhost".into()), None).expect("a valid metrics prefix");
        let r = &registry;
        let time = || TIME_BUCKETS.to_vec();
        let calls = counter(
            r,
            "tool_calls_total",
            "Tool calls by tool, backend and outcome (`ok` or the error kind).",
            &["tool", "backend", "outcome"],
        );
        let duration = histogram(
            r,
            "tool_call_duration_seconds",
            "Wall-clock time of a call, queueing included.",
            time(),
            &["tool", "backend"],
        );
        let queue_wait = histogram(
            r,
            "tool_queue_wait_seconds",
            "Time a call waited for a free slot of its toolkit (max_concurrency).",
            time(),
            &["tool"],
        );
        let caller_calls = counter(
            r,
            "caller_calls_total",
            "Tool calls by caller (the configured ones: a bounded set) and outcome (`ok`, `failed`, `refused` by its policy).",
            &["caller", "outcome"],
        );
        let caller_busy = counter(
            r,
            "caller_busy_milliseconds_total",
            "Time a caller's tool calls ran, summed.",
            &["caller"],
        );
        Metrics {
            enabled: true,
            series: RwLock::default(),
            registry,
            calls,
            duration,
            queue_wait,
            caller_calls,
            caller_busy,
        }
    }

    /// Metrics that record nothing.
    pub fn off() -> Self {
        Metrics {
            enabled: false,
            ..Self::new()
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Bring the per-caller series up to `callers`' usage (before a scrape).
    pub fn observe_callers(&self, callers: &[crate::callers::Caller]) {
        if !self.enabled {
            return;
        }
        let catch_up = |counter: prometheus::IntCounter, total: u64| {
            let now = counter.get();
            if total > now {
                counter.inc_by(total - now);
            }
        };
        for caller in callers {
            let usage = caller.usage();
            let name = caller.name();
            for (outcome, total) in [
                ("ok", usage.ok),
                ("failed", usage.failed),
                ("refused", usage.refused),
            ] {
                catch_up(self.caller_calls.with_label_values(&[name, outcome]), total);
            }
            catch_up(self.caller_busy.with_label_values(&[name]), usage.busy_ms);
        }
    }

    /// The registry, for a backend's own series (registered once, at its
    /// first [`crate::backend::Backend::observe`]).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The series of `tool` (created on its first call).
    fn series(&self, tool: &str, backend: &str) -> Arc<ToolSeries> {
        if let Some(s) = self
            .series
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(tool)
        {
            return s.clone();
        }
        let mut all = self.series.write().unwrap_or_else(|e| e.into_inner());
        all.entry(tool.to_owned())
            .or_insert_with(|| {
                Arc::new(ToolSeries {
                    calls: RwLock::default(),
                    duration: self.duration.with_label_values(&[tool, backend]),
                    queue_wait: OnceLock::new(),
                })
            })
            .clone()
    }

    /// Record one finished call. `outcome` is `ok` or an error kind.
    pub fn record_call(&self, tool: &str, backend: &str, outcome: &'static str, elapsed: Duration) {
        if !self.enabled {
            return;
        }
        let series = self.series(tool, backend);
        let counter = series
            .calls
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(outcome)
            .cloned();
        let counter = counter.unwrap_or_else(|| {
            let c = self.calls.with_label_values(&[tool, backend, outcome]);
            series
                .calls
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(outcome, c.clone());
            c
        });
        counter.inc();
        series.duration.observe(elapsed.as_secs_f64());
    }

    /// A call of `tool` (run by `backend`) that had to wait for a slot
    /// waited `waited`.
    pub fn record_queue_wait(&self, tool: &str, backend: &str, waited: Duration) {
        if !self.enabled {
            return;
        }
        self.series(tool, backend)
            .queue_wait
            .get_or_init(|| self.queue_wait.with_label_values(&[tool]))
            .observe(waited.as_secs_f64());
    }

    /// The Prometheus text exposition of every metric (backends' gauges are
    /// brought up to date first: `PluginManager::observe`).
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding of gathered metrics");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_show_up_in_the_text_format() {
        let m = Metrics::new();
        m.record_call("calc_evaluate", "wasm", "ok", Duration::from_millis(2));
        m.record_call(
            "calc_evaluate",
            "wasm",
            "out_of_fuel",
            Duration::from_millis(3),
        );
        m.record_queue_wait("calc_evaluate", "wasm", Duration::from_millis(1));
        let text = m.render();
        for line in [
            r#"toolhost_tool_calls_total{backend="wasm",outcome="ok",tool="calc_evaluate"} 1"#,
            r#"toolhost_tool_calls_total{backend="wasm",outcome="out_of_fuel",tool="calc_evaluate"} 1"#,
            r#"toolhost_tool_call_duration_seconds_count{backend="wasm",tool="calc_evaluate"} 2"#,
            r#"toolhost_tool_queue_wait_seconds_count{tool="calc_evaluate"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
    }

    #[test]
    fn nothing_is_recorded_when_off() {
        let m = Metrics::off();
        m.record_call("calc_evaluate", "wasm", "ok", Duration::from_millis(2));
        assert!(!m.render().contains("calc_evaluate"));
    }
}
