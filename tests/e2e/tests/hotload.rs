//! Hot loading: the catalogue follows the plugins directory of a running
//! server (add, replace, delete, rename, partial writes, bad files), calls are
//! never failed by a swap, and the compiled cache makes restarts fast.

use std::collections::HashSet;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::{
    PluginsDir, Server, component, kind, sha256_hex, tagged, wait_for, write_then_rename,
};

const WAIT: Duration = Duration::from_secs(20);

fn calc_bytes() -> Vec<u8> {
    std::fs::read(component("calc").0).unwrap()
}

fn evaluates(s: &Server, tool: &str) -> bool {
    let (status, out) = s.invoke(tool, json!({"expression": "6*7"}));
    status == 200 && out["result"]["value"] == 42.0
}

#[test]
fn the_catalogue_follows_the_directory() {
    let s = Server::start(PluginsDir::new());
    assert!(s.tool_ids().is_empty());
    let dir = s.plugins_dir().to_owned();
    let calc = calc_bytes();

    // A plain, non-atomic copy in several chunks with pauses: whatever is read
    // half-way fails as "not yet valid"; the finished file loads.
    {
        let mut f = std::fs::File::create(dir.join("calc.wasm")).unwrap();
        for chunk in calc.chunks(calc.len() / 4 + 1) {
            f.write_all(chunk).unwrap();
            f.flush().unwrap();
            std::thread::sleep(Duration::from_millis(120));
        }
    }
    let v1 = sha256_hex(&calc);
    assert!(s.wait_version("calc", &v1), "{}", s.log());
    assert!(evaluates(&s, "calc_evaluate"));
    assert_eq!(s.tool_ids(), ["calc_evaluate"]);

    // Replace (write-then-rename): a new version answers.
    let v2_bytes = tagged(&calc, "v2");
    write_then_rename(&dir.join("calc.wasm"), &v2_bytes);
    let v2 = sha256_hex(&v2_bytes);
    assert!(s.wait_version("calc", &v2), "{}", s.log());
    let r = s
        .client()
        .post(s.url("/tools/calc_evaluate/invoke"))
        .json(&json!({"params": {"expression": "1+1"}}))
        .send()
        .unwrap();
    assert_eq!(r.headers()["x-toolhost-plugin-version"], v2.as_str());

    // A manifest change alone reloads too.
    std::fs::write(dir.join("calc.toml"), "[limits]\nfuel = 12345678\n").unwrap();
    let limited = wait_for(WAIT, || {
        let (_, t) = s.get("/tools/calc_evaluate");
        (t["limits"]["fuel"] == 12345678).then_some(())
    });
    assert!(limited.is_some(), "{}", s.log());

    // Rename: the old name goes, the new one comes.
    std::fs::rename(dir.join("calc.wasm"), dir.join("maths.wasm")).unwrap();
    let renamed = wait_for(WAIT, || (s.tool_ids() == ["maths_evaluate"]).then_some(()));
    assert!(renamed.is_some(), "{:?}\n{}", s.tool_ids(), s.log());
    assert!(evaluates(&s, "maths_evaluate"));
    assert_eq!(kind(&s.invoke("calc_evaluate", json!({})).1), "not_found");

    // Delete: its tools leave the catalog, then its status the list (two
    // steps of the unload: a loaded machine can show the first alone).
    std::fs::remove_file(dir.join("maths.wasm")).unwrap();
    let gone = wait_for(WAIT, || {
        (s.tool_ids().is_empty() && s.plugin("maths").is_none()).then_some(())
    });
    assert!(
        gone.is_some(),
        "{:?}\n{:?}",
        s.tool_ids(),
        s.plugin("maths")
    );
    let log = s.log();
    assert!(log.contains("plugin loaded") && log.contains("plugin unloaded"));
}

