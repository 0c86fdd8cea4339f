//! Traces (docs/telemetry.md) into a real receiver, Arize Phoenix, read
//! back from its own API: an agent step (its own span, made by the
//! OpenTelemetry Python SDK) calls a wasm tool, a Docker node's tool and an
//! API tool through toolhost's Python client, and a tool through the
//! official MCP SDK (which sends its own span in `_meta`); the trees under
//! the agent's span are checked (parents, names, attributes), down to the
//! traced upstream's own span joined through `traceparent`. Then what must
//! never hurt a call: a malformed `traceparent`, a receiver that is down or
//! never answers. Links and the context passed on: `trace_links.rs`.

use std::collections::HashMap;
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_e2e::traces::{Phoenix, start_script};
use toolhost_e2e::*;

/// The spans of a trace by id.
struct Tree(HashMap<String, Value>);

impl Tree {
    fn new(spans: &[Value]) -> Tree {
        Tree(
            spans
                .iter()
                .map(|s| {
                    (
                        s["context"]["span_id"].as_str().unwrap().to_owned(),
                        s.clone(),
                    )
                })
                .collect(),
        )
    }

    /// The spans named `name`.
    fn named(&self, name: &str) -> Vec<&Value> {
        self.0.values().filter(|s| s["name"] == name).collect()
    }

    /// The one span named `name` whose parent is `parent` (a span id).
    fn child(&self, parent: &str, name: &str) -> &Value {
        let found: Vec<&Value> = self
            .named(name)
            .into_iter()
            .filter(|s| s["parent_id"] == parent)
            .collect();
        assert_eq!(
            found.len(),
            1,
            "one `{name}` under {parent}: {:#?}",
            self.summary()
        );
        found[0]
    }

    fn id(span: &Value) -> &str {
        span["context"]["span_id"].as_str().unwrap()
    }

    fn summary(&self) -> Vec<String> {
        self.0
            .values()
            .map(|s| format!("{} {} <- {}", Tree::id(s), s["name"], s["parent_id"]))
            .collect()
    }
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

#[test]
fn an_agent_step_is_one_tree_across_wasm_a_node_an_api_and_mcp() {
    if !require_docker() {
        return;
    }
    let phoenix = Phoenix::start();
    let (_upstream, port) = start_script("upstream.py", &[&phoenix.traces_url()]);
    let plugins = PluginsDir::new()
        .add("calc", "calc")
        .add_toolkit_with("shell", cold)
        .folder(
            "up",
            &[(
                "up.toml",
                &format!(
                    "[api]\nspec = \"http://127.0.0.1:{port}/openapi.json\"\nbase_url = \"http://127.0.0.1:{port}\"\nallow = [\"127.0.0.1:{port}\"]\n"
                ),
            )],
        );
    let config = format!(
        "[telemetry]\nendpoint = \"{}\"\nlog_format = \"json\"\n",
        phoenix.url
    );
    let s = Server::start_with(plugins, Some(&config)).unwrap();

    let python = python_venv("tests/traces/requirements.txt");
    let out = Command::new(python)
        .arg(repo_root().join("tests/traces/agent.py"))
        .args([&s.base, &phoenix.traces_url(), "up_greet"])
        .env("PYTHONPATH", repo_root().join("clients/python"))
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}");
    let seen = last_json(&report);
    assert_eq!(seen["calc"], 42.0, "{seen}");
    assert_eq!(seen["shell"], "node\n", "{seen}");
    assert_eq!(seen["api"], "hello ada", "{seen}");
    assert_eq!(seen["failed"], "invalid_input", "{seen}");
    assert_eq!(seen["mcp"], 32.0, "{seen}");
    let trace_id = seen["trace_id"].as_str().unwrap();
    let step = seen["step_span"].as_str().unwrap();

