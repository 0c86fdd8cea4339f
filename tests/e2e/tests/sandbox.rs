//! Limits: each misbehaving plugin call ends with its own error kind, the
//! server stays up, and well-behaved calls running meanwhile are not disturbed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::{PluginsDir, Server, kind};

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

    // Wall clock, fuel, memory, stack, a panic: each its own kind.
    toolhost_e2e::hostile::each_limit_ends_its_call(&s);

    // Output: 100 MiB refused by the 1 MiB output limit of hostile.toml.
    let (status, out) = s.invoke("hostile_big_output", json!({"mb": 100}));
    assert_eq!((status, kind(&out)), (500, "output_too_large"), "{out}");
    let (status, out) = s.invoke("hostile_big_output", json!({"mb": 0}));
    assert_eq!(status, 200, "an empty output is fine: {out}");

    // Filesystem: nothing outside the workspace exists for the plugin.
    let (status, out) = s.invoke("hostile_read_passwd", json!({}));
    assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");
    assert!(!out.to_string().contains("root:"), "{out}");
    filesystem_escapes_fail(&s);

    // The plugin's typed errors.
    let (status, out) = s.invoke("hostile_fail", json!({"invalid": true}));
    assert_eq!((status, kind(&out)), (422, "invalid_input"), "{out}");
    let (status, out) = s.invoke("hostile_fail", json!({"invalid": false}));
    assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");

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

