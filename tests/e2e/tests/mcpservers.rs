//! MCP servers as toolkits (toolhost as an MCP gateway), against the MCP
//! reference server nobody here wrote (`@modelcontextprotocol/server-everything`,
//! pinned in `tests/mcpservers/`), run in its streamable HTTP mode on
//! 127.0.0.1: its tools in the catalog, called on every surface, progress,
//! time limits, a server that goes away, one that never initializes, a name
//! already taken.

use std::io::Read;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_e2e::mcp::McpClient;
use toolhost_e2e::services::Service;
use toolhost_e2e::xagent::XAgent;
use toolhost_e2e::*;

fn manifest(service: &Service, extra: &str) -> String {
    format!("{}{extra}\n", service.mcp_manifest())
}

#[test]
fn a_remote_mcp_server_is_mounted_and_served_on_every_surface() {
    let everything = Service::everything();
    let s = Server::start(PluginsDir::new().add("calc", "calc").folder(
        "every",
        &[("every.toml", &manifest(&everything, "timeout_ms = 3000"))],
    ));
    let p = s.plugin("every").unwrap();
    assert_eq!(
        (p["state"].as_str(), p["backend"].as_str()),
        (Some("ready"), Some("mcp")),
        "{p}"
    );
    let ids = s.tool_ids();
    for id in [
        "every_echo",
        "every_get-sum",
        "every_trigger-long-running-operation",
    ] {
        assert!(ids.iter().any(|t| t == id), "{id} in {ids:?}");
    }
    // Schemas as toolhost's own: `properties` always present.
    let (_, tools) = s.get("/tools?format=mcp");
    for t in tools["tools"].as_array().unwrap() {
        assert!(t["inputSchema"]["properties"].is_object(), "{t}");
    }

    // Native.
    let (status, body) = s.invoke("every_get-sum", json!({"a": 2, "b": 40}));
    assert_eq!(status, 200, "{body}");
    assert!(
        body["content"][0]["text"].as_str().unwrap().contains("42"),
        "{body}"
    );
    let (status, body) = s.invoke("every_get-tiny-image", json!({}));
    assert_eq!(status, 200, "{body}");
    assert!(
        body["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "binary" && c["media_type"] == "image/png"),
        "{body}"
    );
    let (status, body) = s.invoke(
        "every_get-structured-content",
        json!({"location": "Chicago"}),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body["result"]["temperature"].is_number(), "{body}");
    // Checked against the server's schema before it is sent.
    let (status, body) = s.invoke("every_get-sum", json!({"a": "two"}));
    assert_eq!((status, kind(&body)), (422, "invalid_input"), "{body}");

    // Progress: the server's notifications become the stream's events.
    let r = reqwest::blocking::Client::new()
        .post(s.url("/tools/every_trigger-long-running-operation/invoke"))
        .json(&json!({"params": {"duration": 1, "steps": 4}, "stream": true}))
        .send()
        .unwrap();
    let text = r.text().unwrap();
    let progress = text.matches("event: progress").count();
    // The last one races the answer (the server sends them back to back;
    // toolhost waits 20 ms for it): at least three must arrive.
    assert!((3..=4).contains(&progress), "{text}");
    assert!(
        text.contains("\"total\":4.0") && text.contains("Long running operation completed"),
        "{text}"
    );

    // The time limit cancels the call (504), and the server keeps serving.
    let started = Instant::now();
    let (status, body) = s.invoke(
        "every_trigger-long-running-operation",
        json!({"duration": 10, "steps": 2}),
    );
    assert_eq!((status, kind(&body)), (504, "timeout"), "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        s.invoke("every_echo", json!({"message": "still here"})).0,
        200
    );

    // XAgent.
    let x = XAgent::connect(&s);
    let executed = x.execute("every_echo", json!({"message": "via xagent"}));
    assert_eq!(executed, (200, json!("Echo: via xagent")));
    // MCP (toolhost's own surface, forwarding to the server).
    let mut mcp = McpClient::new(&s);
    mcp.initialize("2025-06-18");
    let answer = mcp.call(2, "every_echo", json!({"message": "via mcp"}));
    assert_eq!(
        answer["result"]["content"][0]["text"], "Echo: via mcp",
        "{answer}"
    );

    // The server goes away: its calls are 503, the rest of the host serves.
    drop(everything);
    let (status, body) = s.invoke("every_echo", json!({"message": "x"}));
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    assert_eq!(
        s.invoke("calc_evaluate", json!({"expression": "1+1"})).0,
        200
    );
}

#[test]
fn servers_that_never_initialize_or_take_a_used_name_are_refused() {
    // Accepts connections and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for mut conn in listener.incoming().flatten() {
            let _ = conn.read(&mut [0; 1024]);
            held.push(conn);
        }
    });
    let silent = format!(
        "[mcp]\nurl = \"http://127.0.0.1:{port}/mcp\"\nallow = [\"127.0.0.1:{port}\"]\ninit_timeout_ms = 1500\n"
    );
    let everything = Service::everything();
    let started = Instant::now();
    let s = Server::start(
        PluginsDir::new()
            .add("calc", "calc")
            .folder("silent", &[("silent.toml", &silent)])
            .folder(
                "offlist",
                &[(
                    "offlist.toml",
                    &format!("[mcp]\nurl = \"{}\"\n", everything.url("/mcp")),
                )],
            ),
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let p = s.plugin("silent").unwrap();
    assert_eq!(p["state"], "failed", "{p}");
    assert!(
        p["error"]
            .as_str()
            .unwrap()
            .contains("did not finish initialize within 1500 ms"),
        "{p}"
    );
    let p = s.plugin("offlist").unwrap();
    assert_eq!(p["state"], "failed", "{p}");
    assert!(p["error"].as_str().unwrap().contains("[mcp] allow"), "{p}");
    // A server dropped in under a name a running plugin has: refused with
    // the reason, and the plugin keeps serving.
    let staging = s.plugins_dir().join(".calc");
    std::fs::create_dir_all(&staging).unwrap();
    std::fs::write(staging.join("calc.toml"), manifest(&everything, "")).unwrap();
    std::fs::rename(&staging, s.plugins_dir().join("calc")).unwrap();
    let refused = wait_for(Duration::from_secs(15), || {
        let (_, plugins) = s.get("/plugins");
        plugins["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "calc" && p["backend"] == "mcp" && p["state"] == "failed")
            .cloned()
    })
    .expect("the clashing server is listed as failed");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("taken by the wasm entry `calc`"),
        "{refused}"
    );
    assert_eq!(
        s.invoke("calc_evaluate", json!({"expression": "2+2"})).0,
        200
    );
}

