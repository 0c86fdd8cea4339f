//! Several Docker engines as one node pool (#26), on two Docker daemons of
//! the test's own: `a` on a unix socket, `b` over TCP with TLS client
//! certificates on 127.0.0.1 (certificates made here with the openssl CLI).
//! Each daemon has its own socket, pidfile, data and exec roots on a tmpfs
//! the test mounts, a bridge of its own (nodes have no network; not
//! `--bridge none`, which deletes the host's `docker0`) and no iptables. Neither can pull: the server loads the node image into each from
//! the `docker save` archive the build wrote (target/node-image/). Then: drain moves new sessions away and lets a
//! running one finish; 40 sessions spread over both; `b` is stopped in the
//! middle of a run of shell calls: only `b`'s sessions see `node_lost`
//! (503), each recovers on its next call on `a`, `a`'s sessions and
//! containers are untouched; `b` comes back and the server removes what it
//! left there; nothing is left on either daemon at the end. Two daemons
//! loading the image keep both cores busy, within a bounded wait: never
//! beside another such binary (`lanes: heavy`, tests/lanes.py).
//!
//! Every daemon, mount and directory goes in `Drop` guards, on failure too.
//! Needs root (mount, dockerd), the node image on the main engine and its
//! archive (`make node-image` makes both).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_e2e::{PluginsDir, Server, free_port, kind, require_docker, wait_for};

const IMAGE: &str = "toolhost-node:latest";
const ADMIN: &str = "engines-test-admin-token";
const SESSIONS: usize = 40;

/// A tmpfs mounted for the daemons' roots (the disk may be short of room
/// for two more copies of the node image); unmounted and removed on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount() -> Tmpfs {
        // Short paths: containerd's socket lives under the exec root.
        let dir = tempfile::Builder::new()
            .prefix("thd")
            .tempdir_in("/tmp")
            .unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=5g,mode=700", "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "cannot mount a tmpfs");
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// TLS material for daemon `b`: a CA, the daemon's certificate (for
/// 127.0.0.1) and the client's.
struct Certs {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn make_certs(dir: &Path) -> Certs {
    std::fs::create_dir_all(dir).unwrap();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let mut ca = vec!["req", "-x509", "-nodes", "-days", "1"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca.pem",
        "-subj",
        "/CN=toolhost engines test CA",
    ]);
    openssl(dir, &ca);
    for (who, ext) in [
        (
            "server",
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        ),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ] {
        let (key, csr, cert, extfile) = (
            format!("{who}-key.pem"),
            format!("{who}.csr"),
            format!("{who}.pem"),
            format!("{who}.ext"),
        );
        std::fs::write(dir.join(&extfile), ext).unwrap();
        let mut req = vec!["req", "-nodes"];
        req.extend(ec);
        let subj = format!("/CN={who}");
        req.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        openssl(dir, &req);
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca-key.pem",
                "-CAcreateserial",
                "-days",
                "1",
                "-out",
                &cert,
                "-extfile",
                &extfile,
            ],
        );
    }
    Certs {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server-key.pem"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client-key.pem"),
    }
}

/// A dockerd of the test's own; stopped (SIGTERM, then SIGKILL) on drop.
struct Daemon {
    root: PathBuf,
    /// `unix:///…/d.sock` or `tcp://127.0.0.1:port`.
    url: String,
    tls: Option<(PathBuf, PathBuf, PathBuf)>,
    child: Option<std::process::Child>,
    args: Vec<String>,
    /// Dropped after the daemon stops (fields drop after `Drop::drop`).
    _bridge: Bridge,
}

/// A Linux bridge for one test daemon, with an address in a subnet of its
/// own (10.213.0.0/24 or 10.213.1.0/24, named for this process); deleted on drop.
struct Bridge(String);

