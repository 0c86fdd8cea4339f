//! Winch's quick build (`[engine] quick_compile`, on by default): a
//! component the compile cache does not have answers on Winch's build while
//! Cranelift compiles it, then on Cranelift's; the sandbox's limits hold on
//! both. `TOOLHOST_QUICK_ONLY=1` keeps the quick build serving, so that its
//! limits can be tried.

use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_e2e::{PluginsDir, Server, wait_for};

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

    // Wall clock (no epochs in Winch's code: the loop yields, and stops
    // there), fuel, memory, stack, a panic, time in a host call.
    toolhost_e2e::hostile::each_limit_ends_its_call(&s);
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
    wait_for(Duration::from_secs(10), || {
        let files = s.compile_cache_files();
        files
            .iter()
            .any(|p| p.extension().is_some_and(|x| x == "cwasm"))
            .then_some(())
    });
    s.restart().unwrap();
    assert_eq!(s.plugin("calc").unwrap()["source"], "cache", "{}", s.log());
    let (status, _) = s.invoke("calc_evaluate", json!({"expression": "2+2"}));
    assert_eq!(status, 200);
}
