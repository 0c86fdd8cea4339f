//! Service toolkits (seed 004's `docker` runtime): a container whose own
//! process serves HTTP, reached inside its network namespace (`--network
//! none`, nothing published, no container address contacted). Seed 004's
//! image-compression example cold, hot, stateless and reaped; services that
//! never become healthy, crash, or would over-allocate the host.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_e2e::*;

/// The tests' service (`tests/fixtures/services/tiny.py`): `/health`, `/ok`
/// (echoes its JSON input), `/crash` (the process exits), `/hang`.
const TINY: &str = include_str!("../../fixtures/services/tiny.py");

fn tiny_manifest(extra: &str) -> String {
    format!(
        "[docker]\nimage = \"toolhost-node:latest\"\ncommand = [\"python3\", \"-u\", \"/toolkit/tiny.py\"]\n\
         internal_port = 9000\nstart_timeout_s = 20\ncpus = 0.5\nmemory_mb = 128\n{extra}\n\
         [[tools]]\nname = \"ok\"\ndescription = \"Echo.\"\nendpoint_path = \"/ok\"\n\
         input_schema = {{ type = \"object\" }}\n\
         [[tools]]\nname = \"crash\"\ndescription = \"Exit.\"\nendpoint_path = \"/crash\"\n\
         input_schema = {{ type = \"object\" }}\n\
         [[tools]]\nname = \"hang\"\ndescription = \"Never answer.\"\nendpoint_path = \"/hang\"\n\
         input_schema = {{ type = \"object\" }}\n"
    )
}

/// An XAgent session with `gradient.png` uploaded to its workspace; its id.
fn session_with_image(s: &Server) -> String {
    let x = toolhost_e2e::xagent::XAgent::connect(s);
    let png = std::fs::read(repo_root().join("tests/fixtures/images/gradient.png")).unwrap();
    assert_eq!(x.upload("gradient.png", png), 200);
    x.session().to_owned()
}

fn compress(s: &Server, session: &str, quality: u32) -> (u16, Value) {
    s.invoke_in(
        session,
        "imagecompress_compress",
        json!({"image_path": "gradient.png", "quality": quality}),
    )
}

fn scheduling(s: &Server, tool: &str) -> Value {
    let (_, t) = s.get(&format!("/tools/{tool}"));
    assert_eq!(t["runtime"], "docker", "{t}");
    t["scheduling"].clone()
}

fn edit_manifest(s: &Server, name: &str, edit: impl Fn(String) -> String) {
    let path = s.plugins_dir().join(name).join(format!("{name}.toml"));
    let text = edit(std::fs::read_to_string(&path).unwrap());
    write_then_rename(&path, text.as_bytes());
}

