//! The hostile fixture's breaches of each sandbox limit, as any server
//! serving it must end them (`sandbox.rs`; `quick.rs` on Winch's build).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::{Server, kind};

/// Each limit ends its call with its own kind: the wall clock (a spin
/// stopped near its 300 ms deadline; time in a host call, which a call
/// cannot raise above the manifest's 2 s), fuel, memory (the manifest's
/// 256 MiB ceiling and a call's lower one), the stack, and a panic (a
/// trap carrying its message).
pub fn each_limit_ends_its_call(s: &Server) {
    let started = Instant::now();
    let (status, out) = s.invoke_limited("hostile_spin", json!({}), json!({"timeout_ms": 300}));
    assert_eq!((status, kind(&out)), (504, "timeout"), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "stopped near its deadline: {:?}",
        started.elapsed()
    );

    // Fuel: the same loop with little fuel and plenty of time.
    let (status, out) = s.invoke_limited("hostile_spin", json!({}), json!({"fuel": 20_000_000}));
    assert_eq!((status, kind(&out)), (500, "out_of_fuel"), "{out}");

    let message = |out: &serde_json::Value| out["error"]["message"].as_str().unwrap().to_owned();
    let (status, out) = s.invoke("hostile_hog", json!({}));
    assert_eq!((status, kind(&out)), (500, "out_of_memory"), "{out}");
    assert!(message(&out).contains("256 MiB"), "{out}");
    let (status, out) = s.invoke_limited("hostile_hog", json!({}), json!({"memory_mb": 32}));
    assert_eq!((status, kind(&out)), (500, "out_of_memory"), "{out}");
    assert!(message(&out).contains("32 MiB"), "{out}");

    let (status, out) = s.invoke("hostile_recurse", json!({"depth": 100_000_000u64}));
    assert_eq!((status, kind(&out)), (500, "trap"), "{out}");

    let (status, out) = s.invoke("hostile_panic", json!({"message": "boom-1234"}));
    assert_eq!((status, kind(&out)), (500, "trap"), "{out}");
    assert!(message(&out).contains("boom-1234"), "{out}");

    let (status, out) = s.invoke_limited(
        "hostile_slow",
        json!({"ms": 2500}),
        json!({"timeout_ms": 60_000}),
    );
    assert_eq!(
        (status, kind(&out)),
        (504, "timeout"),
        "manifest timeout 2000 ms holds: {out}"
    );
}
