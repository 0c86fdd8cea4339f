//! Winch's quick build (`[engine] quick_compile`, on by default): a
//! component the compile cache does not have answers on Winch's build while
//! Cranelift compiles it, then on Cranelift's; the sandbox's limits hold on
//! both. `TOOLHOST_QUICK_ONLY=1` keeps the quick build serving, so that its
//! limits can be tried.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_e2e::{PluginsDir, Server};

fn kind(out: &Value) -> &str {
    out["error"]["kind"].as_str().unwrap_or("")
}

#[test]
fn a_quick_build_keeps_every_limit_of_the_sandbox() {
    let mut s = Server::start_env(
        PluginsDir::cold()
            .add("calc", "calc")
            .add("hostile", "hostile"),
        None,
        &[("TOOLHOST_QUICK_ONLY", "1")],
    )
    .unwrap();
    for name in ["calc", "hostile"] {
        let plugin = s.plugin(name).unwrap();
        assert_eq!(plugin["source"], "winch", "{plugin}\n{}", s.log());
    }
    let (status, out) = s.invoke("calc_evaluate", json!({"expression": "6*7"}));
    assert_eq!(
        (status, &out["result"]["value"]),
        (200, &json!(42.0)),
        "{out}"
    );

    // Wall clock: no epochs in Winch's code; the loop yields, and stops there.
    let started = Instant::now();
    let (status, out) = s.invoke_limited("hostile_spin", json!({}), json!({"timeout_ms": 300}));
    assert_eq!((status, kind(&out)), (504, "timeout"), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // Fuel, memory (the manifest's ceiling and a call's lower one), stack,
    // a panic's message.
    let (status, out) = s.invoke_limited("hostile_spin", json!({}), json!({"fuel": 20_000_000}));
    assert_eq!((status, kind(&out)), (500, "out_of_fuel"), "{out}");
    let (status, out) = s.invoke("hostile_hog", json!({}));
    assert_eq!((status, kind(&out)), (500, "out_of_memory"), "{out}");
    assert!(out.to_string().contains("256 MiB"), "{out}");
    let (status, out) = s.invoke_limited("hostile_hog", json!({}), json!({"memory_mb": 32}));
    assert_eq!((status, kind(&out)), (500, "out_of_memory"), "{out}");
    assert!(out.to_string().contains("32 MiB"), "{out}");
    let (status, out) = s.invoke("hostile_recurse", json!({"depth": 100_000_000u64}));
    assert_eq!((status, kind(&out)), (500, "trap"), "{out}");
    let (status, out) = s.invoke("hostile_panic", json!({"message": "boom-1234"}));
    assert_eq!((status, kind(&out)), (500, "trap"), "{out}");
    assert!(out.to_string().contains("boom-1234"), "{out}");
    // Time spent in a host call is bounded as well.
    let (status, out) = s.invoke_limited(
        "hostile_slow",
        json!({"ms": 2500}),
        json!({"timeout_ms": 60_000}),
    );
    assert_eq!((status, kind(&out)), (504, "timeout"), "{out}");
    let (status, out) = s.invoke("calc_evaluate", json!({"expression": "1+1"}));
    assert_eq!(status, 200, "{out}");
    assert!(s.is_alive());
}

/// Served at once on Winch's build, then on Cranelift's, which goes into
/// the compile cache: calls all along are answered, and a restart reads it.
#[test]
fn a_new_component_moves_to_cranelifts_build_behind_its_calls() {
    let mut s = Server::start(PluginsDir::cold().add("calc", "calc"));
    let mut answered = 0;
    let started = Instant::now();
    loop {
        let (status, out) = s.invoke("calc_evaluate", json!({"expression": "6*7"}));
        assert_eq!(
            (status, &out["result"]["value"]),
            (200, &json!(42.0)),
            "{out}"
        );
        answered += 1;
        let source = s.plugin("calc").unwrap()["source"].clone();
        if source == "compiled" {
            break;
        }
        assert_eq!(source, "winch");
        assert!(started.elapsed() < Duration::from_secs(60), "{}", s.log());
    }
    assert!(answered > 0);
    assert!(
        s.log().contains("calls moved to Cranelift's build"),
        "served by Winch first:\n{}",
        s.log()
    );
    let cache = s.data.path().join("data/compile-cache");
    let stored = Instant::now();
    let written = || {
        std::fs::read_dir(&cache).is_ok_and(|d| {
            d.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        })
    };
    while !written() && stored.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    s.restart().unwrap();
    assert_eq!(s.plugin("calc").unwrap()["source"], "cache", "{}", s.log());
    let (status, _) = s.invoke("calc_evaluate", json!({"expression": "2+2"}));
    assert_eq!(status, 200);
}