#[test]
fn seed_004_image_compression_cold_hot_stateless_and_reaped() {
    if !require_docker() {
        return;
    }
    let s = Server::start(
        PluginsDir::new()
            .add("calc", "calc")
            .add_toolkit_with("imagecompress", |m| {
                m.replace("idle_timeout_s = 300", "idle_timeout_s = 3")
            }),
    );
    assert_eq!(
        scheduling(&s, "imagecompress_compress"),
        json!({"mode": "cold", "state": "sleeping", "containers": 0})
    );
    let session = session_with_image(&s);

    // Cold: the first call starts the session's container.
    let started = Instant::now();
    let (status, body) = compress(&s, &session, 30);
    let cold = started.elapsed();
    assert_eq!(status, 200, "{body}");
    let result = &body["result"];
    let (original, compressed) = (
        result["original_size"].as_u64().unwrap(),
        result["compressed_size"].as_u64().unwrap(),
    );
    assert_eq!(original, 36525, "{body}");
    assert!(compressed > 0 && compressed < original, "{body}");
    assert!(
        result["compression_ratio"].as_f64().unwrap() > 1.0,
        "{body}"
    );
    assert_eq!(result["output_path"], "gradient.compressed.jpg");
    let written = s
        .data
        .path()
        .join("data/workspaces")
        .join(&session)
        .join("gradient.compressed.jpg");
    assert_eq!(
        std::fs::metadata(&written).unwrap().len(),
        compressed,
        "the service wrote into the session's workspace"
    );
    assert_eq!(scheduling(&s, "imagecompress_compress")["state"], "running");
    assert_eq!(s.containers().len(), 1);
    // Warm: the same container, and a lower quality is smaller.
    let started = Instant::now();
    let (status, smaller) = compress(&s, &session, 5);
    let warm = started.elapsed();
    assert_eq!(status, 200, "{smaller}");
    assert!(smaller["result"]["compressed_size"].as_u64().unwrap() < compressed);
    assert!(warm < cold, "warm {warm:?} vs cold {cold:?}");
    // The service's own refusal is the caller's bad input.
    let (status, body) = s.invoke_in(
        &session,
        "imagecompress_compress",
        json!({"image_path": "../../etc/passwd"}),
    );
    assert_eq!((status, kind(&body)), (422, "invalid_input"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("outside the workspace"),
        "{body}"
    );
    // The schema is checked before the service sees anything.
    let (status, _) = s.invoke_in(
        &session,
        "imagecompress_compress",
        json!({"image_path": "gradient.png", "quality": 500}),
    );
    assert_eq!(status, 422);
    let (_, t) = s.get("/tools/imagecompress_compress");
    assert!(t["stats"]["call_count"].as_u64().unwrap() >= 3, "{t}");
    assert!(t["stats"]["error_rate"].as_f64().unwrap() > 0.0, "{t}");
    assert!(t["stats"]["last_used_time"].as_u64().is_some(), "{t}");

    // Reaped once idle.
    let reaped = wait_for(Duration::from_secs(30), || {
        s.containers().is_empty().then_some(())
    });
    assert!(
        reaped.is_some(),
        "the idle container is removed: {:?}",
        s.containers()
    );
    assert_eq!(
        scheduling(&s, "imagecompress_compress")["state"],
        "sleeping"
    );

    // Hot (hot-reloaded manifest): a container is kept started and the
    // next session's first call takes it.
    edit_manifest(&s, "imagecompress", |m| {
        m.replace("scheduling = \"cold\"", "scheduling = \"hot\"")
    });
    // Ready in the pool, by the server's own count (a container that is
    // still starting is listed by Docker already).
    let pooled = wait_for(Duration::from_secs(30), || {
        (scheduling(&s, "imagecompress_compress")["mode"] == "hot"
            && s.metrics()
                .contains(r#"toolhost_docker_nodes{state="pooled"} 1"#)
            && s.containers().len() == 1)
            .then_some(())
    });
    assert!(
        pooled.is_some(),
        "a pre-started container: {:?}",
        s.containers()
    );
    let pool_container = s.containers();
    let other = session_with_image(&s);
    let (status, body) = compress(&s, &other, 30);
    assert_eq!(status, 200, "{body}");
    assert!(
        s.containers().contains(&pool_container[0]),
        "the pooled container served the call"
    );

    // Stateless: a container per call, gone after it.
    edit_manifest(&s, "imagecompress", |m| {
        m.replace("scheduling = \"hot\"", "scheduling = \"stateless\"")
    });
    let switched = wait_for(Duration::from_secs(30), || {
        (scheduling(&s, "imagecompress_compress")["mode"] == "stateless").then_some(())
    });
    assert!(switched.is_some());
    let (status, body) = compress(&s, &other, 50);
    assert_eq!(status, 200, "{body}");
    let gone = wait_for(Duration::from_secs(30), || {
        s.containers().is_empty().then_some(())
    });
    assert!(
        gone.is_some(),
        "no container outlives a stateless call: {:?}",
        s.containers()
    );
    assert_eq!(
        s.invoke("calc_evaluate", json!({"expression": "2+2"})).0,
        200
    );
}

#[test]
fn unhealthy_crashing_and_oversized_services_are_refused_clearly() {
    if !require_docker() {
        return;
    }
    let never = "[docker]\nimage = \"toolhost-node:latest\"\ncommand = [\"python3\", \"-c\", \"import time; print('starting forever', flush=True); time.sleep(600)\"]\n\
                 internal_port = 9000\nstart_timeout_s = 2\n\
                 [[tools]]\nname = \"x\"\ndescription = \"x\"\ninput_schema = { type = \"object\" }\n";
    let plugins = PluginsDir::new()
        .add("calc", "calc")
        .folder("never", &[("never.toml", never)])
        .folder(
            "tiny",
            &[
                ("tiny.toml", &tiny_manifest("call_timeout_s = 2")),
                ("tiny.py", TINY),
            ],
        )
        .folder(
            "big",
            &[
                (
                    "big.toml",
                    &tiny_manifest("").replace("cpus = 0.5", "cpus = 0.75"),
                ),
                ("tiny.py", TINY),
            ],
        );
    // Service containers may hold 1.0 CPU on this 2-core machine.
    let cores = std::thread::available_parallelism().unwrap().get() as f64;
    let config = format!("[docker]\nmax_cpu_share = {}\n", 1.0 / cores);
    let s = Server::start_with(plugins, Some(&config)).unwrap();

    // Never healthy: 503 at its start timeout, `failed` with the service's
    // output, no container left; other tools answer.
    let started = Instant::now();
    let (status, body) = s.invoke("never_x", json!({}));
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let p = s.plugin("never").unwrap();
    assert_eq!(p["state"], "failed", "{p}");
    let reason = p["error"].as_str().unwrap();
    assert!(
        reason.contains("/health did not answer 2xx") && reason.contains("starting forever"),
        "{reason}"
    );
    assert!(s.containers().is_empty(), "{:?}", s.containers());
    assert_eq!(scheduling(&s, "never_x")["state"], "stopped");
    assert_eq!(s.invoke("calc_evaluate", json!({"expression": "1"})).0, 200);

    // A call the service never answers: a timeout at call_timeout_s, and
    // other calls are answered meanwhile.
    let (hung, quick) = std::thread::scope(|scope| {
        let hung = scope.spawn(|| {
            let started = Instant::now();
            (s.invoke_in("h1", "tiny_hang", json!({})), started.elapsed())
        });
        std::thread::sleep(Duration::from_millis(500));
        let quick = s.invoke("calc_evaluate", json!({"expression": "3"})).0;
        (hung.join().unwrap(), quick)
    });
    let ((status, body), took) = hung;
    assert_eq!((status, kind(&body)), (504, "timeout"), "{body}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(quick, 200);

    // A service that dies: restarted once, then degraded (503) instead of
    // restarting forever.
    let (status, body) = s.invoke_in("t1", "tiny_ok", json!({"n": 1}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["echo"], json!({"n": 1}));
    let (status, body) = s.invoke_in("t1", "tiny_crash", json!({}));
    assert_eq!((status, kind(&body)), (500, "tool_error"), "{body}");
    let (status, body) = s.invoke_in("t1", "tiny_crash", json!({}));
    assert_eq!(status, 500, "the restarted container crashes too: {body}");
    let (status, body) = s.invoke_in("t1", "tiny_ok", json!({}));
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("degraded"),
        "{body}"
    );
    assert_eq!(scheduling(&s, "tiny_ok")["state"], "degraded");

    // Seed 004's allocation rule: a second 0.75-CPU container would pass
    // the host's 1.0.
    let (status, body) = s.invoke_in("b1", "big_ok", json!({}));
    assert_eq!(status, 200, "{body}");
    let (status, body) = s.invoke_in("b2", "big_ok", json!({}));
    assert_eq!((status, kind(&body)), (429, "overloaded"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_cpu_share"),
        "{body}"
    );
    s.close_session("b1");
    let (status, body) = s.invoke_in("b2", "big_ok", json!({}));
    assert_eq!(
        status, 200,
        "the CPU is free again once b1's container is gone: {body}"
    );
}

#[test]
fn a_service_image_is_built_from_its_folder_and_rebuilt_when_it_changes() {
    if !require_docker() {
        return;
    }
    // Images an earlier run left behind (one that failed midway) would be
    // counted below.
    for repo in ["toolhost-build-built", "toolhost-build-broken"] {
        let out = std::process::Command::new("docker")
            .args(["images", "-q", repo])
            .output()
            .unwrap();
        for id in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            let _ = std::process::Command::new("docker")
                .args(["rmi", "-f", id])
                .output();
        }
    }
    let dockerfile = "FROM toolhost-node:latest\nCOPY tiny.py /srv/tiny.py\nCMD [\"python3\", \"-u\", \"/srv/tiny.py\"]\n";
    let manifest = tiny_manifest("")
        .replace(
            "image = \"toolhost-node:latest\"\n",
            "build = \"Dockerfile\"\n",
        )
        .replace(
            "command = [\"python3\", \"-u\", \"/toolkit/tiny.py\"]\n",
            "",
        );
    let broken = "[docker]\nbuild = \"Dockerfile\"\ninternal_port = 9000\n\
                  [[tools]]\nname = \"x\"\ndescription = \"x\"\ninput_schema = { type = \"object\" }\n";
    let s = Server::start(
        PluginsDir::new()
            .folder(
                "built",
                &[
                    ("built.toml", &manifest),
                    ("Dockerfile", dockerfile),
                    ("tiny.py", TINY),
                ],
            )
            .folder(
                "broken",
                &[
                    ("broken.toml", broken),
                    (
                        "Dockerfile",
                        "FROM toolhost-node:latest\nRUN echo compiling && exit 7\n",
                    ),
                ],
            ),
    );
    let images = || {
        let out = std::process::Command::new("docker")
            .args([
                "images",
                "--format",
                "{{.Repository}}:{{.Tag}}",
                "toolhost-build-built",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let (status, body) = s.invoke_in("b", "built_ok", json!({"v": 1}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["echo"], json!({"v": 1}));
    let first = images();
    assert_eq!(first.len(), 1, "{first:?}");
    let version = s.plugin("built").unwrap()["version"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(first[0], format!("toolhost-build-built:{}", &version[..12]));

    // The folder changes: a new image, and the new code answers.
    let path = s.plugins_dir().join("built/tiny.py");
    write_then_rename(
        &path,
        TINY.replace("\"echo\": json.loads", "\"v2\": True, \"echo\": json.loads")
            .as_bytes(),
    );
    let answered = wait_for(Duration::from_secs(60), || {
        let (status, body) = s.invoke_in("b2", "built_ok", json!({}));
        (status == 200 && body["result"]["v2"] == true).then_some(())
    });
    assert!(answered.is_some(), "the rebuilt image serves");
    let now = images();
    assert_eq!(now.len(), 2, "{now:?}");

    // A Dockerfile that fails: 503 with the build's words, then `failed`...
    let (status, body) = s.invoke("broken_x", json!({}));
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("building its image failed") && message.contains("code: 7"),
        "{message}"
    );
    let p = s.plugin("broken").unwrap();
    assert!(
        p["error"]
            .as_str()
            .unwrap()
            .contains("building its image failed"),
        "{p}"
    );
    for image in now {
        let _ = std::process::Command::new("docker")
            .args(["rmi", "-f", &image])
            .output();
    }
}

/// A Docker toolkit's node start as its check: a declared probe call runs
/// in a session of its own at each look, so a container is started (and
/// removed with the session); its answer is the toolkit's last check.
#[test]
fn a_declared_probe_starts_a_node_at_each_look() {
    if !require_docker() {
        return;
    }
    let manifest = tiny_manifest(
        "[health]\ninterval_s = 1\nprobe = { tool = \"ok\", input = { ping = 1 } }\n",
    );
    let s = Server::start(
        PluginsDir::new().folder("tiny", &[("tiny.toml", &manifest), ("tiny.py", TINY)]),
    );
    let checked = wait_for(Duration::from_secs(30), || {
        let h = s.get("/tools/tiny_ok").1["health"].clone();
        (h["last_check"] == "probe tiny_ok answered").then_some(h)
    });
    assert!(
        checked.is_some(),
        "{}\n{}",
        s.get("/tools/tiny_ok").1,
        s.log()
    );
    assert_eq!(s.get("/tools/tiny_ok").1["health"]["state"], "running");
    // A node started at each look (a look waits for its node, which a busy
    // machine starts in seconds, so the looks are counted, not timed).
    let again = wait_for(Duration::from_secs(30), || {
        (s.log().matches("node started").count() >= 2).then_some(())
    });
    assert!(
        again.is_some(),
        "a node started at each look: {}",
        s.log().matches("node started").count()
    );
}
