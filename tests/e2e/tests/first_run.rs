//! The first run as a new user makes it: the server started exactly as the
//! README's `make run` starts it (from the repository root, with the relative
//! paths `--plugins target/plugins` and a relative, fresh data directory),
//! then a shell, a notebook and a browser tool called through it. Relative
//! paths once reached Docker as bind-mount sources, which it took for volume
//! names and refused: every Docker tool answered 503 while the server looked
//! healthy. And a toolkit whose nodes cannot be created must say so.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_e2e::*;

/// A server started by hand (the harness uses absolute temporary paths).
struct Run {
    child: Child,
    base: String,
    log: PathBuf,
    data: PathBuf,
    http: reqwest::blocking::Client,
}

impl Drop for Run {
    fn drop(&mut self) {
        stop_gracefully(&mut self.child, Duration::from_secs(30));
        if std::thread::panicking() {
            eprintln!(
                "--- toolhost log ---\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        let scope = std::fs::canonicalize(&self.data)
            .map(|d| sha256_hex(d.to_string_lossy().as_bytes())[..16].to_owned());
        if let Ok(scope) = scope {
            let left = containers(&[format!("toolhost.scope={scope}")]);
            if !left.is_empty() {
                let _ = Command::new("docker")
                    .args(["rm", "-f"])
                    .args(&left)
                    .status();
            }
        }
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

impl Run {
    fn post(&self, path: &str, body: Value, cookie: Option<&str>) -> (u16, Value) {
        let mut r = self.http.post(format!("{}{path}", self.base)).json(&body);
        if let Some(c) = cookie {
            r = r.header("cookie", c);
        }
        let r = r.send().expect("POST");
        (r.status().as_u16(), r.json().unwrap_or(Value::Null))
    }

    fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .expect("GET");
        (r.status().as_u16(), r.text().unwrap_or_default())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `toolhost serve --bind ... --plugins <plugins> --data <data>` with the
/// repository root as the working directory, paths passed as given.
fn start(plugins: &str, data: &str) -> Run {
    let root = repo_root();
    let data_path = root.join(data);
    let _ = std::fs::remove_dir_all(&data_path);
    std::fs::create_dir_all(data_path.parent().unwrap()).unwrap();
    let port = free_port().unwrap();
    let log = root.join(format!("{data}.log"));
    let child = Command::new(binary())
        .current_dir(&root)
        .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
        .args(["--plugins", plugins, "--data", data])
        .env("TOOLHOST_LOG", "info")
        .env_remove("TOOLHOST_ADMIN_TOKEN")
        .env_remove("TOOLHOST_TOKEN")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start toolhost");
    let run = Run {
        child,
        base: format!("http://127.0.0.1:{port}"),
        log,
        data: data_path,
        http: reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap(),
    };
    let started = Instant::now();
    let up = wait_for(Duration::from_secs(90), || {
        run.http
            .get(format!("{}/health", run.base))
            .send()
            .ok()
            .filter(|r| r.status().is_success())
    });
    assert!(up.is_some(), "no /health within 90 s:\n{}", run.log());
    println!("first /health after {:?}", started.elapsed());
    // It answered at once: it listened before any plugin loaded.
    let log = run.log();
    let listening = log.find("toolhost listening").expect("listening logged");
    assert!(
        log.find("plugin loaded").is_none_or(|p| p > listening),
        "a plugin loaded before the server listened:\n{log}"
    );
    run
}

/// The `plugins` entry of `name` in `GET /plugins`.
fn plugin(run: &Run, name: &str) -> Value {
    let (_, text) = run.get("/plugins");
    let all: Value = serde_json::from_str(&text).unwrap();
    all["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn make_run_serves_every_docker_tool_with_relative_paths() {
    if !require_docker() {
        return;
    }
    let root = repo_root();
    assert!(
        root.join("target/plugins/shell/shell.toml").is_file(),
        "run `make plugins` first"
    );
    // As in the Makefile's `run` target; only the data directory differs
    // (fresh, and not the one a `make run` of the user may be using).
    let run = start("target/plugins", "target/e2e-first-run/data");
    assert!(
        !Path::new("target/e2e-first-run/data").is_absolute(),
        "the test must pass a relative path"
    );

    // Docker toolkits are listed with the rest, ready.
    for kit in ["shell", "notebook", "browser"] {
        let p = wait_for(Duration::from_secs(30), || {
            Some(plugin(&run, kit)).filter(|p| p["state"] == "ready")
        });
        assert!(p.is_some(), "{kit}: {}\n{}", plugin(&run, kit), run.log());
    }

    // Shell, through the native API, in a session of its own.
    let r = run
        .http
        .post(format!("{}/tools/shell_run/invoke", run.base))
        .header("x-toolhost-session", "first-run")
        .json(&json!({"params": {"command": "echo hello > hi.txt; cat hi.txt; pwd"}}))
        .send()
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().unwrap();
    assert_eq!(status, 200, "shell_run: {body}\n{}", run.log());
    let out = body["result"]["stdout"].as_str().unwrap_or_default();
    assert!(
        out.contains("hello") && out.contains("/workspace"),
        "{body}"
    );
    let ws = run.data.join("workspaces/first-run/hi.txt");
    assert!(ws.is_file(), "the shell wrote into the session workspace");

    // Notebook, through XAgent's protocol, with a figure: the binary item
    // must carry a name XAgent's client can append `.png` to and write.
    let r = run
        .http
        .post(format!("{}/get_cookie", run.base))
        .send()
        .unwrap();
    let cookie = xagent_cookie(&r);
    let (status, body) = run.post(
        "/execute_tool",
        json!({"tool_name": "notebook_execute", "arguments": {
            "code": "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\n6*7"
        }}),
        Some(&cookie),
    );
    assert_eq!(status, 200, "notebook_execute: {body}\n{}", run.log());
    assert_eq!(body["type"], "composite", "{body}");
    let items = body["data"].as_array().unwrap();
    let image = items
        .iter()
        .find(|i| i["type"] == "binary")
        .unwrap_or_else(|| panic!("no image in {body}"));
    // XAgent: `name = obj.get('name', uuid4().hex)`, then `name += '.png'`
    // unless it already ends so, then a file of that name is written.
    let name = image["name"]
        .as_str()
        .unwrap_or_else(|| panic!("XAgent's client needs a string name (or none at all): {image}"));
    assert!(name.ends_with(".png") && !name.contains('/'), "{name}");
    assert_eq!(image["media_type"], "image/png");

    // Browser (network "none" as shipped: a local file).
    let (status, body) = run.post(
        "/tools/browser_open/invoke",
        json!({"params": {"url": "file:///etc/os-release"}}),
        None,
    );
    assert_eq!(status, 200, "browser_open: {body}\n{}", run.log());
    assert!(body.to_string().contains("Debian"), "{body}");

    // The hot pool filled (it failed the same way before, logged at debug).
    let (_, metrics) = run.get("/metrics");
    assert!(
        metrics.contains("toolhost_docker_toolkit_available{toolkit=\"shell\"} 1"),
        "{metrics}"
    );
    assert!(
        !run.log().contains("docker toolkit unavailable"),
        "no toolkit was unavailable:\n{}",
        run.log()
    );
}

#[test]
fn a_toolkit_whose_nodes_cannot_be_created_says_so() {
    if !require_docker() {
        return;
    }
    // A hot pool of two nodes of an image that is not there: the pool fills
    // at start-up and fails, before any call.
    let plugins = PluginsDir::new()
        .add("calc", "calc")
        .add_toolkit_with("shell", |t| {
            t.replace("toolhost-node:latest", "toolhost-no-such-image:0")
        });
    let s = Server::start(plugins);
    let p = wait_for(Duration::from_secs(20), || {
        s.plugin("shell").filter(|p| p["state"] == "unavailable")
    })
    .unwrap_or_else(|| panic!("{:?}\n{}", s.plugin("shell"), s.log()));
    assert_eq!(p["backend"], "docker");
    let error = p["error"].as_str().unwrap();
    assert!(
        error.contains("toolhost-no-such-image:0") && error.contains("make node-image"),
        "{error}"
    );
    assert!(
        p["tools"].as_array().unwrap().contains(&json!("shell_run")),
        "{p}"
    );
    assert!(
        s.log().contains("WARN") && s.log().contains("docker toolkit unavailable"),
        "a warning in the log:\n{}",
        s.log()
    );
    let metrics = wait_for(Duration::from_secs(20), || {
        let r = s.client().get(s.url("/metrics")).send().ok()?;
        let text = r.text().ok()?;
        text.contains("toolhost_docker_node_create_failures_total{toolkit=\"shell\"}")
            .then_some(text)
    })
    .expect("the failure counter");
    assert!(
        metrics.contains("toolhost_docker_toolkit_available{toolkit=\"shell\"} 0"),
        "{metrics}"
    );
    // A call says the same, with 503; the wasm tools serve on.
    let (status, body) = s.invoke("shell_run", json!({"command": "true"}));
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    let (status, _) = s.invoke("calc_evaluate", json!({"expression": "1+1"}));
    assert_eq!(status, 200);
    assert_eq!(s.plugin("calc").unwrap()["state"], "ready");
}