#[test]
fn a_bad_replacement_keeps_the_old_version_serving() {
    let s = Server::start(PluginsDir::new().add("calc", "calc"));
    let dir = s.plugins_dir().to_owned();
    let calc = calc_bytes();
    let good = sha256_hex(&calc);
    assert!(s.wait_version("calc", &good));
    let wrong_version = std::fs::read(component("wrong-version").0).unwrap();

    let cases: Vec<(&str, Vec<u8>, Option<&str>, &str)> = vec![
        (
            "truncated",
            calc[..calc.len() / 2].to_vec(),
            None,
            "does not compile",
        ),
        (
            "random bytes",
            b"\0asm\x0d\0\x01\0garbage-garbage".to_vec(),
            None,
            "does not compile",
        ),
        (
            "not wasm",
            b"#!/bin/sh\necho hi\n".to_vec(),
            None,
            "not a WebAssembly file",
        ),
        (
            "core module",
            b"\0asm\x01\0\0\0".to_vec(),
            None,
            "a core WebAssembly module",
        ),
        (
            "wrong WIT version",
            wrong_version,
            None,
            "toolhost:plugin@0.9.0",
        ),
        (
            "unknown manifest key",
            tagged(&calc, "m1"),
            Some("[limits]\nfuell = 1\n"),
            "unknown field `fuell`",
        ),
        (
            "impossible limits",
            tagged(&calc, "m2"),
            Some("[limits]\nmemory_mb = 100000\n"),
            "out of range",
        ),
    ];
    let mut last_error = String::new();
    for (what, bytes, manifest, expected) in cases {
        if let Some(text) = manifest {
            write_then_rename(&dir.join("calc.toml"), text.as_bytes());
        }
        write_then_rename(&dir.join("calc.wasm"), &bytes);
        let failed = wait_for(WAIT, || {
            s.plugin("calc").filter(|p| {
                p["state"] == "failed"
                    && p["error"]
                        .as_str()
                        .is_some_and(|e| e.contains(expected) && *e != last_error)
            })
        });
        let Some(status) = failed else {
            panic!(
                "{what}: no failed state with {expected:?}: {:?}\n{}",
                s.plugin("calc"),
                s.log()
            );
        };
        last_error = status["error"].as_str().unwrap().to_owned();
        assert_eq!(
            status["version"],
            good.as_str(),
            "{what}: the old version is still the one serving"
        );
        assert!(
            evaluates(&s, "calc_evaluate"),
            "{what}: the old version answers"
        );
    }
    // The good files again: ready, no error.
    std::fs::remove_file(dir.join("calc.toml")).unwrap();
    write_then_rename(&dir.join("calc.wasm"), &calc);
    let ok = wait_for(WAIT, || {
        s.plugin("calc").filter(|p| {
            p["state"] == "ready" && p["error"].is_null() && p["version"] == good.as_str()
        })
    });
    assert!(ok.is_some(), "{:?}", s.plugin("calc"));
    assert!(evaluates(&s, "calc_evaluate"));
}

/// Invokes `tool` in a loop on `threads` threads until `stop`; counts
/// failures and records the versions each thread saw, in order.
struct Load {
    stop: Arc<AtomicBool>,
    failures: Arc<Mutex<Vec<String>>>,
    calls: Arc<AtomicU64>,
    handles: Vec<std::thread::JoinHandle<Vec<String>>>,
}

impl Load {
    fn start(s: &Server, tool: &str, params: Value, threads: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let calls = Arc::new(AtomicU64::new(0));
        let handles = (0..threads)
            .map(|_| {
                let (stop, failures, calls) = (stop.clone(), failures.clone(), calls.clone());
                let url = s.url(&format!("/tools/{tool}/invoke"));
                let body = json!({ "params": params });
                std::thread::spawn(move || {
                    let client = reqwest::blocking::Client::new();
                    let mut seen: Vec<String> = Vec::new();
                    // Bounded: at most 20,000 calls a thread, whatever happens.
                    for _ in 0..20_000 {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        calls.fetch_add(1, Ordering::Relaxed);
                        match client.post(&url).json(&body).send() {
                            Ok(r) if r.status() == 200 => {
                                let v = r.headers()["x-toolhost-plugin-version"]
                                    .to_str()
                                    .unwrap()
                                    .to_owned();
                                let out: Value = r.json().unwrap();
                                if out["status"] != "success" {
                                    failures.lock().unwrap().push(out.to_string());
                                }
                                if seen.last() != Some(&v) {
                                    seen.push(v);
                                }
                            }
                            Ok(r) => {
                                let status = r.status();
                                failures
                                    .lock()
                                    .unwrap()
                                    .push(format!("{status}: {}", r.text().unwrap_or_default()));
                            }
                            Err(e) => failures.lock().unwrap().push(e.to_string()),
                        }
                    }
                    seen
                })
            })
            .collect();
        Load {
            stop,
            failures,
            calls,
            handles,
        }
    }

    /// Stop; (calls, failures, versions seen by each thread in order).
    fn finish(self) -> (u64, Vec<String>, Vec<Vec<String>>) {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self
            .handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let failures = self.failures.lock().unwrap().clone();
        (self.calls.load(Ordering::Relaxed), failures, seen)
    }
}

