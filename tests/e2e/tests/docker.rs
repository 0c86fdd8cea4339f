//! Docker nodes behind the same dispatch: shell, notebook and browser
//! toolkits on a real engine and the real node image (`make node-image`),
//! and what happens when things go wrong.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::{PluginsDir, Server, cold, containers, kind, require_docker, wait_for};

const WAIT: Duration = Duration::from_secs(60);

/// The JSON item of a successful call's content.
fn json_item(body: &Value) -> Value {
    body["content"]
        .as_array()
        .and_then(|items| items.iter().find(|c| c["type"] == "json"))
        .map(|c| c["json"].clone())
        .unwrap_or(Value::Null)
}

fn run(s: &Server, session: &str, command: &str) -> Value {
    let (status, body) = s.invoke_in(session, "shell_run", json!({ "command": command }));
    assert_eq!(status, 200, "{command}: {body}");
    json_item(&body)
}

#[test]
fn shell_nodes_are_lazy_keep_state_and_share_the_workspace() {
    if !require_docker() {
        return;
    }
    let s = Server::start(
        PluginsDir::new()
            .add("files", "files")
            .add_toolkit_with("shell", cold),
    );
    let ids = s.tool_ids();
    for id in ["shell_run", "shell_read_output", "shell_kill", "files_read"] {
        assert!(ids.iter().any(|i| i == id), "{id} in {ids:?}");
    }
    let (_, tool) = s.get("/tools/shell_run");
    assert_eq!(tool["backend"], "docker");
    // Its limits: the common ones and the node's own, no wasm fields.
    let limits = &tool["limits"];
    assert!(limits["timeout_ms"].is_u64(), "{limits}");
    assert!(
        limits["memory_mb"].is_u64() && limits["cpus"].is_f64(),
        "{limits}"
    );
    assert!(limits.get("fuel").is_none(), "{limits}");

    // A session that only uses wasm tools costs no container.
    let (status, _) = s.invoke_in(
        "w1",
        "files_write",
        json!({"path": "a.txt", "content": "from wasm\n"}),
    );
    assert_eq!(status, 200);
    assert!(s.containers().is_empty());

    // The first shell call starts the node, which sees the wasm tool's file.
    let out = run(
        &s,
        "w1",
        "cat a.txt; echo oops >&2; cd /tmp && export X=42; (exit 3)",
    );
    assert_eq!(out["stdout"], "from wasm\n");
    assert_eq!(out["stderr"], "oops\n");
    assert_eq!(out["exit_code"], 3);
    assert_eq!(out["finished"], true);
    assert_eq!(s.containers().len(), 1);

    // State survives between calls; files flow back to the wasm tools.
    let out = run(&s, "w1", "pwd; echo $X; echo from-shell > /workspace/b.txt");
    assert_eq!(out["stdout"], "/tmp\n42\n");
    let (_, body) = s.invoke_in("w1", "files_read", json!({"path": "b.txt"}));
    assert_eq!(body["result"], "from-shell\n");

    // A long command returns what it has, then read_output finishes it.
    let (_, body) = s.invoke_in(
        "w1",
        "shell_run",
        json!({"command": "echo start; sleep 2; echo done", "timeout_s": 0.5}),
    );
    let first = json_item(&body);
    assert_eq!(first["finished"], false, "{body}");
    let (_, body) = s.invoke_in("w1", "shell_run", json!({"command": "echo no"}));
    assert_eq!(
        kind(&body),
        "invalid_input",
        "one command at a time: {body}"
    );
    let (_, body) = s.invoke_in("w1", "shell_read_output", json!({"timeout_s": 10}));
    let rest = json_item(&body);
    assert_eq!(rest["finished"], true, "{body}");
    let all = format!(
        "{}{}",
        first["stdout"].as_str().unwrap(),
        rest["stdout"].as_str().unwrap()
    );
    assert_eq!(all, "start\ndone\n");

    // Kill a command that would not end.
    let (_, body) = s.invoke_in(
        "w1",
        "shell_run",
        json!({"command": "sleep 100", "timeout_s": 0.5}),
    );
    assert_eq!(json_item(&body)["finished"], false);
    let (status, body) = s.invoke_in("w1", "shell_kill", json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(json_item(&body)["killed"], true, "{body}");
    assert_eq!(run(&s, "w1", "echo alive")["stdout"], "alive\n");

    // Another session has its own node and workspace.
    let out = run(&s, "w2", "cat a.txt");
    assert_ne!(out["exit_code"], 0);
    assert_eq!(s.containers().len(), 2);

    // Closing the sessions removes their nodes.
    for id in ["w1", "w2"] {
        s.close_session(id);
    }
    assert!(s.wait_no_containers(), "{:?}", s.containers());
}

#[test]
fn a_hot_pool_hands_started_nodes_to_new_sessions() {
    if !require_docker() {
        return;
    }
    let s = Server::start(PluginsDir::new().add("files", "files").add_toolkit("shell"));
    // The pool fills before any call.
    assert!(
        wait_for(WAIT, || (s.containers().len() == 2).then_some(())).is_some(),
        "{}",
        s.log()
    );
    let pooled = s.containers();
    let (status, _) = s.invoke_in(
        "h1",
        "files_write",
        json!({"path": "early.txt", "content": "kept\n"}),
    );
    assert_eq!(status, 200);
    let out = run(&s, "h1", "cat early.txt; echo late > late.txt");
    assert_eq!(out["stdout"], "kept\n");
    let (_, body) = s.invoke_in("h1", "files_read", json!({"path": "late.txt"}));
    assert_eq!(
        body["result"], "late\n",
        "the pooled node's /workspace is the session's"
    );
    // The session got a pooled node, and the pool refills.
    let now = wait_for(WAIT, || Some(s.containers()).filter(|c| c.len() == 3)).expect("refilled");
    assert!(pooled.iter().all(|p| now.contains(p)));

    // A session whose first call takes a pooled node has its workspace
    // too: an MCP result links the file its shell wrote.
    let mut c = toolhost_e2e::mcp::McpClient::new(&s);
    c.initialize("2025-11-25");
    let r = c.call(1, "shell_run", json!({"command": "echo hi > made.txt"}));
    let linked = r["result"]["content"].as_array().is_some_and(|items| {
        items
            .iter()
            .any(|b| b["type"] == "resource_link" && b["uri"] == "toolhost://workspace/made.txt")
    });
    assert!(linked, "{r}");
}

#[test]
fn notebook_cells_keep_state_return_images_and_survive_a_timeout() {
    if !require_docker() {
        return;
    }
    let s = Server::start(PluginsDir::new().add_toolkit("notebook"));
    let exec = |code: &str, timeout: f64| {
        let (status, body) = s.invoke_in(
            "nb",
            "notebook_execute",
            json!({"code": code, "timeout_s": timeout}),
        );
        assert_eq!(status, 200, "{code}: {body}");
        body
    };
    exec("x = 21", 60.0);
    let out = json_item(&exec("print('hi'); x * 2", 30.0));
    assert_eq!(out["stdout"], "hi\n");
    assert_eq!(out["result"], "42");

    let out = json_item(&exec("1/0", 30.0));
    assert_eq!(out["error"]["ename"], "ZeroDivisionError", "{out}");
    assert!(
        out["error"]["traceback"]
            .to_string()
            .contains("ZeroDivisionError")
    );

    let body = exec(
        "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()",
        60.0,
    );
    let image = body["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "binary")
        .unwrap_or_else(|| panic!("no image in {body}"));
    assert_eq!(image["media_type"], "image/png");
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD
        .decode(image["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    // A cell that never ends is interrupted; the kernel and its state stay.
    let out = json_item(&exec("while True: pass", 2.0));
    assert_eq!(out["timed_out"], true, "{out}");
    assert_eq!(json_item(&exec("x", 30.0))["result"], "21");

    let (status, _) = s.invoke_in("nb", "notebook_restart", json!({}));
    assert_eq!(status, 200);
    let out = json_item(&exec("x", 30.0));
    assert_eq!(out["error"]["ename"], "NameError", "{out}");
}

/// Serve one fixed page on 127.0.0.1 for `n` requests.
fn serve_page(html: &'static str, n: usize) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(n) {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}",
                html.len()
            );
        }
    });
    port
}

