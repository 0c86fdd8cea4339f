//! The gateway's fidelity, as the official clients see it: for real MCP
//! servers nobody here wrote (server-everything, server-filesystem) and a
//! server of the official Python SDK answering every kind of item
//! (`tests/fixtures/mcp/kinds.py`), the official Python and TypeScript
//! clients list and call each one directly and through toolhost, side by
//! side, and the two must match: tool lists (titles, annotations, schemas,
//! `_meta`) and results (every item kind, annotations, `_meta`,
//! `structuredContent`, `isError`). The comparison and what it allows are
//! `tests/mcp/side_by_side.py`'s.

use serde_json::json;
use std::path::PathBuf;
use std::process::Command;

use toolhost_e2e::services::{Service, mcp_servers_bin};
use toolhost_e2e::*;

/// The time of day and a base64 blob made of it that server-everything
/// prints into its resources (they differ between two calls), and the raw
/// JSON it prints of a form's answer (toolhost passes the answer on as a
/// JSON object, whose keys keep no order).
const EVERYTHING_MASKS: &[&str] = &[
    r"\d{1,2}:\d\d:\d\d [AP]M",
    r"UmVzb3VyY2Ug[A-Za-z0-9+/=]+",
    r#"Raw result: (?:[^"\\]|\\.)*"#,
];

fn fixture(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures/gateway").join(name)
}

/// The official clients compared here.
#[derive(Clone, Copy, Debug)]
enum Client {
    Python,
    TypeScript,
}

const CLIENTS: [Client; 2] = [Client::Python, Client::TypeScript];

/// One side-by-side run of `client`: `direct` is `--direct URL` or
/// `--direct-stdio CMD`; `extra` more arguments (a session, path rewrites,
/// masks, tools left out).
fn agree(s: &Server, client: Client, direct: [&str; 2], prefix: &str, calls: &str, extra: &[&str]) {
    let python = python_venv("tests/mcp/requirements.txt");
    let mut args: Vec<String> = vec![
        direct[0].into(),
        direct[1].into(),
        "--through".into(),
        s.url("/mcp"),
        "--prefix".into(),
        prefix.into(),
        "--calls".into(),
        fixture(calls).display().to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let os = |v: &[String]| -> Vec<std::ffi::OsString> { v.iter().map(Into::into).collect() };
    let report = match client {
        Client::Python => {
            let mut args = os(&args);
            args.push("--check".into());
            let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
            run_python(&python, "tests/mcp/side_by_side.py", &refs)
        }
        Client::TypeScript => {
            // The TypeScript SDK the npm servers install beside them.
            let sdk = mcp_servers_bin()
                .parent()
                .unwrap()
                .join("@modelcontextprotocol/sdk/dist/esm");
            let out = Command::new("node")
                .arg(repo_root().join("tests/mcp/side_by_side.mjs"))
                .arg(&sdk)
                .args(&args)
                .output()
                .expect("run node");
            assert!(
                out.status.success(),
                "side_by_side.mjs failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(file.path(), &out.stdout).unwrap();
            let mut check = vec![
                std::ffi::OsString::from("--compare-report"),
                file.path().into(),
            ];
            for pair in extra.chunks(2) {
                if pair[0] == "--mask" || pair[0] == "--skip-tool" {
                    check.extend([pair[0].into(), pair[1].into()]);
                }
            }
            let refs: Vec<&std::ffi::OsStr> = check.iter().map(|a| a.as_os_str()).collect();
            run_python(&python, "tests/mcp/side_by_side.py", &refs)
        }
    };
    let (ok, report) = report;
    assert!(
        ok && report.contains(" 0 different"),
        "the {client:?} client sees {prefix}'s server differently through toolhost:\n{report}"
    );
}

#[test]
fn remote_servers_look_the_same_through_toolhost() {
    let everything = Service::everything();
    let kinds = Service::python_mcp(&repo_root().join("tests/fixtures/mcp/kinds.py"));
    let s = Server::start(
        PluginsDir::new()
            .folder("every", &[("every.toml", &everything.mcp_manifest())])
            .folder("kinds", &[("kinds.toml", &kinds.mcp_manifest())]),
    );
    for name in ["every", "kinds"] {
        assert_eq!(s.plugin(name).unwrap()["state"], "ready", "{name}");
    }
    // The result's own `_meta` reaches a native caller as the body's `meta`
    // (MCP callers: compared side by side below), and stays out of the
    // result itself.
    let (code, body) = s.invoke("kinds_mixed", json!({}));
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["meta"],
        json!({"example.org/cursor": "rows-3", "example.org/cost": {"units": 2}})
    );
    assert_eq!(body["result"], json!({"rows": 3, "ok": true}));
    assert!(
        !body["content"].to_string().contains("example.org/cursor"),
        "{body}"
    );
    let mut extra = Vec::new();
    for mask in EVERYTHING_MASKS {
        extra.extend(["--mask", mask]);
    }
    for client in CLIENTS {
        agree(
            &s,
            client,
            ["--direct", &everything.url("/mcp")],
            "every_",
            "everything.calls.json",
            &extra,
        );
        agree(
            &s,
            client,
            ["--direct", &kinds.url("/mcp")],
            "kinds_",
            "kinds.calls.json",
            &[],
        );
    }
}

#[test]
fn the_filesystem_server_looks_the_same_in_a_node() {
    if !require_docker() {
        return;
    }
    let install = mcp_servers_bin()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_owned();
    let manifest = format!(
        "[mcp]\ncommand = [\"node\", \"/opt/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js\", \"/workspace\"]\n\
         mount = \"{}\"\nper_session = true\n{CONTAINER_INIT_TIMEOUT}",
        install.display()
    );
    let s = Server::start(PluginsDir::new().folder("fsmcp", &[("fsmcp.toml", &manifest)]));
    assert_eq!(s.plugin("fsmcp").unwrap()["state"], "ready");
    // Each client's direct server gets a fresh folder, its toolhost session a
    // fresh workspace: the same calls find the same files.
    let server = install.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    for client in CLIENTS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap();
        let direct = format!("node {} {}", server.display(), path.display());
        let replace = format!("{}=/workspace", path.display());
        let session = format!("side-by-side-{client:?}-{}", std::process::id());
        let extra = [
            "--session",
            &session,
            "--replace",
            &replace,
            "--mask",
            r"(created|modified|accessed): [^\\]*",
        ];
        agree(
            &s,
            client,
            ["--direct-stdio", &direct],
            "fsmcp_",
            "filesystem.calls.json",
            &extra,
        );
    }
}