#[test]
fn twenty_swaps_under_load_fail_no_call() {
    let s = Server::start(
        PluginsDir::new()
            .add("calc", "calc")
            .add("hostile", "slowpoke"),
    );
    let dir = s.plugins_dir().to_owned();
    let calc = calc_bytes();
    assert!(s.wait_version("calc", &sha256_hex(&calc)));
    let load = Load::start(&s, "calc_evaluate", json!({"expression": "2^10"}), 4);

    // 20 replacements, each waited for (the new version answers) before the next.
    let mut order = vec![sha256_hex(&calc)];
    for i in 1..=20 {
        let bytes = tagged(&calc, &format!("swap-{i}"));
        write_then_rename(&dir.join("calc.wasm"), &bytes);
        let v = sha256_hex(&bytes);
        assert!(s.wait_version("calc", &v), "swap {i}\n{}", s.log());
        order.push(v);
    }

    // Meanwhile another plugin is deleted and re-added, with a call in flight:
    // the call finishes on the version it started with.
    let slow = {
        let url = s.url("/tools/slowpoke_slow/invoke");
        std::thread::spawn(move || {
            let r = reqwest::blocking::Client::new()
                .post(url)
                .json(&json!({"params": {"ms": 700}}))
                .send()
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().unwrap())
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let hostile = std::fs::read(dir.join("slowpoke.wasm")).unwrap();
    std::fs::remove_file(dir.join("slowpoke.wasm")).unwrap();
    assert!(wait_for(WAIT, || s.plugin("slowpoke").is_none().then_some(())).is_some());
    let (status, body) = slow.join().unwrap();
    assert_eq!(
        status, 200,
        "the call in flight survives the delete: {body}"
    );
    write_then_rename(&dir.join("slowpoke.wasm"), &hostile);
    assert!(s.wait_version("slowpoke", &sha256_hex(&hostile)));
    let (status, _) = s.invoke("slowpoke_echo", json!({"value": 1}));
    assert_eq!(status, 200);

    std::thread::sleep(Duration::from_millis(200));
    let (calls, failures, seen) = load.finish();
    assert!(
        failures.is_empty(),
        "{} of {calls} calls failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(calls > 100, "the load ran ({calls} calls)");
    // Each thread saw only versions that were written, never going back.
    let known: HashSet<&String> = order.iter().collect();
    for versions in &seen {
        let mut last = 0;
        for v in versions {
            assert!(known.contains(v), "an unknown version answered: {v}");
            let at = order.iter().position(|o| o == v).unwrap();
            assert!(
                at >= last,
                "a thread saw an older version after a newer one"
            );
            last = at;
        }
    }
    assert!(
        seen.iter().any(|v| v.len() > 1),
        "the load saw swaps happen"
    );
}

#[test]
fn restarts_use_the_compile_cache_and_survive_a_damaged_entry() {
    let mut s = Server::start(PluginsDir::cold().add("calc", "calc").add("files", "files"));
    for name in ["calc", "files"] {
        assert_eq!(s.plugin_built(name).unwrap()["source"], "compiled");
    }
    let cache = s.data.path().join("data/compile-cache");
    // Stored behind the load (a swap does not wait for the disk).
    let stored = std::time::Instant::now();
    let written = |v: Vec<std::path::PathBuf>| {
        v.len() == 2
            && v.iter()
                .all(|p| p.extension().is_some_and(|e| e == "cwasm"))
    };
    while !written(s.compile_cache_files()) && stored.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        written(s.compile_cache_files()),
        "{:?}",
        s.compile_cache_files()
    );

    // A stale entry (another engine) and an orphan are pruned at start-up.
    std::fs::write(cache.join("0123-feedfacefeedface.cwasm"), b"old engine").unwrap();
    let orphan = s.compile_cache_files()[0]
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .replacen(|c: char| c.is_ascii_hexdigit(), "f", 8);
    std::fs::write(cache.join(&orphan), b"no plugin has this").unwrap();
    s.restart().unwrap();
    for name in ["calc", "files"] {
        assert_eq!(s.plugin(name).unwrap()["source"], "cache", "{}", s.log());
    }
    assert!(evaluates(&s, "calc_evaluate"));
    assert_eq!(
        s.compile_cache_files().len(),
        2,
        "stale entries pruned: {:?}",
        s.compile_cache_files()
    );

    // Damage every entry: the server compiles again and serves.
    for e in s.compile_cache_files() {
        let mut bytes = std::fs::read(&e).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x55;
        std::fs::write(&e, bytes).unwrap();
    }
    s.restart().unwrap();
    for name in ["calc", "files"] {
        assert_eq!(s.plugin_built(name).unwrap()["source"], "compiled");
    }
    assert!(evaluates(&s, "calc_evaluate"));
    assert!(s.log().contains("cache entry refused"));
}

#[test]
fn a_component_renamed_into_place_waits_the_settle_time_not_the_debounce() {
    // Raw writes wait 8 s of quiet here; a file renamed into place is whole
    // and waits only for a companion file (5 ms).
    let config = "[plugins]\ndebounce_ms = 8000\nsettle_ms = 5\n";
    let s = Server::start_with(PluginsDir::new().add("calc", "calc"), Some(config)).unwrap();
    let next = tagged(&calc_bytes(), "settled");
    let renamed = std::time::Instant::now();
    write_then_rename(&s.plugins_dir().join("calc.wasm"), &next);
    assert!(s.wait_version("calc", &sha256_hex(&next)), "{}", s.log());
    let took = renamed.elapsed();
    assert!(
        took < Duration::from_secs(6),
        "loaded after {took:?}: the debounce, not the settle time"
    );
    assert!(evaluates(&s, "calc_evaluate"));
}