/// `[mcp] command` for the npm server `package` (its `dist/index.js`), the
/// install mounted read-only at /opt/mcp.
fn stdio_manifest(package: &str, args: &[&str]) -> String {
    let install = mcp_install();
    let mut command = vec![
        "node".to_owned(),
        format!("/opt/mcp/node_modules/@modelcontextprotocol/{package}/dist/index.js"),
    ];
    command.extend(args.iter().map(|a| a.to_string()));
    format!(
        "[mcp]\ncommand = {command:?}\nmount = \"{}\"\n{CONTAINER_INIT_TIMEOUT}",
        install.display()
    )
}

#[test]
fn stdio_servers_run_in_nodes_and_are_restarted_when_they_exit() {
    if !require_docker() {
        return;
    }
    let s = Server::start(
        PluginsDir::new()
            .add("calc", "calc")
            .folder(
                "evs",
                &[("evs.toml", &stdio_manifest("server-everything", &["stdio"]))],
            )
            .folder(
                "fs",
                &[(
                    "fs.toml",
                    &stdio_manifest("server-filesystem", &["/toolkit"]),
                )],
            )
            .folder("time", &[("time.toml", &python_manifest())]),
    );
    for name in ["evs", "fs", "time"] {
        let p = s.plugin(name).unwrap();
        assert_eq!(p["state"], "ready", "{p}");
        // The mount was checked against what its locks installed.
        let record = &p["provenance"]["installed_from_locks"];
        assert!(record["files"].as_u64().unwrap() > 1000, "{p}");
        assert!(record["npm_lock"].as_str().unwrap().starts_with("sha256:"));
        assert!(p.get("warnings").is_none(), "{p}");
    }
    let (status, body) = s.invoke("evs_get-sum", json!({"a": 20, "b": 22}));
    assert_eq!(status, 200, "{body}");
    assert!(
        body["content"][0]["text"].as_str().unwrap().contains("42"),
        "{body}"
    );
    // The filesystem server sees only what it was given: its folder.
    let (status, body) = s.invoke("fs_list_directory", json!({"path": "/toolkit"}));
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("fs.toml"), "{body}");
    let (status, body) = s.invoke("fs_read_text_file", json!({"path": "/etc/hostname"}));
    assert!(
        status != 200 || body.to_string().contains("denied"),
        "{body}"
    );
    // A Python server (mcp-server-time, from PyPI) too.
    let (status, body) = s.invoke("time_get_current_time", json!({"timezone": "UTC"}));
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("UTC"), "{body}");
    // Each in a node with no network.
    let containers = s.containers();
    assert_eq!(containers.len(), 3, "{containers:?}");
    for c in &containers {
        let out = std::process::Command::new("docker")
            .args([
                "inspect",
                "-f",
                "{{.HostConfig.NetworkMode}} {{.HostConfig.CapDrop}}",
                c,
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("none") && text.contains("ALL"), "{text}");
    }
    // The server's tools/list_changed (sent after initialize) was followed
    // (within the half-second its notices are gathered for).
    let followed = wait_for(Duration::from_secs(5), || {
        s.log()
            .contains("its tool list changed; reloading")
            .then_some(())
    });
    assert!(followed.is_some(), "{}", s.log());

    // The server exits: the call in the way gets an error, the next ones a
    // restarted server; the toolkit says it was restarted.
    let evs = containers_of(&s, "evs");
    let _ = std::process::Command::new("docker")
        .args(["kill", &evs[0]])
        .output();
    std::thread::sleep(Duration::from_millis(300));
    let (status, body) = s.invoke("evs_echo", json!({"message": "x"}));
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    let back = wait_for(Duration::from_secs(30), || {
        (s.invoke("evs_echo", json!({"message": "back"})).0 == 200).then_some(())
    });
    assert!(back.is_some(), "the server was restarted");
    // (The restarted server's own tools/list_changed may be reloading it a
    // moment longer: the status is read once that is done.)
    let said = wait_for(Duration::from_secs(10), || {
        let p = s.plugin("evs").unwrap();
        p["error"]
            .as_str()
            .unwrap_or("")
            .contains("restarted 1 time")
            .then_some(())
    });
    assert!(said.is_some(), "{}", s.plugin("evs").unwrap());
    // The dead container goes once the old connection is dropped (the
    // reload swaps it out).
    let gone = wait_for(Duration::from_secs(10), || {
        let now = containers_of(&s, "evs");
        (now.len() == 1 && now[0] != evs[0]).then_some(())
    });
    assert!(
        gone.is_some(),
        "the dead container went: {:?}",
        containers_of(&s, "evs")
    );
    assert_eq!(s.invoke("calc_evaluate", json!({"expression": "1"})).0, 200);
}