#[test]
fn the_browser_reads_and_shoots_local_pages() {
    if !require_docker() {
        return;
    }
    let s = Server::start(PluginsDir::new().add_toolkit_with("browser", |m| {
        m.replace("network = \"none\"", "network = \"host\"")
    }));
    let port = serve_page(
        "<html><head><title>Test page</title></head><body><h1>Hello toolhost</h1>\
         <p>Some <b>readable</b> text.</p><a href=\"/next\">Next page</a></body></html>",
        8,
    );
    let url = format!("http://127.0.0.1:{port}/");
    let (status, body) = s.invoke_in("br", "browser_open", json!({ "url": url }));
    assert_eq!(status, 200, "{body}");
    let out = json_item(&body);
    assert_eq!(out["title"], "Test page");
    let text = out["text"].as_str().unwrap();
    assert!(
        text.contains("Hello toolhost") && text.contains("readable"),
        "{text}"
    );
    assert!(
        out["links"]
            .to_string()
            .contains(&format!("http://127.0.0.1:{port}/next")),
        "{out}"
    );

    let (status, body) = s.invoke_in("br", "browser_screenshot", json!({}));
    assert_eq!(status, 200, "{body}");
    let image = body["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "binary")
        .expect("png");
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD
        .decode(image["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    let (status, body) = s.invoke_in("br", "browser_open", json!({"url": "http://127.0.0.1:9/"}));
    assert_eq!((status, kind(&body)), (500, "tool_error"), "{body}");
    let (status, body) = s.invoke_in("br", "browser_open", json!({"url": "javascript:alert(1)"}));
    assert_eq!((status, kind(&body)), (422, "invalid_input"), "{body}");
}

#[test]
fn a_node_killed_mid_call_is_replaced_with_a_note() {
    if !require_docker() {
        return;
    }
    let s = Server::start(PluginsDir::new().add_toolkit_with("shell", cold));
    run(&s, "k", "export STATE=1");
    let [container] = s.containers().try_into().expect("one node");
    let call = {
        let url = s.url("/tools/shell_run/invoke");
        std::thread::spawn(move || {
            let r = reqwest::blocking::Client::new()
                .post(url)
                .header("x-toolhost-session", "k")
                .json(&json!({"params": {"command": "sleep 30", "timeout_s": 60}}))
                .send()
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().unwrap())
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    let killed = std::process::Command::new("docker")
        .args(["kill", &container])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(killed.success());
    let (status, body) = call.join().unwrap();
    assert_eq!((status, kind(&body)), (500, "tool_error"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stopped during the call")
    );

    let (status, body) = s.invoke_in("k", "shell_run", json!({"command": "echo ${STATE:-gone}"}));
    assert_eq!(status, 200, "{body}");
    assert!(
        body["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("fresh node"),
        "{body}"
    );
    assert_eq!(json_item(&body)["stdout"], "gone\n");
    assert!(
        wait_for(WAIT, || (!containers(&[]).contains(&container))
            .then_some(()))
        .is_some()
    );
}

#[test]
fn floods_fork_bombs_and_rm_rf_stay_inside_the_node() {
    if !require_docker() {
        return;
    }
    let mut s = Server::start(PluginsDir::new().add_toolkit_with("shell", cold));
    let canary = s.data.path().join("canary.txt");
    std::fs::write(&canary, "still here").unwrap();

    // 50 MB of output: truncated by the driver, the server stays small.
    let out = run(&s, "f", "head -c 50000000 /dev/zero | tr '\\0' x; echo");
    assert_eq!(out["truncated"], true);
    assert!(out["stdout"].as_str().unwrap().len() < 4 << 20);
    assert!(
        s.rss_kib().unwrap() < 512 * 1024,
        "server RSS {} KiB",
        s.rss_kib().unwrap()
    );
    assert_eq!(run(&s, "f", "echo ok")["stdout"], "ok\n");

    // A fork bomb hits the pids limit; kill cleans up; the shell answers.
    let (status, body) = s.invoke_in(
        "f",
        "shell_run",
        json!({"command": "bomb() { bomb | bomb & }; bomb", "timeout_s": 3}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = s.invoke_in("f", "shell_kill", json!({}));
    assert_eq!(status, 200, "{body}");
    let out = run(&s, "f", "echo survived");
    assert_eq!(out["stdout"], "survived\n");
    assert!(s.is_alive());

    // rm -rf / inside the node: the host is untouched.
    let (status, body) = s.invoke_in(
        "f",
        "shell_run",
        json!({"command": "rm -rf --no-preserve-root / 2>/dev/null; echo done", "timeout_s": 60}),
    );
    assert!(status == 200 || status == 500, "{body}");
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "still here");
    assert!(
        s.plugins_dir().join("shell/driver.py").is_file(),
        "the read-only driver mount held"
    );
    assert!(s.is_alive());
    // Another session is unaffected.
    assert_eq!(run(&s, "g", "echo fine")["stdout"], "fine\n");
}

#[test]
fn twenty_sessions_at_once_leave_no_containers() {
    if !require_docker() {
        return;
    }
    let s = Server::start(PluginsDir::new().add_toolkit_with("shell", cold));
    let threads: Vec<_> = (0..20)
        .map(|i| {
            let url = s.url("/tools/shell_run/invoke");
            std::thread::spawn(move || {
                let r = reqwest::blocking::Client::new()
                    .post(url)
                    .header("x-toolhost-session", format!("many-{i}"))
                    .json(&json!({"params": {"command": format!("echo {i}")}}))
                    .send()
                    .unwrap();
                (r.status().as_u16(), r.json::<Value>().unwrap())
            })
        })
        .collect();
    for (i, t) in threads.into_iter().enumerate() {
        let (status, body) = t.join().unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(json_item(&body)["stdout"], format!("{i}\n"));
    }
    assert_eq!(s.containers().len(), 20);
    for i in 0..20 {
        s.close_session(&format!("many-{i}"));
    }
    assert!(s.wait_no_containers(), "{:?}", s.containers());
}

#[test]
fn containers_of_a_killed_server_are_removed_at_restart() {
    if !require_docker() {
        return;
    }
    let mut s = Server::start(PluginsDir::new().add_toolkit_with("shell", cold));
    run(&s, "o1", "true");
    run(&s, "o2", "true");
    let before = s.containers();
    assert_eq!(before.len(), 2);
    s.kill();
    assert_eq!(s.containers().len(), 2, "SIGKILL leaves them behind");
    s.restart().unwrap();
    assert!(
        wait_for(WAIT, || s.containers().is_empty().then_some(())).is_some(),
        "{}",
        s.log()
    );
    assert_eq!(run(&s, "o1", "echo back")["stdout"], "back\n");
}

#[test]
fn without_an_engine_heavy_tools_are_unavailable_and_wasm_tools_serve() {
    // Needs no engine: the server is pointed at a socket where none listens.
    let s = Server::start_env(
        PluginsDir::new()
            .add("calc", "calc")
            .add_toolkit_with("shell", cold),
        None,
        &[("DOCKER_HOST", "unix:///nonexistent/docker.sock")],
    )
    .unwrap();
    assert!(s.tool_ids().iter().any(|t| t == "shell_run"));
    let (status, body) = s.invoke_in("u", "shell_run", json!({"command": "true"}));
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Docker engine"),
        "{body}"
    );
    let (status, _) = s.invoke("calc_evaluate", json!({"expression": "1+1"}));
    assert_eq!(status, 200);
}

#[test]
fn a_wasm_plugin_cannot_take_a_docker_toolkits_name() {
    let calc = std::fs::read(toolhost_e2e::component("calc").0).unwrap();
    let s = Server::start_env(
        PluginsDir::new()
            .add_toolkit_with("shell", cold)
            .write("shell.wasm", &calc),
        None,
        &[("DOCKER_HOST", "unix:///nonexistent/docker.sock")],
    )
    .unwrap();
    // Both entries named `shell` are listed: the Docker toolkit, and the
    // wasm plugin that could not take its name.
    let of = |backend: &str| {
        let (_, all) = s.get("/plugins");
        all["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "shell" && p["backend"] == backend)
            .cloned()
    };
    let status = of("wasm").expect("listed");
    assert_eq!(status["state"], "failed");
    assert!(
        status["error"]
            .as_str()
            .unwrap()
            .contains("taken by the docker entry `shell`"),
        "{status}"
    );
    let ids = s.tool_ids();
    assert!(ids.contains(&"shell_run".to_owned()) && !ids.contains(&"shell_evaluate".to_owned()));
    // Deleting the clashing file does not unload the Docker toolkit (which
    // `GET /plugins` lists too, after the failed wasm plugin of its name).
    std::fs::remove_file(s.plugins_dir().join("shell.wasm")).unwrap();
    let wasm_gone = wait_for(WAIT, || of("wasm").is_none().then_some(()));
    assert!(wasm_gone.is_some(), "{:?}", of("wasm"));
    assert!(of("docker").is_some());
    assert!(s.tool_ids().contains(&"shell_run".to_owned()));
}

#[test]
fn beyond_max_containers_the_least_recently_used_node_is_evicted() {
    if !require_docker() {
        return;
    }
    let s = Server::start(PluginsDir::new().add_toolkit_with("shell", |m| {
        cold(m).replace("max_containers = 32", "max_containers = 2")
    }));
    run(&s, "lru-a", "export A=1");
    run(&s, "lru-b", "export B=1");
    assert_eq!(s.containers().len(), 2);
    // A third session: the cap holds, `lru-a` (least recently used) makes room.
    run(&s, "lru-c", "true");
    assert!(wait_for(WAIT, || (s.containers().len() == 2).then_some(())).is_some());
    assert_eq!(
        run(&s, "lru-b", "echo ${B:-gone}")["stdout"],
        "1\n",
        "b kept its node"
    );
    let (status, body) = s.invoke_in("lru-a", "shell_run", json!({"command": "echo ${A:-gone}"}));
    assert_eq!(status, 200, "{body}");
    assert!(
        body["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("make room"),
        "{body}"
    );
    assert_eq!(json_item(&body)["stdout"], "gone\n");
    assert!(s.containers().len() <= 2);
}

#[test]
fn a_graceful_shutdown_removes_every_node_and_the_pool() {
    if !require_docker() {
        return;
    }
    let mut s = Server::start(PluginsDir::new().add_toolkit("shell"));
    assert!(wait_for(WAIT, || (s.containers().len() == 2).then_some(())).is_some());
    run(&s, "bye-1", "true");
    run(&s, "bye-2", "true");
    assert!(s.containers().len() >= 3);
    s.terminate();
    let left = s.containers();
    assert!(
        left.is_empty(),
        "left behind by a graceful shutdown: {left:?}\n{}",
        s.log()
    );
}

#[test]
fn an_engines_paths_map_its_bind_mounts() {
    if !require_docker() {
        return;
    }
    // A remote engine sees toolhost's folders elsewhere (a shared
    // filesystem): here, /tmp through a symlink, so the mapped path is
    // another spelling of the same folder, and the bind must use it.
    let alias = std::env::temp_dir().join(format!("th-alias-{}", std::process::id()));
    let _ = std::fs::remove_file(&alias);
    std::os::unix::fs::symlink(std::env::temp_dir(), &alias).expect("symlink");
    let config = format!(
        r#"
[[docker.engines]]
name = "far"
url = "unix:///var/run/docker.sock"
[docker.engines.paths]
"{tmp}" = "{alias}"
"#,
        tmp = std::env::temp_dir().display(),
        alias = alias.display()
    );
    let s = Server::start_with(
        PluginsDir::new().add_toolkit_with("shell", cold),
        Some(&config),
    )
    .expect("server starts");
    let out = run(
        &s,
        "far1",
        "echo through the map > mapped.txt && cat mapped.txt",
    );
    assert_eq!(out["stdout"], "through the map\n", "{out}\n{}", s.log());
    let written = s.data.path().join("data/workspaces/far1/mapped.txt");
    assert_eq!(
        std::fs::read_to_string(&written).ok().as_deref(),
        Some("through the map\n")
    );
    // The container's binds name the mapped paths.
    let id = s.containers().pop().expect("a node");
    let binds = std::process::Command::new("docker")
        .args(["inspect", "-f", "{{json .HostConfig.Binds}}", &id])
        .output()
        .expect("docker inspect");
    let binds = String::from_utf8_lossy(&binds.stdout).into_owned();
    assert!(
        binds.contains(&format!("{}/", alias.display())) && binds.contains(":/workspace:rw"),
        "{binds}"
    );
    drop(s);
    let _ = std::fs::remove_file(&alias);
}
