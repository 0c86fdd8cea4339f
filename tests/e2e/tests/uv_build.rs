//! Seed 004 §4.2's `build_tool` with `runtime: "uv"`, as the seed writes it
//! plus the source a builder wrote: a Python HTTP service whose
//! `requirements.dependencies` come from PyPI (fetched by the host as
//! wheels, installed by uv in its image), served at `api_spec`'s endpoint
//! and tested by its example before it is active. A dependency PyPI lacks
//! fails the task, named.

use serde_json::{Value, json};
use toolhost_e2e::admin::{TOKEN, request as admin, task_ended as ended};
use toolhost_e2e::*;

const APP: &str = r#"
import json, os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import six  # the dependency: installed by uv in the image


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.reply({"ok": True})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.reply({"words": len(body.get("text", "").split()), "six": six.__version__})

    def log_message(self, *a):
        pass


ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"#;

fn spec(deps: Value) -> Value {
    json!({
        "type": "build_tool",
        "tool_name": "word_stats_api",
        "runtime": "uv",
        "description": "Counts the words of a text (with six).",
        "requirements": {"gpu": false, "memory_mb": 256, "dependencies": deps},
        "api_spec": {
            "endpoint_path": "/stats",
            "http_method": "POST",
            "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        },
        "source": APP,
        "examples": [{"tool": "word_stats_api", "input": {"text": "a b c"}}]
    })
}

#[test]
fn a_uv_build_serves_its_endpoint_with_its_pypi_dependencies() {
    if !require_docker() {
        return;
    }
    let s = Server::start_with(
        PluginsDir::new(),
        Some(&format!("[auth]\nadmin_token = \"{TOKEN}\"\n")),
    )
    .unwrap();
    let (code, body) = admin(
        &s,
        reqwest::Method::POST,
        "/tools/request",
        Some(spec(json!(["six==1.16.0"]))),
    );
    assert_eq!(code, 202, "{body}");
    assert_eq!(body["type"], "build_tool", "{body}");
    let done = ended(&s, body["task_id"].as_str().unwrap());
    assert_eq!(done["status"], "completed", "{done}\n{}", s.log());
    let id = done["result"]["tool_id"].as_str().unwrap().to_owned();
    assert_eq!(id, "word-stats-api_word_stats_api");
    let (code, answer) = s.invoke(&id, json!({"text": "one two three four"}));
    assert_eq!(code, 200, "{answer}");
    assert_eq!(
        answer["result"],
        json!({"words": 4, "six": "1.16.0"}),
        "{answer}"
    );
    let (_, tool) = s.get(&format!("/tools/{id}"));
    assert_eq!(tool["runtime"], "docker", "{tool}");

    // A dependency PyPI does not have: the task fails, naming it.
    let mut missing = spec(json!(["no-such-package-toolhost-test"]));
    missing["tool_name"] = json!("missing_dep_api");
    let (code, body) = admin(&s, reqwest::Method::POST, "/tools/request", Some(missing));
    assert_eq!(code, 202, "{body}");
    let failed = ended(&s, body["task_id"].as_str().unwrap());
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("`no-such-package-toolhost-test` cannot be fetched from PyPI"),
        "{failed}"
    );
    // A requirement that is more than one: refused at once.
    let mut evil = spec(json!(["six; touch /tmp/owned"]));
    evil["tool_name"] = json!("evil_api");
    let (code, body) = admin(&s, reqwest::Method::POST, "/tools/request", Some(evil));
    assert_eq!(code, 422, "{body}");
    assert!(body.to_string().contains("not a requirement"), "{body}");
}