    let spans = phoenix.trace(trace_id, |spans| {
        let names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
        [
            "GET /greet",
            "driver.shell.wait_output",
            "wasm.run",
            "tools/call calc_evaluate",
            "agent step",
        ]
        .iter()
        .all(|n| names.contains(n))
            && names.iter().filter(|n| **n == "wasm.run").count() >= 3
    });
    let tree = Tree::new(&spans);

    // The Python client's calls: toolhost's HTTP spans are children of the
    // agent's span.
    // Two calc calls (one failed): each an execute_tool with its wasm spans.
    let calls: Vec<&Value> = tree
        .named("POST /tools/calc_evaluate/invoke")
        .into_iter()
        .filter(|s| s["parent_id"] == step)
        .collect();
    assert_eq!(calls.len(), 2, "{:#?}", tree.summary());
    let mut outcomes = Vec::new();
    for call in &calls {
        assert!(attr(call, "http.response.status_code").is_i64(), "{call}");
        let run = tree.child(Tree::id(call), "execute_tool calc_evaluate");
        assert_eq!(attr(run, "gen_ai.operation.name"), "execute_tool");
        assert_eq!(attr(run, "gen_ai.tool.name"), "calc_evaluate");
        assert_eq!(attr(run, "toolhost.backend"), "wasm");
        outcomes.push(attr(run, "toolhost.outcome").as_str().unwrap().to_owned());
        tree.child(Tree::id(run), "wasm.instantiate");
        let wasm = tree.child(Tree::id(run), "wasm.run");
        assert!(attr(wasm, "toolhost.wasm.fuel").as_i64().unwrap() > 0);
    }
    outcomes.sort();
    assert_eq!(outcomes, ["invalid_input", "ok"]);
    let failed = tree
        .named("execute_tool calc_evaluate")
        .into_iter()
        .find(|s| attr(s, "toolhost.outcome") == "invalid_input")
        .unwrap();
    assert_eq!(failed["status_code"], "ERROR", "{failed}");
    assert_eq!(attr(failed, "error.type"), "invalid_input");

    // The node: acquired (created: the session's first call), the driver's
    // request, and the driver's own steps under it.
    let shell = tree.child(step, "POST /tools/shell_run/invoke");
    let run = tree.child(Tree::id(shell), "execute_tool shell_run");
    assert_eq!(attr(run, "toolhost.backend"), "docker");
    let acquire = tree.child(Tree::id(run), "node.acquire");
    assert_eq!(attr(acquire, "toolhost.node.source"), "created");
    let exec = tree.child(Tree::id(run), "node.exec");
    assert!(attr(exec, "toolhost.node.container").is_string());
    let driver = tree.child(Tree::id(exec), "driver.run");
    tree.child(Tree::id(exec), "driver.shell.wait_output");
    assert!(driver["start_time"].as_str() >= exec["start_time"].as_str());

    // The API tool: the upstream request as a client span, and the
    // upstream's own span (another service) its child through traceparent.
    let api = tree.child(step, "POST /tools/up_greet/invoke");
    let run = tree.child(Tree::id(api), "execute_tool up_greet");
    assert_eq!(attr(run, "toolhost.backend"), "api");
    let client = tree.child(Tree::id(run), "GET");
    assert_eq!(attr(client, "http.response.status_code"), 200);
    assert_eq!(
        attr(client, "url.full"),
        &json!(format!("http://127.0.0.1:{port}/greet"))
    );
    let greeted = tree.child(Tree::id(client), "GET /greet");
    assert_eq!(attr(greeted, "greeted"), "ada");

    // The MCP SDK's call: the SDK's own span ("MCP send tools/call ...")
    // went in `_meta`; toolhost's MCP span is its child (not the HTTP
    // request's), the tool's under it.
    let mcp_span = seen["mcp_span"].as_str().unwrap();
    let sent = tree.child(mcp_span, "MCP send tools/call calc_evaluate");
    let mcp = tree.child(Tree::id(sent), "tools/call calc_evaluate");
    assert_eq!(attr(mcp, "mcp.method.name"), "tools/call");
    assert_eq!(attr(mcp, "gen_ai.tool.name"), "calc_evaluate");
    tree.child(Tree::id(mcp), "execute_tool calc_evaluate");