/// The kind of an error answer.
fn kind(body: &serde_json::Value) -> &str {
    body["error"]["kind"].as_str().unwrap_or("")
}

#[test]
fn a_restarted_remote_server_is_reconnected_idle_and_busy() {
    use std::time::{Duration, Instant};

    let (p, q) = (free_port().unwrap(), free_port().unwrap());
    let script = repo_root().join("tests/fixtures/mcp/kinds.py");
    let everything = Service::everything_at(p);
    let kinds = Service::python_mcp_at(&script, q);
    let limit = "timeout_ms = 30000\n";
    let s = Server::start(
        PluginsDir::new()
            .folder(
                "every",
                &[("every.toml", &(everything.mcp_manifest() + limit))],
            )
            .folder("kinds", &[("kinds.toml", &(kinds.mcp_manifest() + limit))]),
    );
    let echo = || s.invoke("every_echo", json!({"message": "hi"}));
    let count = || s.invoke("kinds_count", json!({"word": "aab"}));
    assert_eq!(echo().0, 200);
    assert_eq!(count().0, 200);

    // Restarted while toolhost is idle: the next call makes a new session,
    // transparently (server-everything answers the old session with 400 and
    // an error without an id, the Python SDK server with 404).
    drop(everything);
    drop(kinds);
    let everything = Service::everything_at(p);
    let kinds = Service::python_mcp_at(&script, q);
    let started = Instant::now();
    let (status, body) = echo();
    assert_eq!(status, 200, "{body}");
    let (status, body) = count();
    assert_eq!(status, 200, "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let log = s.log();
    assert!(log.contains("it does not know our session"), "{log}");
    assert!(log.contains("our session expired (404)"), "{log}");

    // Restarted while a call runs: that call ends at once with a clear 503,
    // not at its 30 s limit; the next one goes through.
    let ((status, body, took), everything) = std::thread::scope(|scope| {
        let busy = scope.spawn(|| {
            let started = Instant::now();
            let (status, body) = s.invoke(
                "every_trigger-long-running-operation",
                json!({"duration": 20, "steps": 20}),
            );
            (status, body, started.elapsed())
        });
        std::thread::sleep(Duration::from_millis(1500));
        drop(everything);
        let restarted = Service::everything_at(p);
        (busy.join().unwrap(), restarted)
    });
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("went away while the call ran")
    );
    let (status, body) = echo();
    assert_eq!(status, 200, "{body}");
    drop((everything, kinds));
}

