//! Two replicas behind a real load balancer: Debian's HAProxy hashing on
//! `x-toolhost-session` (as the Kubernetes Ingress does), one PostgreSQL
//! registry (Debian's), session workspaces shared, one Docker engine. A
//! client keeps 20 sessions busy (wasm calls in all, shell calls in 8; a
//! tool request being built) while the replica running the build is killed
//! with SIGKILL. Sessions on the survivor never fail; the killed replica's
//! sessions go on on the survivor (the client retries a call once on a
//! gateway error, as client libraries do; at most one such retry per
//! session); the build is taken over once and completed once; the survivor
//! removes the killed replica's containers; nothing is left at the end.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_e2e::sources::request_wordcount;
use toolhost_e2e::*;

const ADMIN: &str = "admin-admin-admin-admin";
const SESSIONS: usize = 20;
const SHELLS: usize = 8;

/// Debian's HAProxy in the foreground on a loopback port, stopped when
/// dropped.
struct Haproxy {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Haproxy {
    fn start(backends: &[&Server]) -> Option<Haproxy> {
        if !Path::new("/usr/sbin/haproxy").exists() {
            assert!(
                std::env::var_os("CI").is_none(),
                "no HAProxy: CI must run this test (make test's registry phase installs it)"
            );
            eprintln!("SKIPPED: no HAProxy (apt-get install haproxy)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = free_port().unwrap();
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let addr = s.base.trim_start_matches("http://");
                format!("    server r{i} {addr}\n")
            })
            .collect();
        // The session's key in a variable (the request is not changed); a
        // replica failing two checks 0.5 s apart leaves the hash; a request
        // whose connection is refused, or cut before any answer (the replica
        // died under it), goes to another replica.
        let config = format!(
            "global\n    maxconn 1024\n\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 120s\n    timeout server 120s\n    retries 2\n    retry-on conn-failure empty-response\n    option redispatch 1\n\
             frontend lb\n    bind 127.0.0.1:{port}\n    default_backend replicas\n\
             backend replicas\n    http-request set-var(txn.session) req.hdr(x-toolhost-session) if {{ req.hdr(x-toolhost-session) -m found }}\n    balance hash var(txn.session)\n    hash-type consistent\n    option httpchk\n    http-check send meth GET uri /health ver HTTP/1.1 hdr Host localhost\n    default-server check inter 500ms fall 2 rise 1\n{servers}"
        );
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let child = Command::new("/usr/sbin/haproxy")
            .args(["-db", "-f"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let up = wait_for(Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
        assert!(up.is_some(), "HAProxy does not listen");
        Some(Haproxy {
            child,
            port,
            _dir: dir,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

fn replica(pg: &pg::Postgres, workspaces: &Path) -> Server {
    let config = format!(
        "[registry]\nflush_ms = 200\nurl = \"{}\"\n[auth]\nadmin_token = \"{ADMIN}\"\n",
        pg.url
    );
    let plugins = PluginsDir::new()
        .add("calc", "calc")
        .add_toolkit_with("shell", cold);
    Server::start_with_workspaces(plugins, Some(&config), workspaces).unwrap()
}

/// One call through the balancer; a gateway error (502-504: the replica
/// died under the call) is retried once, as client libraries do. Whether
/// it ended well, and whether it was retried.
fn call(
    http: &reqwest::blocking::Client,
    lb: &str,
    session: &str,
    tool: &str,
    params: Value,
) -> (Result<Value, String>, bool) {
    let once = || {
        http.post(format!("{lb}/tools/{tool}/invoke"))
            .header("x-toolhost-session", session)
            .json(&json!({ "params": params }))
            .send()
            .map_err(|e| e.to_string())
            .map(|r| {
                (
                    r.status().as_u16(),
                    r.json::<Value>().unwrap_or(Value::Null),
                )
            })
    };
    let mut retried = false;
    let mut answer = once();
    if matches!(answer, Ok((502..=504, _)) | Err(_)) {
        retried = true;
        std::thread::sleep(Duration::from_millis(250));
        answer = once();
    }
    let result = match answer {
        Ok((200, body)) => Ok(body),
        Ok((status, body)) => Err(format!("{status} {body}")),
        Err(e) => Err(e),
    };
    (result, retried)
}

#[derive(Default)]
struct Tally {
    ok: u64,
    retried: u64,
    failed: Vec<String>,
}

fn admin_get(http: &reqwest::blocking::Client, url: String) -> Value {
    http.get(url)
        .bearer_auth(ADMIN)
        .send()
        .and_then(|r| r.json())
        .unwrap_or(Value::Null)
}

#[test]
fn two_replicas_behind_haproxy_survive_losing_one() {
    if !require_docker() {
        return;
    }
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let workspaces = tempfile::tempdir().unwrap();
    let mut replicas = vec![
        replica(&pg, workspaces.path()),
        replica(&pg, workspaces.path()),
    ];
    let Some(lb) = Haproxy::start(&replicas.iter().collect::<Vec<_>>()) else {
        return;
    };
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let base = lb.url("");
    let tag = std::process::id();
    let sessions: Vec<String> = (0..SESSIONS).map(|i| format!("lb-{tag}-{i}")).collect();

    // A tool request, through the balancer.
    let task = request_wordcount(&http, &base, ADMIN);

    // Every session's first calls (the shell ones make their node).
    for (i, s) in sessions.iter().enumerate() {
        let (done, _) = call(
            &http,
            &base,
            s,
            "calc_evaluate",
            json!({"expression": "1+1"}),
        );
        assert!(done.is_ok(), "{done:?}");
        if i < SHELLS {
            let (done, _) = call(
                &http,
                &base,
                s,
                "shell_run",
                json!({"command": "echo start > log.txt"}),
            );
            assert!(done.is_ok(), "{done:?}");
        }
    }
    // Where each session lives, and which replica builds the task.
    let on: Vec<HashSet<String>> = replicas
        .iter()
        .map(|r| {
            admin_get(&http, r.url("/sessions"))["sessions"]
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|s| s["id"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    assert!(
        !on[0].is_empty() && !on[1].is_empty(),
        "the balancer spreads sessions over both replicas: {on:?}"
    );
    let runner = wait_for(Duration::from_secs(30), || {
        let t = admin_get(&http, lb.url(&format!("/tasks/{task}/status")));
        (t["status"] == "building").then(|| t["runner"].as_str().map(str::to_owned))?
    })
    .expect("the task is building");
    let victim = replicas
        .iter()
        .position(|r| r.replica_id().as_deref() == Some(runner.as_str()))
        .unwrap_or_else(|| {
            panic!(
                "the runner {runner} is not one of the replicas: {:?} {}",
                replicas.iter().map(|r| r.replica_id()).collect::<Vec<_>>(),
                replicas[0].log().chars().take(1500).collect::<String>()
            )
        });
    let survivor = 1 - victim;

    // The load: every session calls in a loop until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let tallies: Arc<Mutex<HashMap<String, Tally>>> = Arc::default();
    let started = Instant::now();
    let workers: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (s, stop, tallies, http) = (s.clone(), stop.clone(), tallies.clone(), http.clone());
            let lb = lb.url("");
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut outcomes = vec![call(
                        &http,
                        &lb,
                        &s,
                        "calc_evaluate",
                        json!({"expression": format!("{i} * 2")}),
                    )];
                    if i < SHELLS {
                        outcomes.push(call(
                            &http,
                            &lb,
                            &s,
                            "shell_run",
                            json!({"command": "echo x >> log.txt; wc -l < log.txt"}),
                        ));
                    }
                    let mut tallies = tallies.lock().unwrap();
                    let t = tallies.entry(s.clone()).or_default();
                    for (result, retried) in outcomes {
                        t.retried += u64::from(retried);
                        match result {
                            Ok(_) => t.ok += 1,
                            Err(e) => t.failed.push(format!(
                                "{:.1} s into the load: {e}",
                                started.elapsed().as_secs_f64()
                            )),
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(4));
    let killed_at = Instant::now();
    replicas[victim].kill();
    std::thread::sleep(Duration::from_secs(12));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let tallies = tallies.lock().unwrap();
    let (mut calls, mut retries) = (0, 0);
    for s in &sessions {
        let t = &tallies[s];
        calls += t.ok;
        retries += t.retried;
        if !t.failed.is_empty() {
            let lines: String = replicas[survivor]
                .log()
                .lines()
                .filter(|l| {
                    l.contains(s.as_str())
                        || l.contains("WARN")
                        || l.contains("ERROR")
                        || l.contains("removed")
                })
                .collect::<Vec<_>>()
                .join("\n");
            panic!(
                "session {s} (on the {} at first) had failed calls: {:?}\nthe survivor's log:\n{lines}",
                if on[survivor].contains(s) {
                    "survivor"
                } else {
                    "killed replica"
                },
                t.failed
            );
        }
        if on[survivor].contains(s) {
            assert_eq!(t.retried, 0, "a session of the survivor needed a retry");
        } else {
            assert!(t.retried <= 1, "session {s} needed {} retries", t.retried);
        }
        assert!(t.ok > 2, "session {s} made {} calls", t.ok);
    }
    // The killed replica's sessions go on on the survivor, files and all.
    for s in sessions
        .iter()
        .take(SHELLS)
        .filter(|s| on[victim].contains(*s))
    {
        let (done, _) = call(
            &http,
            &base,
            s,
            "shell_run",
            json!({"command": "head -n 1 log.txt"}),
        );
        assert!(
            done.as_ref().is_ok_and(|v| v.to_string().contains("start")),
            "{s}: {done:?}"
        );
    }

    // The build: taken over once, completed once.
    let done = wait_for(Duration::from_secs(240), || {
        let t = admin_get(&http, lb.url(&format!("/tasks/{task}")));
        let ended = t["status"] == "completed" || t["status"] == "failed";
        ended.then_some(t)
    })
    .expect("the task ends");
    let history = done["events"].to_string();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        history.matches("taken over by replica").count(),
        1,
        "{history}"
    );
    assert_eq!(history.matches("completed: ").count(), 1, "{history}");

    // The survivor removes the killed replica's containers.
    let scope = sha256_hex(format!("registry {}", pg.url).as_bytes())[..16].to_owned();
    let theirs = || {
        containers(&[
            format!("toolhost.scope={scope}"),
            format!("toolhost.run={}", replicas[victim].replica_id().unwrap()),
        ])
    };
    let reaped = wait_for(Duration::from_secs(90), || {
        theirs().is_empty().then(Instant::now)
    });
    assert!(
        reaped.is_some(),
        "the killed replica's containers are left: {:?}",
        theirs()
    );
    eprintln!(
        "two replicas: {calls} calls in 16 s by {SESSIONS} sessions, {retries} retried once after the kill, 0 failed; \
         the killed replica's containers removed {:.0} s after the kill",
        reaped.unwrap().duration_since(killed_at).as_secs_f64()
    );
    drop(lb);
    let survivor = replicas.remove(survivor);
    drop(survivor);
    drop(replicas);
    assert!(
        wait_for(Duration::from_secs(30), || containers(&[format!(
            "toolhost.scope={scope}"
        )])
        .is_empty()
        .then_some(()))
        .is_some(),
        "containers left at the end"
    );
}