    // The failed call's log line carries the trace (JSON lines).
    let log = s.log();
    let line = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["message"] == "call failed" && l["trace_id"] == trace_id)
        .unwrap_or_else(|| panic!("no `call failed` line of the trace in:\n{log}"));
    assert!(
        tree.0.contains_key(line["span_id"].as_str().unwrap()),
        "{line}"
    );
    assert_eq!(line["tool"], "calc_evaluate");

    // A malformed traceparent is ignored: a new trace, the call served.
    let answer = s
        .client()
        .post(s.url("/tools/calc_evaluate/invoke"))
        .header("traceparent", "00-not-a-trace-01")
        .header("x-request-id", "bad-traceparent")
        .json(&json!({"params": {"expression": "1+1"}}))
        .send()
        .unwrap();
    assert_eq!(answer.status(), 200);
    let started = Instant::now();
    let root = loop {
        let found = phoenix
            .spans()
            .into_iter()
            .find(|s| attr(s, "toolhost.request_id") == "bad-traceparent");
        if let Some(found) = found {
            break found;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no span of the request"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(root["parent_id"].is_null(), "{root}");
    assert_ne!(root["context"]["trace_id"], trace_id);
    assert!(
        s.metrics()
            .contains("toolhost_trace_spans_total{outcome=\"exported\"}")
    );
}

/// Calls of calc while the receiver is `endpoint`: all served, and quickly
/// (none waits for an export); the spans' counts after.
fn calls_with_receiver(endpoint: &str, extra: &str) -> String {
    let config = format!("[telemetry]\nendpoint = \"{endpoint}\"\n{extra}");
    let s = Server::start_with(PluginsDir::new().add("calc", "calc"), Some(&config)).unwrap();
    // Two rounds, the second while the first round's export (sent a second
    // after its first span) is under way: a receiver that never answers
    // holds it for its 2 s, and the second round's spans meet a full queue.
    for i in 0..40 {
        if i == 20 {
            std::thread::sleep(Duration::from_millis(1300));
        }
        let started = Instant::now();
        let (status, body) = s.invoke("calc_evaluate", json!({"expression": format!("{i}+1")}));
        assert_eq!(status, 200, "{body}");
        // An export blocked for its 2 s timeout would show here.
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "call {i} waited"
        );
    }
    let started = Instant::now();
    loop {
        let metrics = s.metrics();
        let count = |outcome: &str| -> u64 {
            metrics
                .lines()
                .find_map(|l| {
                    l.strip_prefix(&format!(
                        "toolhost_trace_spans_total{{outcome=\"{outcome}\"}} "
                    ))
                })
                .map_or(0, |n| n.trim().parse().unwrap())
        };
        if count("failed") > 0 || started.elapsed() > Duration::from_secs(20) {
            return metrics;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_receiver_down_or_silent_never_slows_or_fails_a_call() {
    // Down: nothing listens; spans are lost, counted as failed.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let metrics = calls_with_receiver(&format!("http://127.0.0.1:{port}"), "");
    assert!(
        !metrics.contains("toolhost_trace_spans_total{outcome=\"failed\"} 0"),
        "{metrics}"
    );
    // Silent: it accepts and never answers; the queue (8) fills while an
    // export waits out its 2 s, and the rest are dropped, counted.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let metrics = calls_with_receiver(
        &format!("http://127.0.0.1:{port}"),
        "queue = 8\ntimeout_ms = 2000\n",
    );
    assert!(
        !metrics.contains("toolhost_trace_spans_total{outcome=\"dropped\"} 0"),
        "{metrics}"
    );
    drop(silent);
}
