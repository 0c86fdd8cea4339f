//! Traces, continued (docs/telemetry.md): what Phoenix does not keep (span
//! links) and what toolhost passes on, read from an OTLP receiver decoding
//! with OpenTelemetry's own protocol definitions (`tests/traces/capture.py`):
//! a call that goes on in a later request (XAgent's 450, input rounds, MCP
//! tasks) links to where it started; the context goes on to a wasm tool's
//! outgoing request, a service container and an MCP server, whose own spans
//! join the trace.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_e2e::traces::{
    captured, child_of, links_to, request_span, start_script, traceparent_of,
};
use toolhost_e2e::*;

#[test]
fn a_call_that_goes_on_in_a_later_request_links_to_where_it_started() {
    let (_capture, port) = start_script("capture.py", &[]);
    let config = format!(
        "[telemetry]\nendpoint = \"http://127.0.0.1:{port}\"\n[xagent]\npatience_ms = 300\n"
    );
    let s = Server::start_with(
        PluginsDir::new()
            .add("hostile", "hostile")
            .add("files", "files"),
        Some(&config),
    )
    .unwrap();
    let post = |path: &str, id: &str, session: Option<&str>, body: Value| {
        let mut r = s
            .client()
            .post(s.url(path))
            .header("x-request-id", id)
            .json(&body);
        if let Some(session) = session {
            r = r.header("x-toolhost-session", session);
        }
        let r = r.send().unwrap();
        (
            r.status().as_u16(),
            r.json::<Value>().unwrap_or(Value::Null),
        )
    };

    // XAgent's 450: the request that awaits the parked call links to the
    // one that started it.
    let session = toolhost_e2e::xagent::XAgent::connect(&s);
    let cookie = session.cookie.clone();
    let xagent = |id: &str, tool: &str, arguments: Value| {
        let r = s
            .client()
            .post(s.url("/execute_tool"))
            .header("x-request-id", id)
            .header("cookie", &cookie)
            .json(&json!({"tool_name": tool, "arguments": arguments}))
            .send()
            .unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap())
    };
    let (status, body) = xagent("slow-1", "hostile_sleep", json!({"ms": 1200}));
    assert_eq!(status, 450, "{body}");
    let arguments = body["detail"]["arguments"].clone();
    let mut awaits = 0;
    loop {
        awaits += 1;
        let (status, body) = xagent(
            &format!("await-{awaits}"),
            "ToolhostEnv_await_call",
            arguments.clone(),
        );
        if status == 200 {
            break;
        }
        assert_eq!(status, 450, "{body}");
    }

    // Native input rounds: the answering round links to the asking one.
    let (status, body) = post(
        "/tools/files_write/invoke",
        "write",
        Some("rounds"),
        json!({"params": {"path": "a.txt", "content": "x"}}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, asked) = post(
        "/tools/files_delete/invoke",
        "ask",
        Some("rounds"),
        json!({"params": {"path": "a.txt"}}),
    );
    assert_eq!(
        (status, &asked["status"]),
        (200, &json!("input_required")),
        "{asked}"
    );
    let state = asked["input_required"]["state"].clone();
    let (status, body) = post(
        "/tools/files_delete/invoke",
        "answer",
        Some("rounds"),
        json!({"params": {"path": "a.txt"}, "input": {"state": state, "answers": {"confirm": {"action": "accept", "content": {"confirm": true}}}}}),
    );
    assert_eq!(
        (status, &body["result"]),
        (200, &json!("deleted a.txt")),
        "{body}"
    );

    // An MCP task: `tasks/get` links to the `tools/call` that made it (that
    // span ends with the task's call, after the `tasks/get`).
    let mut mcp = toolhost_e2e::mcp::McpClient::new(&s);
    mcp.initialize_with(
        "2025-11-25",
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    );
    let created = mcp.call(1, "hostile_sleep", json!({"ms": 800}));
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    let got = mcp.request(2, "tasks/get", json!({"taskId": task}));
    assert!(got["result"]["status"].is_string(), "{got}");

    let spans = captured(port, |spans| {
        ["answer", &format!("await-{awaits}")].iter().all(|id| {
            spans
                .iter()
                .any(|s| s["attributes"]["toolhost.request_id"] == *id)
        }) && ["tasks/get", "tools/call hostile_sleep"]
            .iter()
            .all(|name| spans.iter().any(|s| s["name"] == *name))
    });
    let made = spans
        .iter()
        .find(|s| s["name"] == "tools/call hostile_sleep")
        .unwrap_or_else(|| panic!("{spans:#?}"));
    let asked = spans
        .iter()
        .find(|s| s["name"] == "tasks/get" && s["attributes"]["toolhost.task"] == task.as_str())
        .unwrap_or_else(|| panic!("{spans:#?}"));
    assert!(links_to(asked, made, "task_of"), "{asked:#}");
    let started = request_span(&spans, "slow-1");
    for i in 1..=awaits {
        let waited = request_span(&spans, &format!("await-{i}"));
        assert!(links_to(waited, started, "awaits_call"), "{waited:#}");
        assert_ne!(waited["trace_id"], started["trace_id"]);
    }
    let ask = request_span(&spans, "ask");
    let answer = request_span(&spans, "answer");
    assert!(links_to(answer, ask, "input_round"), "{answer:#}");
    // A span with no earlier part links to nothing.
    assert!(
        request_span(&spans, "write")["links"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn the_context_goes_on_to_wasm_requests_services_and_mcp_servers() {
    if !require_docker() {
        return;
    }
    let (_capture, port) = start_script("capture.py", &[]);
    let otlp = format!("http://127.0.0.1:{port}/v1/traces");
    let (_upstream, up) = start_script("upstream.py", &[&otlp]);
    let (_mcp, mcp) = start_script("mcp_upstream.py", &[&otlp]);
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", mcp)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the MCP server did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let tiny = include_str!("../../fixtures/services/tiny.py");
    let (fetch, _) = component("fetch");
    let plugins = PluginsDir::new()
        .write("fetch.wasm", std::fs::read(fetch).unwrap())
        .write(
            "fetch.toml",
            format!("description = \"fetch\"\n[http]\nallow = [\"127.0.0.1:{up}\"]\n"),
        )
        .folder(
            "tiny",
            &[
                (
                    "tiny.toml",
                    "[docker]\nimage = \"toolhost-node:latest\"\ncommand = [\"python3\", \"-u\", \"/toolkit/tiny.py\"]\n\
                     internal_port = 9000\nstart_timeout_s = 20\ncpus = 0.5\nmemory_mb = 128\n\
                     [[tools]]\nname = \"ok\"\ndescription = \"Echo.\"\nendpoint_path = \"/ok\"\n\
                     input_schema = { type = \"object\" }\n",
                ),
                ("tiny.py", tiny),
            ],
        )
        .folder(
            "traced",
            &[(
                "traced.toml",
                &format!("[mcp]\nurl = \"http://127.0.0.1:{mcp}/mcp\"\nallow = [\"127.0.0.1:{mcp}\"]\n"),
            )],
        );
    let config = format!("[telemetry]\nendpoint = \"http://127.0.0.1:{port}\"\n");
    let s = Server::start_with(plugins, Some(&config)).unwrap();
    let call = |id: &str, tool: &str, params: Value| {
        let r = s
            .client()
            .post(s.url(&format!("/tools/{tool}/invoke")))
            .header("x-request-id", id)
            .json(&json!({ "params": params }))
            .send()
            .unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().unwrap();
        assert_eq!(status, 200, "{tool}: {body}\n{}", s.log());
        body
    };
    call(
        "wasm-http",
        "fetch_page",
        json!({"url": format!("http://127.0.0.1:{up}/greet?name=wasm")}),
    );
    let service = call("service", "tiny_ok", json!({"x": 1}));
    let mcp_answer = call("mcp", "traced_hello", json!({"name": "mcp"}));

    let spans = captured(port, |spans| {
        let services = |name: &str| spans.iter().any(|s| s["service"] == name);
        ["wasm-http", "service", "mcp"].iter().all(|id| {
            spans
                .iter()
                .any(|s| s["attributes"]["toolhost.request_id"] == *id)
        }) && services("traced-upstream")
            && services("traced-mcp-server")
    });

    // A wasm tool's outgoing request: its client span under `wasm.run`, the
    // upstream's own span under it.
    let request = request_span(&spans, "wasm-http");
    let run = child_of(&spans, request, "execute_tool fetch_page");
    let wasm = child_of(&spans, run, "wasm.run");
    let get = child_of(&spans, wasm, "GET");
    assert_eq!(get["attributes"]["http.response.status_code"], 200);
    let greeted = child_of(&spans, get, "GET /greet");
    assert_eq!(greeted["service"], "traced-upstream");

    // A service container: the traceparent it got is its client span's.
    let request = request_span(&spans, "service");
    let run = child_of(&spans, request, "execute_tool tiny_ok");
    let post = child_of(&spans, run, "POST");
    assert_eq!(
        service["result"]["traceparent"],
        json!(traceparent_of(post)),
        "{service}"
    );

    // An MCP server: `_meta` carried the client span's context; the SDK's
    // own server spans are its children.
    let request = request_span(&spans, "mcp");
    let run = child_of(&spans, request, "execute_tool traced_hello");
    let client = child_of(&spans, run, "tools/call hello");
    let answered: Value = serde_json::from_str(mcp_answer["result"].as_str().unwrap()).unwrap();
    assert_eq!(
        answered["traceparent"],
        json!(traceparent_of(client)),
        "{mcp_answer}"
    );
    assert!(
        spans
            .iter()
            .any(|s| s["service"] == "traced-mcp-server" && s["parent_id"] == client["span_id"]),
        "{spans:#?}"
    );
}

#[test]
fn a_request_is_kept_or_not_as_a_whole() {
    // No new trace kept (ratio 0); a caller's sampled flag is followed.
    let (_capture, port) = start_script("capture.py", &[]);
    let config =
        format!("[telemetry]\nendpoint = \"http://127.0.0.1:{port}\"\nsample_ratio = 0.0\n");
    let (_upstream, up) = start_script(
        "upstream.py",
        &[&format!("http://127.0.0.1:{port}/v1/traces")],
    );
    let (fetch, _) = component("fetch");
    let plugins = PluginsDir::new()
        .add("calc", "calc")
        .write("fetch.wasm", std::fs::read(fetch).unwrap())
        .write(
            "fetch.toml",
            format!("description = \"fetch\"\n[http]\nallow = [\"127.0.0.1:{up}\"]\n"),
        );
    let s = Server::start_with(plugins, Some(&config)).unwrap();
    let call = |id: &str, traceparent: Option<&str>| {
        let mut r = s
            .client()
            .post(s.url("/tools/calc_evaluate/invoke"))
            .header("x-request-id", id)
            .json(&json!({"params": {"expression": "1+1"}}));
        if let Some(tp) = traceparent {
            r = r.header("traceparent", tp);
        }
        assert_eq!(r.send().unwrap().status(), 200);
    };
    let kept = "4bf92f3577b34da6a3ce929d0e0e4736";
    call("new", None);
    call(
        "declined",
        Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"),
    );
    call("kept", Some(&format!("00-{kept}-00f067aa0ba902b7-01")));
    // A request not kept still passes its caller's context on, unchanged
    // (here from a wasm tool's request to the upstream, which echoes it).
    let declined = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    let answer: Value = s
        .client()
        .post(s.url("/tools/fetch_page/invoke"))
        .header("traceparent", declined)
        .json(&json!({"params": {"url": format!("http://127.0.0.1:{up}/greet?name=x")}}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert!(answer.to_string().contains(declined), "{answer}");
    captured(port, |spans| {
        spans.iter().any(|s| s["name"] == "wasm.run")
            && spans
                .iter()
                .any(|s| s["attributes"]["toolhost.request_id"] == "kept")
    });
    // Give a wrongly kept span of the first two calls time to arrive.
    std::thread::sleep(Duration::from_millis(1500));
    let spans = captured(port, |_| true);
    let request = request_span(&spans, "kept");
    assert_eq!(request["parent_id"], "00f067aa0ba902b7");
    let run = child_of(&spans, request, "execute_tool calc_evaluate");
    child_of(&spans, run, "wasm.instantiate");
    child_of(&spans, run, "wasm.run");
    // Nothing else: no span of the others (the upstream's own, under the
    // declined caller, is not sampled either), no orphan of theirs.
    assert!(spans.iter().all(|s| s["trace_id"] == kept), "{spans:#?}");
    assert_eq!(spans.len(), 4, "{spans:#?}");
}