/// `mcp-server-time` (PyPI), installed with `pip --target` beside the npm
/// servers, run with the node's Python.
fn python_manifest() -> String {
    let install = mcp_install();
    format!(
        "[mcp]\ncommand = [\"python3\", \"-m\", \"mcp_server_time\", \"--local-timezone\", \"UTC\"]\n\
         mount = \"{}\"\nenv = {{ PYTHONPATH = \"/opt/mcp/python\" }}\n{CONTAINER_INIT_TIMEOUT}",
        install.display()
    )
}

fn containers_of(s: &Server, toolkit: &str) -> Vec<String> {
    containers(&[
        format!("toolhost.scope={}", s.scope()),
        format!("toolhost.toolkit={toolkit}"),
    ])
}

#[test]
fn a_per_session_server_sees_its_sessions_workspace_and_goes_with_it() {
    if !require_docker() {
        return;
    }
    let manifest = stdio_manifest("server-filesystem", &["/workspace"]) + "per_session = true\n";
    let s = Server::start(
        PluginsDir::new()
            .add("files", "files")
            .folder("wsfs", &[("wsfs.toml", &manifest)]),
    );
    assert_eq!(s.plugin("wsfs").unwrap()["state"], "ready");
    for (session, text) in [("alice", "from alice"), ("bob", "from bob")] {
        let (status, body) = s.invoke_in(
            session,
            "files_write",
            json!({"path": "note.txt", "content": text}),
        );
        assert_eq!(status, 200, "{body}");
    }
    // Each session's server reads that session's workspace, and only it.
    for (session, text) in [("alice", "from alice"), ("bob", "from bob")] {
        let (status, body) = s.invoke_in(
            session,
            "wsfs_read_text_file",
            json!({"path": "/workspace/note.txt"}),
        );
        assert_eq!(status, 200, "{body}");
        assert!(
            body["content"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["text"] == text),
            "{body}"
        );
    }
    // Through toolhost's /mcp, the server's structured result arrives as
    // `structuredContent` beside its text (issue #35: the official Python
    // SDK refused every tool whose output schema it had lost).
    let mut mcp = toolhost_e2e::mcp::McpClient::new(&s);
    mcp.header = Some(("x-toolhost-session".into(), "bob".into()));
    mcp.initialize("2025-11-25");
    let listed = mcp.request(2, "tools/list", json!({}));
    let read = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "wsfs_read_text_file")
        .cloned()
        .unwrap_or_default();
    let r = mcp.call(
        3,
        "wsfs_read_text_file",
        json!({"path": "/workspace/note.txt"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(read["outputSchema"].is_object(), "{read}");
    assert!(r["result"]["structuredContent"].is_object(), "{r}");
    assert!(r["result"].to_string().contains("from bob"), "{r}");
    let (status, body) = s.invoke_in(
        "alice",
        "wsfs_write_file",
        json!({"path": "/workspace/made.txt", "content": "by the server"}),
    );
    assert_eq!(status, 200, "{body}");
    let (_, body) = s.invoke_in("alice", "files_read", json!({"path": "made.txt"}));
    assert_eq!(body["result"], json!("by the server"), "{body}");
    let servers = || {
        containers(&[
            format!("toolhost.scope={}", s.scope()),
            "toolhost.toolkit=wsfs".into(),
        ])
    };
    // The listing server and one per session.
    assert_eq!(servers().len(), 3, "{:?}", servers());
    s.close_session("alice");
    assert_eq!(
        servers().len(),
        2,
        "alice's server went with her session: {:?}",
        servers()
    );
    let (status, _) = s.invoke_in("bob", "wsfs_list_directory", json!({"path": "/workspace"}));
    assert_eq!(status, 200);
}

#[test]
fn a_misbehaving_server_costs_only_its_own_calls() {
    if !require_docker() {
        return;
    }
    let (manifest, script) = misbehaving("");
    let s = Server::start(PluginsDir::new().add("calc", "calc").folder(
        "bad",
        &[("bad.toml", &manifest), ("misbehaving.py", &script)],
    ));
    // The tool whose schema is not a schema is left out, with a warning.
    let ids = s.tool_ids();
    for id in ["bad_ok", "bad_crash", "bad_flood"] {
        assert!(ids.iter().any(|t| t == id), "{id}: {ids:?}");
    }
    assert!(!ids.iter().any(|t| t == "bad_bad_schema"), "{ids:?}");
    assert!(
        s.log().contains("its input schema is not valid"),
        "{}",
        s.log()
    );

    // 20 MiB without a newline on the protocol stream: dropped (bounded), and
    // the answer after it still arrives; the host's memory stays flat.
    let rss = s.rss_kib();
    let (status, body) = s.invoke("bad_flood", json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"], json!("flood: fine"));
    if let (Some(before), Some(after)) = (rss, s.rss_kib()) {
        assert!(after < before + 64 * 1024, "{before} -> {after} KiB");
    }

    // A crash in the middle of a call: that call fails, the next ones reach
    // a restarted server.
    let (status, body) = s.invoke("bad_crash", json!({}));
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    let back = wait_for(Duration::from_secs(30), || {
        let (status, body) = s.invoke("bad_ok", json!({}));
        (status == 200).then_some(body)
    })
    .expect("a restarted server answers");
    assert_eq!(back["result"], json!("ok: fine"));
    let said = wait_for(Duration::from_secs(10), || {
        let p = s.plugin("bad").unwrap();
        p["error"]
            .as_str()
            .unwrap_or("")
            .contains("crashing on purpose")
            .then_some(())
    });
    assert!(said.is_some(), "{}", s.plugin("bad").unwrap());
    assert_eq!(s.invoke("calc_evaluate", json!({"expression": "3"})).0, 200);
}

#[test]
fn a_call_cut_short_is_cancelled_on_the_server() {
    if !require_docker() {
        return;
    }
    let (manifest, script) = misbehaving("per_session = true\n");
    let s = Server::start(PluginsDir::new().add("files", "files").folder(
        "slowpoke",
        &[("slowpoke.toml", &manifest), ("misbehaving.py", &script)],
    ));
    // The session's server is started by a first call.
    assert_eq!(s.invoke_in("c1", "slowpoke_ok", json!({})).0, 200);
    let started = Instant::now();
    let (status, body) = s.invoke_in_limited(
        "c1",
        "slowpoke_slow",
        json!({}),
        json!({"timeout_ms": 1000}),
    );
    assert_eq!((status, kind(&body)), (504, "timeout"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // The server was told: its handler was cancelled and said so in the
    // session's workspace (the file may be seen before its text is in it).
    let told = wait_for(Duration::from_secs(10), || {
        let (status, body) = s.invoke_in("c1", "files_read", json!({"path": "cancelled.txt"}));
        (status == 200 && body["result"] != json!("")).then_some(body)
    })
    .expect("the server saw the cancellation");
    assert_eq!(told["result"], json!("cancelled by the client"));
}

/// The misbehaving server's manifest (with `extra` lines) and script
/// (`tests/fixtures/mcp/misbehaving.py`, the official Python SDK from the
/// install's python/).
fn misbehaving(extra: &str) -> (String, String) {
    let script =
        std::fs::read_to_string(repo_root().join("tests/fixtures/mcp/misbehaving.py")).unwrap();
    let manifest = format!(
        "[mcp]\ncommand = [\"python3\", \"/toolkit/misbehaving.py\"]\nmount = \"{}\"\n\
         env = {{ PYTHONPATH = \"/opt/mcp/python\" }}\n{CONTAINER_INIT_TIMEOUT}{extra}",
        mcp_install().display()
    );
    (manifest, script)
}

/// `target/mcpservers`: the test MCP servers' install (npm under
/// node_modules/, Python under python/), mounted into nodes at /opt/mcp.
fn mcp_install() -> std::path::PathBuf {
    let bin = toolhost_e2e::services::mcp_servers_bin();
    bin.parent().unwrap().parent().unwrap().to_owned()
}

#[test]
fn a_remote_servers_new_tools_are_followed() {
    let growing = Service::python_mcp(&repo_root().join("tests/fixtures/mcp/growing.py"));
    // Following the list, not pinning it (pins.rs holds new tools).
    let s = Server::start_with(
        PluginsDir::new().folder("grow", &[("grow.toml", &manifest(&growing, ""))]),
        Some("[pins]\nmode = \"off\"\n"),
    )
    .unwrap();
    assert_eq!(s.tool_ids(), ["grow_flood", "grow_grow"]);
    for n in 1..=2 {
        let (status, body) = s.invoke("grow_grow", json!({}));
        assert_eq!(status, 200, "{body}");
        // notifications/tools/list_changed: the toolkit is reloaded with it.
        let tool = format!("grow_grown_{n}");
        let served = wait_for(Duration::from_secs(10), || {
            (s.invoke(&tool, json!({})).0 == 200).then_some(())
        });
        assert!(served.is_some(), "{tool} is served: {:?}", s.tool_ids());
    }
    assert_eq!(s.tool_ids().len(), 4);

    // 300 notifications in 3 s are followed with a reload per half-second,
    // not one each.
    let reloads = |log: &str| log.matches("its tool list changed; reloading").count();
    let before = reloads(&s.log());
    let (status, body) = s.invoke("grow_flood", json!({"seconds": 3}));
    assert_eq!(status, 200, "{body}");
    std::thread::sleep(Duration::from_millis(1200));
    let during = reloads(&s.log()) - before;
    assert!(
        (2..=10).contains(&during),
        "{during} reloads for 300 notifications"
    );
    assert_eq!(s.invoke("grow_grown_1", json!({})).0, 200);
}

/// The continuation toolhost's XAgent surface names for a call still
/// running after its patience.
const AWAIT_CALL: &str = "ToolhostEnv_await_call";
const PATIENCE: &str = "[xagent]\npatience_ms = 1000\n";

#[test]
fn an_xagent_caller_follows_a_long_calls_progress_through_450s() {
    let everything = Service::everything();
    let s = Server::start_with(
        PluginsDir::new().folder("every", &[("every.toml", &manifest(&everything, ""))]),
        Some(PATIENCE),
    )
    .unwrap();
    let x = XAgent::connect(&s);
    // Eight steps of 0.5 s: the first answer comes after one or two.
    let (status, body) = x.execute(
        "every_trigger-long-running-operation",
        json!({"duration": 4, "steps": 8}),
    );
    assert_eq!(status, 450, "{body}");
    assert_eq!(body["detail"]["next_calling"], AWAIT_CALL, "{body}");
    let progress = &body["detail"]["partial"]["progress"];
    assert_eq!(progress["total"], 8.0, "the server's progress: {body}");
    let mut done = progress["done"].as_f64().unwrap();
    let arguments = body["detail"]["arguments"].clone();
    let result = loop {
        let (status, body) = x.execute(AWAIT_CALL, arguments.clone());
        match status {
            450 => {
                // Progress only goes forward.
                let now = body["detail"]["partial"]["progress"]["done"]
                    .as_f64()
                    .unwrap();
                assert!(now >= done, "{now} after {done}: {body}");
                done = now;
            }
            200 => break body,
            _ => panic!("{status} {body}"),
        }
    };
    assert!(done >= 4.0, "progress seen on the way: {done}");
    assert!(
        result
            .to_string()
            .contains("Long running operation completed"),
        "{result}"
    );
}

#[test]
fn closing_an_xagent_session_cancels_its_parked_call_on_the_server() {
    if !require_docker() {
        return;
    }
    // One server shared by the sessions (no /workspace: it writes to /tmp).
    let (manifest, script) = misbehaving("");
    let s = Server::start_with(
        PluginsDir::new().folder(
            "slowpoke",
            &[("slowpoke.toml", &manifest), ("misbehaving.py", &script)],
        ),
        Some(PATIENCE),
    )
    .unwrap();
    let x = XAgent::connect(&s);
    let (status, body) = x.execute("slowpoke_slow", json!({}));
    assert_eq!(status, 450, "{body}");
    assert_eq!(x.post("/close_session", json!({})).0, 200);
    let [container] = containers_of(&s, "slowpoke").try_into().unwrap();
    let told = wait_for(Duration::from_secs(10), || {
        let out = std::process::Command::new("docker")
            .args(["exec", &container, "cat", "/tmp/cancelled.txt"])
            .output()
            .unwrap();
        out.status.success().then_some(out.stdout)
    })
    .expect("the server saw the cancellation");
    assert_eq!(String::from_utf8_lossy(&told), "cancelled by the client");
    // The server serves on.
    assert_eq!(s.invoke("slowpoke_ok", json!({})).0, 200);
}
