//! The web console at `/ui`: its files as the server sends them (types,
//! validators, the security policy, public without a token while the API
//! is not), `GET /sessions`, and the console itself in a real browser:
//! Debian's headless Chromium driven by Selenium through Debian's
//! chromium-driver (`tests/console/console_test.py`), against this binary.
//!
//! `make test` installs the browser and the driver when missing
//! (`tests/console/ensure-chromium.sh`, the `browser` phase, before the cargo
//! tests). Without them the browser test is skipped outside CI and fails in
//! CI. The notebook step needs the Docker engine and the node image, as the
//! Docker tests do.

use std::process::Command;
use std::time::Duration;

use reqwest::blocking::Client;
use serde_json::Value;
use toolhost_e2e::{
    PluginsDir, Server, component, docker_available, free_port, python_venv, repo_root, run_python,
    wait_for,
};

const CALLER: &str = "console-caller-token-0123";
const ADMIN: &str = "console-admin-token-456789";

fn server(plugins: PluginsDir) -> Server {
    Server::start_env(
        plugins,
        None,
        &[("TOOLHOST_TOKEN", CALLER), ("TOOLHOST_ADMIN_TOKEN", ADMIN)],
    )
    .expect("server starts")
}

fn get(http: &Client, url: &str, token: Option<&str>, etag: Option<&str>) -> (u16, String, String) {
    let mut r = http.get(url);
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    if let Some(e) = etag {
        r = r.header("if-none-match", e);
    }
    let r = r.send().expect("GET");
    let status = r.status().as_u16();
    let header = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let meta = format!(
        "type={}\netag={}\ncache={}\ncsp={}\nnosniff={}",
        header("content-type"),
        header("etag"),
        header("cache-control"),
        header("content-security-policy"),
        header("x-content-type-options")
    );
    (status, meta, r.text().unwrap_or_default())
}

fn field<'a>(meta: &'a str, name: &str) -> &'a str {
    meta.lines()
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_default()
}

#[test]
fn the_console_files_are_public_typed_cached_and_locked_down() {
    let s = server(PluginsDir::new().add("calc", "calc"));
    let http = Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    // The API needs the token; the console's files do not (they hold no data).
    assert_eq!(get(&http, &s.url("/tools"), None, None).0, 401);
    let r = http.get(s.url("/ui")).send().unwrap();
    assert_eq!(r.status().as_u16(), 308);
    assert_eq!(r.headers()["location"], "/ui/");

    let mut total = 0;
    for (path, kind) in [
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/dom.js", "text/javascript"),
        ("/ui/schema.js", "text/javascript"),
        ("/ui/charts.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
        ("/ui/icon.svg", "image/svg+xml"),
    ] {
        let (status, meta, body) = get(&http, &s.url(path), None, None);
        assert_eq!(status, 200, "{path}: {meta}");
        assert!(field(&meta, "type").starts_with(kind), "{path}: {meta}");
        assert_eq!(field(&meta, "cache"), "no-cache", "{path}");
        assert_eq!(field(&meta, "nosniff"), "nosniff", "{path}");
        let csp = field(&meta, "csp");
        assert!(
            csp.contains("script-src 'self'")
                && csp.contains("default-src 'none'")
                && !csp.contains("unsafe"),
            "{path}: {csp}"
        );
        // A warm browser revalidates and gets no body.
        let etag = field(&meta, "etag").to_owned();
        assert!(etag.starts_with('"'), "{path}: {meta}");
        let (status, _, again) = get(&http, &s.url(path), None, Some(&etag));
        assert_eq!(status, 304, "{path}");
        assert!(again.is_empty());
        total += body.len();
    }
    println!("figure console_assets_bytes {total}");
    assert!(total < 300 * 1024, "the console weighs {total} bytes");

    // Nothing else under /ui is public, or served.
    assert_eq!(get(&http, &s.url("/ui/secret.js"), None, None).0, 401);
    let (status, _, body) = get(&http, &s.url("/ui/secret.js"), Some(CALLER), None);
    assert_eq!(status, 404, "{body}");

    // GET /sessions: a caller's own (none yet), every caller's for the admin.
    let (status, _, body) = get(&http, &s.url("/sessions"), Some(CALLER), None);
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["sessions"], serde_json::json!([]), "{body}");
    assert_eq!(get(&http, &s.url("/sessions"), None, None).0, 401);
    let r = http
        .post(s.url("/tools/calc_evaluate/invoke"))
        .bearer_auth(CALLER)
        .header("x-toolhost-session", "console-test-1")
        .json(&serde_json::json!({"params": {"expression": "1+1"}}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (status, _, body) = get(&http, &s.url("/sessions"), Some(ADMIN), None);
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    let ids: Vec<&str> = body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, ["console-test-1"], "{body}");
    assert_eq!(body["sessions"][0]["caller"], "token-1", "{body}");
    assert!(body["sessions"][0]["idle_s"].as_f64().unwrap() < 60.0);
    assert!(body["idle_timeout_s"].as_f64().unwrap() > 0.0);
}

/// Whether Debian's chromium and chromium-driver are installed; outside CI
/// their absence skips the browser test, in CI it fails it.
fn browser_installed() -> bool {
    let found = ["chromium", "chromedriver"].iter().all(|b| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "no chromium / chromedriver: CI must run the console's browser test \
             (make test installs them: tests/console/ensure-chromium.sh)"
        );
        eprintln!("SKIPPED: no chromium / chromedriver (run tests/console/ensure-chromium.sh)");
    }
    found
}