impl Bridge {
    fn make(second: bool) -> Bridge {
        let n = u8::from(second);
        let name = format!("thb{}{n}", std::process::id() % 100_000);
        let ip = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        let _ = ip(&["link", "del", &name]);
        assert!(
            ip(&["link", "add", &name, "type", "bridge"]),
            "ip link add {name}"
        );
        let bridge = Bridge(name);
        assert!(ip(&[
            "addr",
            "add",
            &format!("10.213.{n}.1/24"),
            "dev",
            &bridge.0
        ]));
        bridge
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

impl Daemon {
    fn start(root: &Path, tcp: Option<(u16, &Certs)>) -> Daemon {
        for d in ["data", "exec"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let bridge = Bridge::make(tcp.is_some());
        std::fs::write(root.join("daemon.json"), "{}").unwrap();
        let p = |x: &str| root.join(x).to_string_lossy().into_owned();
        let mut args: Vec<String> = vec![
            format!("--config-file={}", p("daemon.json")),
            format!("--data-root={}", p("data")),
            format!("--exec-root={}", p("exec")),
            format!("--pidfile={}", p("d.pid")),
            // Not `--bridge=none`: a dockerd started so deletes the host's
            // `docker0` (it shares the network namespace), breaking the main
            // engine's builds. A bridge of its own instead, made here with an
            // address of its own, removed on drop.
            format!("--bridge={}", bridge.0),
            "--iptables=false".into(),
            "--ip-masq=false".into(),
            "--storage-driver=overlay2".into(),
            "--log-level=warn".into(),
        ];
        let (url, tls) = match tcp {
            None => {
                let url = format!("unix://{}", p("d.sock"));
                args.push(format!("--host={url}"));
                (url, None)
            }
            Some((port, c)) => {
                let url = format!("tcp://127.0.0.1:{port}");
                args.extend([
                    format!("--host={url}"),
                    "--tlsverify".into(),
                    format!("--tlscacert={}", c.ca.display()),
                    format!("--tlscert={}", c.server_cert.display()),
                    format!("--tlskey={}", c.server_key.display()),
                ]);
                (
                    url,
                    Some((c.ca.clone(), c.client_cert.clone(), c.client_key.clone())),
                )
            }
        };
        let mut d = Daemon {
            root: root.to_owned(),
            url,
            tls,
            child: None,
            args,
            _bridge: bridge,
        };
        d.run();
        d
    }

    /// Start (again) with the same roots.
    fn run(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("dockerd.log"))
            .unwrap();
        let child = Command::new("dockerd")
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("dockerd starts");
        self.child = Some(child);
        let up = wait_for(Duration::from_secs(60), || {
            self.cli(&["info", "--format", "{{.ServerVersion}}"])
                .is_some()
                .then_some(())
        });
        assert!(up.is_some(), "dockerd did not answer:\n{}", self.log());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.root.join("dockerd.log")).unwrap_or_default()
    }

    /// `docker <args>` against this daemon: its stdout, if it succeeded.
    fn cli(&self, args: &[&str]) -> Option<String> {
        let mut cmd = Command::new("docker");
        cmd.args(["-H", &self.url]);
        if let Some((ca, cert, key)) = &self.tls {
            cmd.arg("--tlsverify")
                .arg(format!("--tlscacert={}", ca.display()))
                .arg(format!("--tlscert={}", cert.display()))
                .arg(format!("--tlskey={}", key.display()));
        }
        let out = cmd.args(args).stdin(Stdio::null()).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Ids of the containers here (all states) matching `label`.
    fn containers(&self, label: &str) -> Vec<String> {
        self.cli(&[
            "ps",
            "-aq",
            "--no-trunc",
            "--filter",
            &format!("label={label}"),
        ])
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
    }

    /// SIGTERM: dockerd stops its containers and containerd, then exits.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        unsafe_kill(child.id(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

fn unsafe_kill(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status();
}

/// Processes whose command line mentions `root` (dockerd, containerd,
/// shims, node processes of daemons rooted there).
fn processes_under(root: &Path) -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-af", &root.to_string_lossy()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("pgrep"))
        .map(str::to_owned)
        .collect()
}

fn shell(s: &Server, session: &str, command: &str) -> (u16, Value) {
    s.invoke_in(session, "shell_run", json!({ "command": command }))
}

/// [`shell`] with a client that waits longer than any bound of the server
/// (a node's start is given a minute to be ready): a call the server ends
/// with an error shows that error, and one it never answers is reported
/// by its session (status 0) instead of panicking a worker thread.
fn shell_patiently(s: &Server, session: &str, command: &str) -> (u16, Value) {
    static PATIENT: std::sync::OnceLock<reqwest::blocking::Client> = std::sync::OnceLock::new();
    let client = PATIENT.get_or_init(|| {
        reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(150))
            .build()
            .unwrap()
    });
    let begun = Instant::now();
    let body = json!({ "params": { "command": command } });
    match s.try_invoke_with(client, session, "shell_run", body) {
        Ok(answer) => answer,
        Err(e) => (
            0,
            json!({ "error": { "kind": "unanswered", "message": format!("{e} after {:?}", begun.elapsed()) } }),
        ),
    }
}

fn admin(s: &Server, method: reqwest::Method, path: &str) -> (u16, Value) {
    let r = s
        .client()
        .request(method, s.url(path))
        .bearer_auth(ADMIN)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn engine(s: &Server, name: &str) -> Value {
    let (_, body) = s.get("/engines");
    body["engines"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["name"] == name).cloned())
        .unwrap_or(Value::Null)
}

/// Which daemon runs `session`'s node, and its container.
fn home(a: &Daemon, b: &Daemon, session: &str) -> (Option<&'static str>, Vec<String>) {
    let label = format!("toolhost.session={session}");
    let (on_a, on_b) = (a.containers(&label), b.containers(&label));
    match (on_a.is_empty(), on_b.is_empty()) {
        (false, true) => (Some("a"), on_a),
        (true, false) => (Some("b"), on_b),
        _ => (None, [on_a, on_b].concat()),
    }
}

#[test]
fn two_engines_one_pool_drain_and_a_dead_engine() {
    if !require_docker() {
        return;
    }
    if Command::new("id").arg("-u").output().unwrap().stdout != b"0\n" {
        eprintln!("SKIPPED: the engines test runs its own dockerd (root)");
        return;
    }
    let has_image = Command::new("docker")
        .args(["image", "inspect", IMAGE])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(has_image, "no {IMAGE} on the main engine: make node-image");
    let started = Instant::now();

    // The archive the engines load the node image from: the one the build
    // writes (`make node-image`: plugins/node/save-image.sh), holding the
    // image the main engine has, as the documented configuration names it.
    let archive = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/node-image/toolhost-node.tar")
        .canonicalize()
        .expect("no target/node-image/toolhost-node.tar: make node-image");
    let image_id = Command::new("docker")
        .args(["image", "inspect", "-f", "{{.Id}}", IMAGE])
        .output()
        .unwrap()
        .stdout;
    let recorded = std::fs::read(archive.with_extension("id")).unwrap_or_default();
    assert_eq!(
        String::from_utf8_lossy(&recorded).trim(),
        String::from_utf8_lossy(&image_id).trim(),
        "target/node-image/toolhost-node.tar is not of the current {IMAGE}: make node-image"
    );

    let fs = Tmpfs::mount();
    let certs = make_certs(&fs.path().join("certs"));
    let mut a = Daemon::start(&fs.path().join("a"), None);
    let mut b = Daemon::start(&fs.path().join("b"), Some((free_port().unwrap(), &certs)));
    for d in [&a, &b] {
        assert!(
            d.cli(&["image", "inspect", IMAGE]).is_none(),
            "a fresh daemon has no image"
        );
    }
    eprintln!("daemons up in {:?}", started.elapsed());

    let config = format!(
        r#"
[auth]
admin_token = "{ADMIN}"

[docker]
image_archive = "{archive}"

[[docker.engines]]
name = "a"
url = "{a_url}"

[[docker.engines]]
name = "b"
url = "{b_url}"
tls_ca = "{ca}"
tls_cert = "{cert}"
tls_key = "{key}"
"#,
        archive = archive.display(),
        a_url = a.url,
        b_url = b.url,
        ca = certs.ca.display(),
        cert = certs.client_cert.display(),
        key = certs.client_key.display(),
    );
    let plugins = PluginsDir::new().add_toolkit_with("shell", |m| {
        m.replace("scheduling = \"hot\"", "scheduling = \"cold\"")
            .replace("max_containers = 32", "max_containers = 64")
    });
    let s = Server::start_with(plugins, Some(&config)).expect("server starts");
    let scope = format!("toolhost.scope={}", s.scope());

    // Both engines up, the image loaded into each by the server.
    let ready = wait_for(Duration::from_secs(120), || {
        let both = ["a", "b"].iter().all(|n| engine(&s, n)["health"] == "up");
        let images = [&a, &b]
            .iter()
            .all(|d| d.cli(&["image", "inspect", IMAGE]).is_some());
        (both && images).then_some(())
    });
    assert!(
        ready.is_some(),
        "engines: {}\n{}",
        s.get("/engines").1,
        s.log()
    );
    let b_view = engine(&s, "b");
    assert!(
        b_view["url"]
            .as_str()
            .unwrap()
            .starts_with("tcp://127.0.0.1:")
    );
    assert!(b_view["cores"].as_f64().unwrap() >= 1.0, "{b_view}");
    eprintln!("images loaded in {:?}", started.elapsed());

    // Drain: refused without the token, unknown engine 404.
    let (status, _) = s
        .client()
        .post(s.url("/engines/a/drain"))
        .send()
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(status, 401);
    assert_eq!(admin(&s, reqwest::Method::POST, "/engines/zz/drain").0, 404);
    // `a` drained: new sessions go to `b`.
    let (status, view) = admin(&s, reqwest::Method::POST, "/engines/a/drain");
    assert_eq!((status, &view["drained"]), (200, &json!(true)), "{view}");
    for n in 0..3 {
        let id = format!("drain{n}");
        let (status, body) = shell(&s, &id, "export K=kept; echo hi");
        assert_eq!(status, 200, "{body}");
        assert_eq!(home(&a, &b, &id).0, Some("b"), "{id}");
    }
    // Now `b` drained and `a` not: drain0 carries on on `b` (same
    // container, state kept); a new session goes to `a`.
    let (_, before) = home(&a, &b, "drain0");
    admin(&s, reqwest::Method::DELETE, "/engines/a/drain");
    admin(&s, reqwest::Method::POST, "/engines/b/drain");
    let (status, body) = shell(&s, "drain0", "echo $K");
    assert_eq!(
        (status, &body["result"]["stdout"]),
        (200, &json!("kept\n")),
        "{body}"
    );
    assert_eq!(home(&a, &b, "drain0"), (Some("b"), before));
    shell(&s, "drain3", "true");
    assert_eq!(home(&a, &b, "drain3").0, Some("a"));
    let (_, plugins_body) = s.get("/plugins");
    let listed: Vec<(String, bool)> = plugins_body["engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_owned(), e["drained"] == true))
        .collect();
    assert_eq!(
        listed,
        [("a".into(), false), ("b".into(), true)],
        "{plugins_body}"
    );
    admin(&s, reqwest::Method::DELETE, "/engines/b/drain");
    for n in 0..4 {
        s.close_session(&format!("drain{n}"));
    }

    // 40 sessions spread over both engines, 8 starting at a time.
    let ids: Vec<String> = (0..SESSIONS).map(|n| format!("s{n:02}")).collect();
    let server = Arc::new(s);
    let mut homes: Vec<(String, &'static str, Vec<String>)> = Vec::new();
    for chunk in ids.chunks(8) {
        let handles: Vec<_> = chunk
            .iter()
            .map(|id| {
                let (s, id) = (server.clone(), id.clone());
                std::thread::spawn(move || shell(&s, &id, &format!("export X={id}; echo ready")))
            })
            .collect();
        for h in handles {
            let (status, body) = h.join().unwrap();
            assert_eq!(status, 200, "{body}");
        }
    }
    for id in &ids {
        let (at, containers) = home(&a, &b, id);
        let at = at.unwrap_or_else(|| panic!("{id} on neither or both: {containers:?}"));
        assert_eq!(containers.len(), 1, "{id}: {containers:?}");
        homes.push((id.clone(), at, containers));
    }
    let on_b = homes.iter().filter(|h| h.1 == "b").count();
    eprintln!(
        "{SESSIONS} sessions: {} on a, {on_b} on b ({:?})",
        SESSIONS - on_b,
        started.elapsed()
    );
    assert!(
        (10..=30).contains(&on_b),
        "placement by free capacity spreads sessions: {on_b} of {SESSIONS} on b"
    );
    let metrics = server.metrics();
    assert!(
        metrics.contains(&format!(
            "toolhost_docker_engine_nodes{{engine=\"b\"}} {on_b}"
        )),
        "{metrics}"
    );
    assert!(metrics.contains("toolhost_docker_engine_up{engine=\"b\"} 1"));

    // A run of shell calls in every session; `b` is stopped in the middle.
    type Outcome = (u16, String, bool, String);
    let results: Arc<Mutex<Vec<(String, Instant, Outcome)>>> = Arc::default();
    let stop_at = Instant::now() + Duration::from_secs(3);
    let run_until = stop_at + Duration::from_secs(10);
    let handles: Vec<_> = ids
        .iter()
        .map(|id| {
            let (s, id, results) = (server.clone(), id.clone(), results.clone());
            std::thread::spawn(move || {
                while Instant::now() < run_until {
                    let (status, body) = shell_patiently(&s, &id, "sleep 0.4; echo $X");
                    let note = body["content"][0]["text"]
                        .as_str()
                        .is_some_and(|t| t.contains("fresh node"));
                    // A failure's message in its place (shown if asserted on).
                    let stdout = body["result"]["stdout"]
                        .as_str()
                        .or(body["error"]["message"].as_str())
                        .unwrap_or("")
                        .to_owned();
                    let outcome = (status, kind(&body).to_owned(), note, stdout);
                    results
                        .lock()
                        .unwrap()
                        .push((id.clone(), Instant::now(), outcome));
                }
            })
        })
        .collect();
    std::thread::sleep(stop_at.saturating_duration_since(Instant::now()));
    let killed = Instant::now();
    b.stop();
    eprintln!("b stopped in {:?}", killed.elapsed());
    for h in handles {
        h.join().unwrap();
    }
    let results = results.lock().unwrap().clone();
    for (id, at, _) in &homes {
        let mine: Vec<&Outcome> = results
            .iter()
            .filter(|r| &r.0 == id)
            .map(|r| &r.2)
            .collect();
        assert!(mine.len() >= 5, "{id}: only {} calls", mine.len());
        if *at == "a" {
            // Nothing else disturbed: every call answered, state kept.
            for o in &mine {
                assert_eq!(
                    (o.0, o.2, o.3.as_str()),
                    (200, false, format!("{id}\n").as_str()),
                    "{id} on a: {o:?}"
                );
            }
            continue;
        }
        // `b`'s sessions: a failure is `node_lost` (503), nothing else.
        for o in &mine {
            assert!(
                o.0 == 200 || (o.0 == 503 && o.1 == "node_lost"),
                "{id} on b: {o:?}"
            );
        }
        // It recovers: the first answer after its loss comes from a fresh
        // node (its variables gone), and the last calls all succeed.
        let first_ok_after = results
            .iter()
            .filter(|r| &r.0 == id && r.1 > killed && r.2.0 == 200)
            .map(|r| &r.2)
            .next()
            .unwrap_or_else(|| panic!("{id} never recovered: {mine:?}"));
        assert!(
            first_ok_after.2 || first_ok_after.3 == format!("{id}\n"),
            "{id}: {first_ok_after:?}"
        );
        assert_eq!(mine.last().unwrap().0, 200, "{id}: {mine:?}");
    }
    let lost: Vec<&String> = homes
        .iter()
        .filter(|h| h.1 == "b")
        .map(|h| &h.0)
        .filter(|id| results.iter().any(|r| &r.0 == *id && r.2.1 == "node_lost"))
        .collect();
    eprintln!("node_lost seen by {} of {on_b} sessions on b", lost.len());
    assert!(
        !lost.is_empty(),
        "calls were in flight on b when it stopped"
    );
    // `a`'s containers are the ones they were; `b`'s sessions now live on `a`.
    for (id, at, containers) in &homes {
        let (now, now_containers) = home(&a, &b, id);
        assert_eq!(now, Some("a"), "{id}");
        if *at == "a" {
            assert_eq!(&now_containers, containers, "{id}'s node on a was replaced");
        }
    }
    let down = engine(&server, "b");
    assert_eq!(down["health"], "down", "{down}");
    let metrics = server.metrics();
    assert!(
        metrics.contains("toolhost_docker_engine_up{engine=\"b\"} 0"),
        "{metrics}"
    );
    assert!(metrics.contains("toolhost_docker_engine_up{engine=\"a\"} 1"));
    assert!(
        metrics.contains(&format!(
            "toolhost_docker_engine_nodes{{engine=\"a\"}} {SESSIONS}"
        )),
        "{metrics}"
    );

    // `b` comes back: up again, and the containers it stopped with it are
    // removed by the server.
    b.run();
    let cleaned = wait_for(Duration::from_secs(60), || {
        (engine(&server, "b")["health"] == "up" && b.containers(&scope).is_empty()).then_some(())
    });
    assert!(
        cleaned.is_some(),
        "left on b: {:?}\n{}",
        b.containers(&scope),
        engine(&server, "b")
    );

    // A graceful shutdown removes every node; then both daemons stop, and
    // nothing of them is left running.
    let mut s = Arc::try_unwrap(server).unwrap_or_else(|_| panic!("threads hold the server"));
    s.terminate();
    assert_eq!(a.containers(&scope), Vec::<String>::new());
    assert_eq!(b.containers(&scope), Vec::<String>::new());
    assert_eq!(
        a.cli(&["ps", "-aq"]).unwrap().trim(),
        "",
        "nothing at all on a"
    );
    a.stop();
    b.stop();
    let left = processes_under(fs.path());
    assert!(left.is_empty(), "left running: {left:?}");
    eprintln!("engines test done in {:?}", started.elapsed());
}
