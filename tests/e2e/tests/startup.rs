//! Start-up: the server answers at once and compiles behind it. A plugin on
//! disk that is still compiling is listed as `compiling` with its progress,
//! holds `/health/ready` back, and a call to its tools is a 503 to retry
//! (or waits for it), never a 404; small plugins serve before big ones.
//! A build's precompiled components make a fresh data directory warm.

use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_e2e::*;

#[test]
fn a_compiling_plugin_is_listed_and_waited_for_never_a_404() {
    // textstats: CPython in an 18 MB component, tens of seconds to compile
    // cold on this machine; calc: a quarter of a megabyte.
    let s = Server::spawn_env(
        PluginsDir::new()
            .add("calc", "calc")
            .add("textstats", "textstats"),
        None,
        &[],
    )
    .unwrap();
    // `spawn_env` returned on the first /health: the server answers while
    // textstats compiles.
    let p = s.plugin("textstats").expect("listed at once");
    assert_eq!(p["state"], "compiling", "{p}");
    assert!(p["progress"]["bytes"].as_u64().unwrap() > 1 << 20, "{p}");
    assert!(p["progress"]["phase"].is_string(), "{p}");

    let (status, body) = s.get("/health/ready");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["ready"], false);
    assert!(body.to_string().contains("textstats"), "{body}");

    // A call that cannot wait long: 503 with Retry-After, naming why.
    let r = s
        .client()
        .post(s.url("/tools/textstats_summary/invoke"))
        .json(&json!({"params": {"text": "a b c"}, "limits": {"timeout_ms": 200}}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert!(r.headers().contains_key("retry-after"));
    let body: serde_json::Value = r.json().unwrap();
    assert_eq!(kind(&body), "backend_unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("still compiling"),
        "{body}"
    );
    // A tool of no plugin on disk is still a 404 at once.
    let started = Instant::now();
    let (status, _) = s.invoke("nosuch_tool", json!({}));
    assert_eq!(status, 404);
    assert!(started.elapsed() < Duration::from_secs(5));

    // The small plugin serves while the big one compiles.
    let calc_ready = wait_for(Duration::from_secs(60), || {
        s.tool_ids()
            .contains(&"calc_evaluate".to_owned())
            .then_some(())
    });
    assert!(calc_ready.is_some(), "{}", s.log());
    if s.plugin("textstats").unwrap()["state"] == "compiling" {
        assert!(!s.tool_ids().iter().any(|t| t.starts_with("textstats_")));
        let (status, _) = s.invoke("calc_evaluate", json!({"expression": "1+1"}));
        assert_eq!(status, 200);
    }

    // Once loaded, the tool serves; readiness says so.
    s.wait_loaded().unwrap();
    let (status, body) = s.invoke("textstats_summary", json!({"text": "a b c"}));
    assert_eq!(status, 200, "{body}");
    let (status, body) = s.get("/health/ready");
    assert_eq!(
        (status, body["ready"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    assert!(
        s.log().contains("all plugins loaded"),
        "the log says when loading ended:\n{}",
        s.log()
    );
}

#[test]
fn a_call_to_a_compiling_plugin_waits_for_it() {
    let s = Server::spawn_env(PluginsDir::new().add("fetch", "fetch"), None, &[]).unwrap();
    // No lowered time limit: the call waits (up to the default 10 s) for
    // the plugin rather than failing.
    let (status, body) = s.invoke("fetch_page", json!({"url": "http://127.0.0.1:9/"}));
    assert_ne!(status, 404, "{body}");
    assert_ne!(kind(&body), "backend_unavailable", "{body}");
}

#[test]
fn precompiled_components_make_a_fresh_data_directory_warm() {
    // `toolhost precompile` into the plugins directory, then a server with a
    // fresh data directory loads every component from it.
    let plugins = PluginsDir::new().add("calc", "calc").add("files", "files");
    let out = std::process::Command::new(binary())
        .args(["precompile", "--plugins"])
        .arg(plugins.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cache = plugins.path().join(".compile-cache");
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 2);
    let s = Server::start(plugins);
    for name in ["calc", "files"] {
        assert_eq!(s.plugin(name).unwrap()["source"], "cache", "{}", s.log());
    }
    // The server's own cache stays empty: the precompiled entries are read
    // where they are.
    let own = s.data.path().join("data/compile-cache");
    assert_eq!(std::fs::read_dir(own).map_or(0, |d| d.count()), 0);

    // An entry of another engine (a stale build) is ignored: compiled again.
    let plugins = PluginsDir::new().add("calc", "calc");
    let dir = plugins.path().join(".compile-cache");
    std::fs::create_dir_all(&dir).unwrap();
    let (wasm, _) = component("calc");
    let hash = sha256_hex(&std::fs::read(wasm).unwrap());
    std::fs::write(dir.join(format!("{hash}-0123456789abcdef.cwasm")), b"stale").unwrap();
    let s = Server::start(plugins);
    assert_eq!(s.plugin("calc").unwrap()["source"], "compiled");
    let (status, _) = s.invoke("calc_evaluate", json!({"expression": "2+2"}));
    assert_eq!(status, 200);
}