#[test]
fn the_console_in_a_real_browser() {
    if !browser_installed() {
        return;
    }
    // The notebook figure needs the engine and the node image; CI has both.
    let docker = docker_available();
    if !docker {
        assert!(
            std::env::var_os("CI").is_none(),
            "no Docker engine: CI must run the console's notebook step"
        );
        eprintln!("the notebook step is SKIPPED: no Docker engine");
    }
    // A mounted MCP server that rewrites a tool: the held-tools review.
    let rug = toolhost_e2e::services::Service::python_mcp(
        &repo_root().join("tests/fixtures/mcp/rugpull.py"),
    );
    let mut plugins = PluginsDir::new()
        .add("calc", "calc")
        .add("files", "files")
        .add("image", "image")
        .folder("rug", &[("rug.toml", &rug.mcp_manifest())]);
    if docker {
        plugins = plugins.add_toolkit("notebook");
    }
    let s = server(plugins);
    let http = Client::new();
    let ready = wait_for(Duration::from_secs(180), || {
        let r = http
            .get(s.url("/health/ready"))
            .bearer_auth(ADMIN)
            .send()
            .ok()?;
        r.status().is_success().then_some(())
    });
    assert!(ready.is_some(), "plugins never ready:\n{}", s.log());

    let python = python_venv("tests/console/requirements.txt");
    let shots = repo_root().join("target/console-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    let (extra, _) = component("calc");
    let url = s.url("");
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "--url".as_ref(),
        url.trim_end_matches('/').as_ref(),
        "--caller-token".as_ref(),
        CALLER.as_ref(),
        "--admin-token".as_ref(),
        ADMIN.as_ref(),
        "--plugins-dir".as_ref(),
        s.plugins_dir().as_os_str(),
        "--extra-plugin".as_ref(),
        extra.as_os_str(),
        "--screenshots".as_ref(),
        shots.as_os_str(),
    ];
    if docker {
        args.push("--notebook".as_ref());
    }
    args.push("--pins".as_ref());
    let (ok, report) = run_python(&python, "tests/console/console_test.py", &args);
    assert!(
        ok,
        "the console failed in the browser (screenshots in {}):\n{report}\nserver log:\n{}",
        shots.display(),
        s.log()
    );
    let mut scenarios = vec![
        "refused",
        "sign_in",
        "search",
        "invoke",
        "sessions",
        "form",
        "hot_load",
        "pins",
        "metrics",
        "keyboard",
        "narrow",
        "performance",
        "browser_log",
    ];
    if docker {
        scenarios.push("notebook");
    }
    for name in scenarios {
        assert!(
            report.lines().any(|l| l == format!("ok {name}")),
            "scenario {name} did not pass:\n{report}"
        );
    }
    for shot in [
        "01-wrong-token",
        "03-playground-calc",
        "07-plugins-hot-load",
        "10-narrow-playground",
    ] {
        let png = std::fs::read(shots.join(format!("{shot}.png"))).expect("screenshot saved");
        assert!(png.starts_with(b"\x89PNG") && png.len() > 5_000, "{shot}");
    }
}

/// Issue #37, item 1: web pages on other origins, in a real browser, cannot
/// make a loopback server run a tool (no-cors `fetch` with text or untyped
/// bodies, a beacon, a text/plain form, a preflighted CORS call, DNS
/// rebinding); a page of an origin listed in `[server] allowed_origins` is
/// served with CORS (`tests/console/cross_origin.py`).
#[test]
fn web_pages_on_other_origins_cannot_drive_the_server() {
    if !browser_installed() {
        return;
    }
    let page_port = free_port().unwrap();
    let open = Server::start(PluginsDir::new().add("calc", "calc"));
    let config = format!("[server]\nallowed_origins = [\"http://127.0.0.1:{page_port}\"]\n");
    let listed = Server::start_with(PluginsDir::new().add("calc", "calc"), Some(&config)).unwrap();
    for s in [&open, &listed] {
        let ready = wait_for(Duration::from_secs(60), || {
            (s.get("/health/ready").0 == 200).then_some(())
        });
        assert!(ready.is_some(), "{}", s.log());
    }
    let python = python_venv("tests/console/requirements.txt");
    let (url, listed_url) = (open.url(""), listed.url(""));
    let port = page_port.to_string();
    let args: Vec<&std::ffi::OsStr> = vec![
        "--url".as_ref(),
        url.trim_end_matches('/').as_ref(),
        "--listed-url".as_ref(),
        listed_url.trim_end_matches('/').as_ref(),
        "--page-port".as_ref(),
        port.as_ref(),
    ];
    let (ok, report) = run_python(&python, "tests/console/cross_origin.py", &args);
    assert!(ok, "{report}\nserver log:\n{}", open.log());
    for name in [
        "cross_origin_refused",
        "rebinding_refused",
        "listed_origin_served",
    ] {
        assert!(
            report.lines().any(|l| l == format!("ok {name}")),
            "scenario {name} did not pass:\n{report}"
        );
    }
    // The server said why, once per refusal.
    assert!(
        open.log().contains("refused by the browser guard"),
        "{}",
        open.log()
    );
}
