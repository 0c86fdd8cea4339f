//! Limits: each misbehaving plugin call ends with its own error kind, the
//! server stays up, and well-behaved calls running meanwhile are not disturbed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::{PluginsDir, Server, kind};

/// Invoke with per-call limit overrides.
fn invoke_limited(s: &Server, tool: &str, params: Value, limits: Value) -> (u16, Value) {
    let r = s
        .client()
        .post(s.url(&format!("/tools/{tool}/invoke")))
        .json(&json!({"params": params, "limits": limits}))
        .send()
        .unwrap();
    (r.status().as_u16(), r.json().unwrap())
}

/// Good calc calls in a loop until stopped; counts successes and failures.
struct Background {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

fn background_calls(s: &Server) -> Background {
    let (stop, ok, failed) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let url = s.url("/tools/calc_evaluate/invoke");
    let thread = std::thread::spawn({
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        move || {
            let http = reqwest::blocking::Client::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let r = http
                    .post(&url)
                    .json(&json!({"params": {"expression": format!("{i} * 2")}}))
                    .send();
                let good = r
                    .ok()
                    .filter(|r| r.status().is_success())
                    .and_then(|r| r.json::<Value>().ok());
                if good.and_then(|b| b["result"]["value"].as_f64()) == Some((i * 2) as f64) {
                    ok.fetch_add(1, Ordering::Relaxed);
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    });
    Background {
        stop,
        ok,
        failed,
        thread,
    }
}

impl Background {
    fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

#[test]
fn each_breach_gets_its_kind_and_spares_other_calls() {
    let mut s = Server::start(
        PluginsDir::new()
            .add("calc", "calc")
            .add("hostile", "hostile"),
    );
    let bg = background_calls(&s);

    // Wall clock: an infinite loop is stopped by the epoch deadline.
    let started = std::time::Instant::now();
    let (status, out) = invoke_limited(&s, "hostile_spin", json!({}), json!({"timeout_ms": 300}));
    assert_eq!((status, kind(&out)), (504, "timeout"), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "stopped near its deadline"
    );

    // Fuel: the same loop with little fuel and plenty of time.
    let (status, out) = invoke_limited(&s, "hostile_spin", json!({}), json!({"fuel": 20_000_000}));
    assert_eq!((status, kind(&out)), (500, "out_of_fuel"), "{out}");

    // Memory: the manifest's 256 MiB ceiling, or a lower one per call.
    let (status, out) = s.invoke("hostile_hog", json!({}));
    assert_eq!((status, kind(&out)), (500, "out_of_memory"), "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("256 MiB"),
        "{out}"
    );
    let (status, out) = invoke_limited(&s, "hostile_hog", json!({}), json!({"memory_mb": 32}));
    assert_eq!((status, kind(&out)), (500, "out_of_memory"), "{out}");
    assert!(
        out["error"]["message"].as_str().unwrap().contains("32 MiB"),
        "{out}"
    );

    // Stack: deep recursion traps.
    let (status, out) = s.invoke("hostile_recurse", json!({"depth": 100_000_000u64}));
    assert_eq!((status, kind(&out)), (500, "trap"), "{out}");

    // Panic: a trap whose message carries the panic text.
    let (status, out) = s.invoke("hostile_panic", json!({"message": "boom-1234"}));
    assert_eq!((status, kind(&out)), (500, "trap"), "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("boom-1234"),
        "{out}"
    );

    // Output: 100 MiB refused by the 1 MiB output limit of hostile.toml.
    let (status, out) = s.invoke("hostile_big_output", json!({"mb": 100}));
    assert_eq!((status, kind(&out)), (500, "output_too_large"), "{out}");
    let (status, out) = s.invoke("hostile_big_output", json!({"mb": 0}));
    assert_eq!(status, 200, "an empty output is fine: {out}");

    // Filesystem: nothing outside the workspace exists for the plugin.
    let (status, out) = s.invoke("hostile_read_passwd", json!({}));
    assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");
    assert!(!out.to_string().contains("root:"), "{out}");

    // The plugin's typed errors.
    let (status, out) = s.invoke("hostile_fail", json!({"invalid": true}));
    assert_eq!((status, kind(&out)), (422, "invalid_input"), "{out}");
    let (status, out) = s.invoke("hostile_fail", json!({"invalid": false}));
    assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");

    // A call cannot raise its limits above the manifest's.
    let (status, out) = invoke_limited(
        &s,
        "hostile_slow",
        json!({"ms": 2500}),
        json!({"timeout_ms": 60_000}),
    );
    assert_eq!(
        (status, kind(&out)),
        (504, "timeout"),
        "manifest timeout 2000 ms holds: {out}"
    );

    let (ok, failed) = bg.finish();
    assert_eq!(failed, 0, "well-behaved calls were disturbed ({ok} ok)");
    assert!(ok > 0);
    assert!(s.is_alive());
    let (status, tool) = s.get("/tools/hostile_spin");
    assert_eq!(status, 200);
    assert_eq!(tool["stats"]["call_count"], 2);
    assert_eq!(tool["stats"]["error_rate"], 1.0);
    eprintln!("server RSS after the breaches: {:?} KiB", s.rss_kib());
}

#[test]
fn concurrent_breaches_do_not_disturb_good_calls() {
    let mut s = Server::start(
        PluginsDir::new()
            .add("calc", "calc")
            .add("hostile", "hostile"),
    );
    let bg = background_calls(&s);
    let bad: Vec<_> = (0..8)
        .map(|i| {
            let url = s.url(if i % 2 == 0 {
                "/tools/hostile_hog/invoke"
            } else {
                "/tools/hostile_spin/invoke"
            });
            std::thread::spawn(move || {
                let r = reqwest::blocking::Client::new()
                    .post(url)
                    .json(&json!({"params": {}, "limits": {"timeout_ms": 1500, "memory_mb": 32}}))
                    .send()
                    .unwrap();
                let status = r.status().as_u16();
                let body: Value = r.json().unwrap();
                (status, kind(&body).to_owned())
            })
        })
        .collect();
    for (i, t) in bad.into_iter().enumerate() {
        let (status, k) = t.join().unwrap();
        // Over max_concurrency (8) nothing is refused here; each ends in its kind.
        let expected = if i % 2 == 0 {
            "out_of_memory"
        } else {
            "timeout"
        };
        assert_eq!(k, expected, "call {i} got {status}");
    }
    let (ok, failed) = bg.finish();
    assert_eq!(failed, 0, "well-behaved calls were disturbed ({ok} ok)");
    assert!(s.is_alive());
}