#[test]
fn a_mounted_servers_tool_count_is_capped_with_a_warning() {
    let everything = Service::everything();
    let s = Server::start(PluginsDir::new().folder(
        "every",
        &[(
            "every.toml",
            &(everything.mcp_manifest() + "max_tools = 5\n"),
        )],
    ));
    let p = s.plugin("every").unwrap();
    assert_eq!(p["state"], "ready", "{p}");
    assert_eq!(p["tools"].as_array().unwrap().len(), 5, "{p}");
    assert!(
        p["warnings"][0]
            .as_str()
            .unwrap()
            .contains("more than 5 tools: the first 5 are served ([mcp] max_tools)"),
        "{p}"
    );
}

/// A form a mounted server asks for reaches a native caller as
/// `input_required`; its answer, sent with the call again, reaches the
/// server, whose result then comes back.
#[test]
fn a_native_caller_answers_the_servers_form() {
    use serde_json::Value;
    let everything = Service::everything();
    let s = Server::start(
        PluginsDir::new().folder("every", &[("every.toml", &everything.mcp_manifest())]),
    );
    let call =
        |body: Value| s.invoke_body("native-form", "every_trigger-elicitation-request", body);
    let (status, asked) = call(json!({"params": {}}));
    assert_eq!(status, 200, "{asked}");
    assert_eq!(asked["status"], "input_required", "{asked}");
    let question = &asked["input_required"]["questions"][0];
    assert_eq!(question["kind"], "form", "{asked}");
    // A filled form, as a user would give it.
    let mut content = serde_json::Map::new();
    let schema = &question["params"]["requestedSchema"]["properties"];
    // The first option of a choice: an `enum`, or a titled `oneOf` /
    // `anyOf` of `const`s.
    let first = |p: &Value| -> Option<Value> {
        p.get("enum")
            .map(|e| e[0].clone())
            .or_else(|| p.get("oneOf").map(|o| o[0]["const"].clone()))
            .or_else(|| p.get("anyOf").map(|o| o[0]["const"].clone()))
    };
    for (name, prop) in schema.as_object().expect("a form schema") {
        let value = match (first(prop), prop["type"].as_str()) {
            (Some(option), _) => option,
            (_, Some("boolean")) => json!(true),
            (_, Some("number" | "integer")) => prop.get("minimum").cloned().unwrap_or(json!(3)),
            (_, Some("array")) => json!([first(&prop["items"]).unwrap_or(json!("a"))]),
            _ => json!("native answer"),
        };
        content.insert(name.clone(), value);
    }
    let key = question["key"].as_str().unwrap().to_owned();
    let (status, done) = call(json!({"params": {}, "input": {
        "state": asked["input_required"]["state"],
        "answers": {key: {"action": "accept", "content": content}},
    }}));
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "success", "{done}");
    assert!(
        done.to_string().contains("native answer"),
        "the server saw the answer: {done}"
    );
}