/// However the path is spelled (`..`, absolute, a symlink the plugin makes,
/// a symlink planted in the workspace by another tool of the session, as a
/// shell container can), a wasm plugin reads nothing outside its workspace;
/// the same reads inside it work, so the refusals are the sandbox's.
fn filesystem_escapes_fail(s: &Server) {
    let workspace = s.data.path().join("data/workspaces/test");
    std::fs::create_dir_all(workspace.join("inside")).unwrap();
    std::fs::write(workspace.join("inside/passwd"), "inside-only").unwrap();
    std::os::unix::fs::symlink("inside/passwd", workspace.join("inner-link")).unwrap();
    std::os::unix::fs::symlink("/etc", workspace.join("planted-abs")).unwrap();
    std::os::unix::fs::symlink("../../../../../../etc", workspace.join("planted-rel")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", workspace.join("planted-file")).unwrap();

    let refused = |tool: &str, args: Value| {
        let (status, out) = s.invoke(tool, args.clone());
        assert_eq!((status, kind(&out)), (500, "tool_error"), "{args}: {out}");
        assert!(!out.to_string().contains("root:"), "{args}: {out}");
    };
    for path in [
        "/etc/passwd",
        "../../../../etc/passwd",
        "/workspace/../etc/passwd",
        "/workspace/../../../../etc/passwd",
        "/workspace/planted-abs/passwd",
        "/workspace/planted-rel/passwd",
        "/workspace/planted-file",
    ] {
        refused("hostile_read_path", json!({"path": path}));
    }
    for (i, target) in ["/etc", "../../../../../../etc", "..", "../.."]
        .iter()
        .enumerate()
    {
        refused(
            "hostile_symlink_out",
            json!({"target": target, "link": format!("made-{i}")}),
        );
    }
    // Inside the workspace, the same tools work.
    let (status, out) = s.invoke(
        "hostile_read_path",
        json!({"path": "/workspace/inner-link"}),
    );
    assert_eq!(
        (status, &out["result"]),
        (200, &json!("inside-only")),
        "{out}"
    );
    let (status, out) = s.invoke(
        "hostile_symlink_out",
        json!({"target": "inside", "link": "made-inside"}),
    );
    assert_eq!(
        (status, &out["result"]),
        (200, &json!("inside-only")),
        "{out}"
    );
    assert!(workspace.join("made-inside").is_symlink());
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

/// The rest of the hostile cases: environment snooping, a network attempt
/// without a grant, a call that never comes back from a host call, 1,000
/// concurrent calls to a slow tool, and a slow-loris body. Each ends the bad
/// call (or request) with its kind while good calls go on, and the server's
/// memory stays bounded.
#[test]
fn abuse_ends_the_bad_call_only_and_memory_stays_bounded() {
    const ADMIN: &str = "admin-token-0123456789";
    // The server's own temporary directory, checked for leftovers at the end.
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Server::start_env(
        PluginsDir::new()
            .add("calc", "calc")
            .add("hostile", "hostile"),
        Some("[server]\nbody_timeout_ms = 1000\n"),
        &[
            ("TOOLHOST_TEST_SECRET", "do-not-leak"),
            ("TOOLHOST_ADMIN_TOKEN", ADMIN),
            ("TMPDIR", tmp.path().to_str().unwrap()),
        ],
    )
    .unwrap();
    let rss_start = s.rss_kib().unwrap();
    let bg = background_calls(&s);

    // The host's environment is not the plugin's.
    let (status, out) = s.invoke("hostile_env_dump", json!({}));
    assert_eq!((status, &out["result"]), (200, &json!({})), "{out}");

    // No network without a grant: the connection is never made.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (status, out) = s.invoke("hostile_connect", json!({"addr": addr}));
    assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");
    assert!(
        listener.accept().is_err(),
        "the plugin reached the listener"
    );

    // Asleep inside a host call (no fuel burns, no epoch check): the host's
    // deadline still ends it.
    let started = std::time::Instant::now();
    let (status, out) = s.invoke("hostile_sleep", json!({"ms": 600_000}));
    assert_eq!((status, kind(&out)), (504, "timeout"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(10));

    // 1,000 calls at once to a tool with 8 slots and a queue of 64: the
    // excess is refused with 429 at once, not queued without bound.
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let url = s.url("/tools/hostile_slow/invoke");
    let callers: Vec<_> = (0..1000)
        .map(|_| {
            let (http, url) = (http.clone(), url.clone());
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    http.post(&url)
                        .json(&json!({"params": {"ms": 100}}))
                        .send()
                        .map(|r| r.status().as_u16())
                        .unwrap_or(0)
                })
                .unwrap()
        })
        .collect();
    let mut by_status = std::collections::BTreeMap::<u16, u32>::new();
    for c in callers {
        *by_status.entry(c.join().unwrap()).or_default() += 1;
    }
    assert!(
        by_status.keys().all(|s| [200, 429].contains(s)),
        "only successes and 429s: {by_status:?}"
    );
    assert!(
        by_status.get(&200).copied().unwrap_or(0) >= 8,
        "{by_status:?}"
    );
    assert!(
        by_status.get(&429).copied().unwrap_or(0) > 0,
        "{by_status:?}"
    );
    eprintln!("1,000 concurrent slow calls: {by_status:?}");

    // A slow-loris body: a byte every 200 ms of a 100-byte body gets 408
    // after the 1 s body deadline, not a held connection.
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(s.base.trim_start_matches("http://")).unwrap();
    conn.write_all(
        b"POST /tools/calc_evaluate/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\n\
          Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    )
    .unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    while started.elapsed() < Duration::from_secs(10) {
        let _ = conn.write_all(b" ");
        let mut buf = [0u8; 1024];
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(_) => {}
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // Uploads that fail (not a component, and a body cut short) leave no
    // half-written file behind.
    let upload = |body: reqwest::blocking::Body| {
        http.put(s.url("/plugins/junk"))
            .bearer_auth(ADMIN)
            .body(body)
            .send()
            .map(|r| r.status().as_u16())
    };
    let status = upload(vec![0u8; 4 << 20].into()).unwrap();
    assert_eq!(status, 422, "a 4 MiB non-component is refused");
    let mut conn = std::net::TcpStream::connect(s.base.trim_start_matches("http://")).unwrap();
    write!(
        conn,
        "PUT /plugins/junk HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADMIN}\r\n\
         Content-Length: 1000000\r\n\r\n"
    )
    .unwrap();
    conn.write_all(&[0u8; 1000]).unwrap();
    drop(conn);

    let (ok, failed) = bg.finish();
    assert_eq!(failed, 0, "well-behaved calls were disturbed ({ok} ok)");
    assert!(s.is_alive());
    let (status, plugins) = s.get("/plugins");
    assert_eq!(status, 200);
    assert!(!plugins.to_string().contains("junk"), "{plugins}");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "files left in TMPDIR: {left:?}");
    for dir in [s.data.path(), s.plugins_dir()] {
        let left = toolhost_e2e::temp_files(dir);
        assert!(left.is_empty(), "temporary files left: {left:?}");
    }
    assert!(!s.plugins_dir().join("junk.wasm").exists());
    let rss_end = s.rss_kib().unwrap();
    eprintln!("server RSS: {rss_start} KiB at start, {rss_end} KiB after the abuse");
    assert!(
        rss_end < rss_start + 512 * 1024,
        "RSS grew from {rss_start} to {rss_end} KiB"
    );
}

/// A file operation that never returns (a FIFO named like a file, which a
/// shell node of the session can make in the workspace): the plugin's calls
/// run on threads of their own, so each such call ends at its time limit
/// with `timeout`, and calls of every kind meanwhile, on the server's
/// worker threads and on threads of their own, are answered as usual.
#[test]
fn a_file_that_never_opens_ends_its_call_only() {
    let s = Server::start(
        PluginsDir::new()
            .add("calc", "calc")
            .add("hostile", "hostile"),
    );
    let workspace = s.data.path().join("data/workspaces/test");
    std::fs::create_dir_all(&workspace).unwrap();
    let fifo = workspace.join("notes.pdf");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let bg = background_calls(&s);
    let started = std::time::Instant::now();
    // More stuck calls than this machine has worker threads (two here).
    let stuck: Vec<_> = (0..4)
        .map(|_| {
            let url = s.url("/tools/hostile_read_path/invoke");
            std::thread::spawn(move || {
                let r = reqwest::blocking::Client::new()
                    .post(url)
                    .header("x-toolhost-session", "test")
                    .json(&json!({"params": {"path": "/workspace/notes.pdf"}}))
                    .timeout(Duration::from_secs(30))
                    .send()
                    .unwrap();
                (r.status().as_u16(), r.json::<Value>().unwrap())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // While they wait on the FIFO: the same plugin, and calc, answer.
    let (status, out) = s.invoke("hostile_echo", json!({"value": "still here"}));
    assert_eq!(status, 200, "{out}");
    for handle in stuck {
        let (status, out) = handle.join().unwrap();
        assert_eq!((status, kind(&out)), (504, "timeout"), "{out}");
    }
    // The manifest's 2 s, and the grace the backstop gives it.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let (ok, failed) = bg.finish();
    assert!(
        ok > 20 && failed == 0,
        "calc meanwhile: {ok} ok, {failed} failed"
    );
    // A writer lets the stuck threads go.
    let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
}
