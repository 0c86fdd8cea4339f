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
        PluginsDir::cold()
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
    let s = Server::spawn_env(PluginsDir::cold().add("fetch", "fetch"), None, &[]).unwrap();
    // No lowered time limit: the call waits (up to the default 10 s) for
    // the plugin rather than failing.
    let (status, body) = s.invoke("fetch_page", json!({"url": "http://127.0.0.1:9/"}));
    assert_ne!(status, 404, "{body}");
    assert_ne!(kind(&body), "backend_unavailable", "{body}");
}

/// `toolhost precompile --cache-key <key>` into `plugins`' `.compile-cache/`.
fn precompile(plugins: &PluginsDir, key: &std::path::Path) {
    let out = std::process::Command::new(binary())
        .args(["precompile", "--plugins"])
        .arg(plugins.path())
        .arg("--cache-key")
        .arg(key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A private key file of 64 hex digits, as the server makes its own.
fn key_file(dir: &std::path::Path, byte: u8) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("key-{byte}"));
    std::fs::write(&path, format!("{byte:02x}").repeat(32)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// The compile-cache entry of `component` (a built plugin) in `plugins`.
fn entry_of(plugins: &PluginsDir, component_name: &str) -> std::path::PathBuf {
    let (wasm, _) = component(component_name);
    let hash = sha256_hex(&std::fs::read(wasm).unwrap());
    std::fs::read_dir(plugins.path().join(".compile-cache"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&hash))
        .unwrap_or_else(|| panic!("no entry for {component_name}"))
}

#[test]
fn precompiled_components_make_a_fresh_data_directory_warm() {
    // `toolhost precompile` into the plugins directory with the server's
    // key, then a server with a fresh data directory loads every component
    // from it.
    let keys = tempfile::tempdir().unwrap();
    let key = key_file(keys.path(), 0x5a);
    let key_env = [("TOOLHOST_CACHE_KEY", key.to_str().unwrap())];
    let plugins = PluginsDir::cold().add("calc", "calc").add("files", "files");
    precompile(&plugins, &key);
    let cache = plugins.path().join(".compile-cache");
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 2);
    let s = Server::start_env(plugins, None, &key_env).unwrap();
    for name in ["calc", "files"] {
        assert_eq!(s.plugin(name).unwrap()["source"], "cache", "{}", s.log());
    }
    // The server's own cache stays empty: the precompiled entries are read
    // where they are.
    let own = s.data.path().join("data/compile-cache");
    assert_eq!(std::fs::read_dir(own).map_or(0, |d| d.count()), 0);

    // An entry of another engine (a stale build) is ignored: compiled again.
    let plugins = PluginsDir::cold().add("calc", "calc");
    let dir = plugins.path().join(".compile-cache");
    std::fs::create_dir_all(&dir).unwrap();
    let (wasm, _) = component("calc");
    let hash = sha256_hex(&std::fs::read(wasm).unwrap());
    std::fs::write(dir.join(format!("{hash}-0123456789abcdef.cwasm")), b"stale").unwrap();
    let s = Server::start_env(plugins, None, &key_env).unwrap();
    assert_eq!(s.plugin_built("calc").unwrap()["source"], "compiled");
    let (status, _) = s.invoke("calc_evaluate", json!({"expression": "2+2"}));
    assert_eq!(status, 200);
}

/// Issue #38's planted native code: `checksum`'s precompiled entry copied
/// over `calc`'s name (whoever can write the plugins directory can do it)
/// used to be served as calc. Now it is refused and calc is compiled from
/// its `.wasm`; so are entries made with another key (the server's own,
/// made in its data directory, by default), and the server says why.
#[test]
fn a_planted_compile_cache_entry_is_never_run() {
    let keys = tempfile::tempdir().unwrap();
    let key = key_file(keys.path(), 0x5a);
    let key_env = [("TOOLHOST_CACHE_KEY", key.to_str().unwrap())];
    let plugins = PluginsDir::cold()
        .add("calc", "calc")
        .add("checksum", "checksum");
    precompile(&plugins, &key);
    let (calc, checksum) = (entry_of(&plugins, "calc"), entry_of(&plugins, "checksum"));
    std::fs::copy(&checksum, &calc).unwrap();
    let s = Server::start_env(plugins, None, &key_env).unwrap();
    let plugin = s.plugin_built("calc").unwrap();
    assert_eq!(plugin["source"], "compiled", "{plugin}\n{}", s.log());
    assert_eq!(s.plugin("checksum").unwrap()["source"], "cache");
    let tools = s.tool_ids();
    assert!(tools.contains(&"calc_evaluate".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"calc_hash".to_owned()), "{tools:?}");
    let (status, out) = s.invoke("calc_evaluate", json!({"expression": "6*7"}));
    assert_eq!(
        (status, &out["result"]["value"]),
        (200, &json!(42.0)),
        "{out}"
    );
    assert!(s.log().contains("cache entry refused"), "{}", s.log());

    // Precompiled with another key (one a plugin author could hold): every
    // entry refused, every component compiled; and a server without a key
    // setting makes its own, private, and never reads the folder's.
    let plugins = PluginsDir::cold().add("calc", "calc");
    precompile(&plugins, &key_file(keys.path(), 0x33));
    let s = Server::start_env(plugins, None, &key_env).unwrap();
    assert_eq!(s.plugin_built("calc").unwrap()["source"], "compiled");
    let plugins = PluginsDir::cold().add("calc", "calc");
    precompile(&plugins, &key);
    let s = Server::start(plugins);
    assert_eq!(s.plugin_built("calc").unwrap()["source"], "compiled");
    let own = s.data.path().join("data/compile-cache.key");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&own).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "{own:?}");
}