/// A tool the server runs only as a task (server-everything's
/// `simulate-research-query`, `taskSupport: "required"`): toolhost asks the
/// server for a task and waits for its result, so any caller calls it as
/// any tool; the server's question during the task (an ambiguous topic)
/// reaches the native caller, and the answer the server.
#[test]
fn a_task_only_tool_is_called_as_a_task_and_its_question_passed_on() {
    use serde_json::Value;
    let everything = Service::everything();
    let s = Server::start(
        PluginsDir::new().folder("every", &[("every.toml", &everything.mcp_manifest())]),
    );
    let call = |body: Value| s.invoke_body("research", "every_simulate-research-query", body);
    let (status, done) = call(json!({"params": {"topic": "tides", "ambiguous": false}}));
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "success", "{done}");
    assert!(
        done.to_string().contains("Research Report: tides"),
        "{done}"
    );
    assert!(
        !done.to_string().contains("related-task"),
        "the server's task is its business: {done}"
    );
    // An MCP caller calls it as any tool too.
    let mut mcp = toolhost_e2e::mcp::McpClient::new(&s);
    mcp.initialize("2025-11-25");
    let answer = mcp.call(
        2,
        "every_simulate-research-query",
        json!({"topic": "mills"}),
    );
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    assert!(
        answer.to_string().contains("Research Report: mills"),
        "{answer}"
    );

    let (status, asked) = call(json!({"params": {"topic": "python", "ambiguous": true}}));
    assert_eq!(status, 200, "{asked}");
    assert_eq!(asked["status"], "input_required", "{asked}");
    let question = &asked["input_required"]["questions"][0];
    assert_eq!(question["kind"], "form", "{asked}");
    let property = question["params"]["requestedSchema"]["properties"]
        .as_object()
        .and_then(|p| p.keys().next().cloned())
        .expect("a form with a field");
    let choice =
        question["params"]["requestedSchema"]["properties"][&property]["oneOf"][1]["const"].clone();
    assert!(choice.is_string(), "{question}");
    let key = question["key"].as_str().unwrap().to_owned();
    let (status, done) = call(
        json!({"params": {"topic": "python", "ambiguous": true}, "input": {
            "state": asked["input_required"]["state"],
            "answers": {key: {"action": "accept", "content": {property: choice}}},
        }}),
    );
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "success", "{done}");
    assert!(
        done.to_string()
            .contains(&format!("python ({})", choice.as_str().unwrap())),
        "the server saw the answer: {done}"
    );
}

/// A server that floods its client: `tools/list_changed` every 10 ms costs
/// one reload per half second (not a hundred a second) and shows the toolkit
/// `degraded` with the reason while it lasts, calls still served; progress
/// reported in a tight loop reaches the caller at most 20 times a second,
/// the last report included.
#[test]
fn a_flooding_server_is_held_to_bounded_reloads_and_progress() {
    use std::time::{Duration, Instant};
    let flood = Service::python_mcp(&repo_root().join("tests/fixtures/mcp/flood.py"));
    let s = Server::start(PluginsDir::new().folder("fl", &[("fl.toml", &flood.mcp_manifest())]));
    assert_eq!(s.plugin("fl").unwrap()["state"], "ready");
    let started = Instant::now();
    let (status, body) = s.invoke("fl_flood", json!({"seconds": 3, "every_ms": 10}));
    assert_eq!(status, 200, "{body}");
    let sent = body["result"]["result"]
        .as_u64()
        .or_else(|| body["result"].as_u64())
        .unwrap_or(0);
    assert!(sent >= 100, "the server sent {sent}: {body}");
    let shown = s.plugin("fl").unwrap();
    assert!(
        shown["error"]
            .as_str()
            .unwrap_or_default()
            .contains("degraded: its server sent"),
        "{shown}"
    );
    assert_eq!(s.invoke("fl_ping", json!({})).0, 200, "calls are served");
    let reloads = s.log().matches("its tool list changed; reloading").count();
    let windows = (started.elapsed().as_millis() / 500) as usize + 2;
    assert!(
        (1..=windows).contains(&reloads),
        "{sent} notifications made {reloads} reloads in {:?}",
        started.elapsed()
    );
    // Once it stops, the toolkit is shown as it is again.
    let calm = wait_for(Duration::from_secs(20), || {
        let p = s.plugin("fl")?;
        (p["state"] == "ready").then_some(p)
    });
    assert!(calm.is_some(), "{:?}", s.plugin("fl"));

    // 2,000 progress reports as fast as the server can send them.
    let started = Instant::now();
    let text = reqwest::blocking::Client::new()
        .post(s.url("/tools/fl_chatty/invoke"))
        .json(&json!({"params": {"count": 2000}, "stream": true}))
        .send()
        .unwrap()
        .text()
        .unwrap();
    let events = text.matches("event: progress").count();
    let bound = started.elapsed().as_millis() as usize / 50 + 2;
    assert!(
        (1..=bound).contains(&events),
        "{events} progress events in {:?}",
        started.elapsed()
    );
    assert!(text.contains("event: result"), "{text}");
}
