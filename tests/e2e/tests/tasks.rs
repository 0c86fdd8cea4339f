//! Tool requests (seed 004's tasks) against the real SDK toolchain: a
//! Python tool requested by source is built, tested, served on every
//! surface and still there after a restart; bad source, an example that
//! loops, a build cut by a restart, a taken name and a callback host not
//! allowed each end as they should, with the server serving on.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::mcp::McpClient;
use toolhost_e2e::sources::{self, WORDCOUNT};
use toolhost_e2e::xagent::XAgent;
use toolhost_e2e::*;

const TOKEN: &str = "admin-admin-admin-admin";

fn config(extra: &str) -> String {
    format!("[auth]\nadmin_token = \"{TOKEN}\"\n[registry]\nflush_ms = 100\n{extra}")
}

fn admin(s: &Server, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = s.client().request(method, s.url(path)).bearer_auth(TOKEN);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let r = req.send().unwrap();
    (r.status().as_u16(), r.json().unwrap_or(Value::Null))
}

fn request(s: &Server, spec: Value) -> (u16, Value) {
    admin(s, reqwest::Method::POST, "/tools/request", Some(spec))
}

/// Follow `/tasks/{id}/events` to its end: the events.
fn events(s: &Server, id: &str) -> Vec<Value> {
    let r = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap()
        .get(s.url(&format!("/tasks/{id}/events")))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    BufReader::new(r)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| {
            l.strip_prefix("data: ")
                .map(|d| serde_json::from_str(d).unwrap())
        })
        .collect()
}

fn status(s: &Server, id: &str) -> Value {
    admin(
        s,
        reqwest::Method::GET,
        &format!("/tasks/{id}/status"),
        None,
    )
    .1
}

#[test]
fn a_python_tool_requested_by_source_serves_everywhere_and_survives_a_restart() {
    let (port, called_back) = toolhost_e2e::events::callback_listener();
    // Seed 004's messages: to a callback of their own and on GET /events.
    let (told_port, told) = toolhost_e2e::events::callback_listener();
    let mut s = Server::start_with(
        PluginsDir::new().add("calc", "calc"),
        Some(&config(&format!(
            "[tasks]\ncallback_allow = [\"127.0.0.1:{port}\", \"127.0.0.1:{told_port}\"]\n\
             [events]\ncallback_url = \"http://127.0.0.1:{told_port}/agent\"\n"
        ))),
    )
    .unwrap();
    let messages = toolhost_e2e::events::subscribe(&s, TOKEN);
    let (code, body) = request(
        &s,
        json!({
            "type": "build_tool",
            "name": "wordcount",
            "description": "Counts words.",
            "category": "text",
            "language": "python",
            "source": WORDCOUNT,
            "examples": [{"tool": "count", "input": {"text": "a b c"}, "output": 3}],
            "callback_url": format!("http://127.0.0.1:{port}/done"),
        }),
    );
    assert_eq!(code, 202, "{body}");
    assert_eq!(body["status"], "pending");
    let id = body["task_id"].as_str().unwrap().to_owned();

    let seen = events(&s, &id);
    let statuses: Vec<&str> = seen.iter().map(|e| e["status"].as_str().unwrap()).collect();
    let mut phases = statuses.clone();
    phases.dedup();
    assert_eq!(
        phases,
        ["pending", "building", "testing", "completed"],
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|e| e["message"]
            .as_str()
            .unwrap()
            .contains("example 1 (`count`) passed")),
        "{seen:?}"
    );
    let done = status(&s, &id);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["tool_id"], "wordcount_count");
    assert_eq!(done["result"]["url"], "/tools/wordcount_count/invoke");
    assert_eq!(done["last_run"]["exit_code"], 0, "{done}");
    assert!(
        done["last_run"]["command"]
            .as_str()
            .unwrap()
            .contains("sdk/python/build.sh")
    );
    let back = called_back
        .recv_timeout(Duration::from_secs(30))
        .expect("called back");
    assert_eq!(
        (&back["task_id"], &back["status"]),
        (&json!(id), &json!("completed")),
        "{back}"
    );
    // §5.2's tool_ready, the same to the subscriber and the callback.
    let ready = messages.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(ready["type"], "tool_ready", "{ready}");
    let payload = &ready["payload"];
    assert_eq!(
        (&payload["tool_id"], &payload["url"], &payload["task_id"]),
        (
            &json!("wordcount_count"),
            &json!("/tools/wordcount_count/invoke"),
            &json!(id)
        ),
        "{ready}"
    );
    assert!(
        payload["result"]
            .as_str()
            .unwrap()
            .contains("wordcount_count")
    );
    assert_eq!(told.recv_timeout(Duration::from_secs(30)).unwrap(), ready);

    // Served on every surface, as an active tool of its category.
    let (_, listed) = s.get("/tools?category=text");
    assert_eq!(listed["tools"][0]["tool_id"], "wordcount_count", "{listed}");
    assert_eq!(listed["tools"][0]["status"], "active");
    let (code, body) = s.invoke("wordcount_count", json!({"text": "one two three four"}));
    assert_eq!((code, &body["result"]), (200, &json!(4)), "{body}");
    let x = XAgent::connect(&s);
    assert_eq!(
        x.execute("wordcount_count", json!({"text": "a b"})),
        (200, json!(2))
    );
    let mut mcp = McpClient::new(&s);
    mcp.initialize("2025-06-18");
    let answer = mcp.call(2, "wordcount_count", json!({"text": "x"}));
    assert_eq!(answer["result"]["content"][0]["text"], "1", "{answer}");

    // A replacement that does not build leaves the old version serving.
    let (code, body) = request(
        &s,
        json!({"name": "wordcount", "language": "python", "source": WORDCOUNT}),
    );
    assert_eq!(code, 409, "a taken name without replace: {body}");
    let (code, body) = request(
        &s,
        json!({"name": "wordcount", "language": "python", "replace": true,
               "source": "from toolhost_sdk import Toolkit, tool\n\ndef broken(:\n"}),
    );
    assert_eq!(code, 202, "{body}");
    let bad = body["task_id"].as_str().unwrap().to_owned();
    assert_eq!(events(&s, &bad).last().unwrap()["status"], "failed");
    let failed = status(&s, &bad);
    // §5.3's tool_error, with the build's reason.
    let error = messages.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(
        (
            &error["type"],
            &error["payload"]["tool_id"],
            &error["payload"]["task_id"]
        ),
        (&json!("tool_error"), &json!("wordcount"), &json!(bad)),
        "{error}"
    );
    assert_eq!(error["payload"]["error"], failed["error"]);
    assert_eq!(told.recv_timeout(Duration::from_secs(30)).unwrap(), error);
    let delivered = r#"toolhost_event_callbacks_total{outcome="delivered"} 2"#;
    assert!(
        wait_for(Duration::from_secs(5), || s
            .metrics()
            .contains(delivered)
            .then_some(()))
        .is_some()
    );
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .starts_with("the build failed"),
        "{failed}"
    );
    assert!(
        failed["last_run"]["stderr"]
            .as_str()
            .unwrap()
            .contains("SyntaxError")
            || failed["last_run"]["stdout"]
                .as_str()
                .unwrap()
                .contains("SyntaxError"),
        "{failed}"
    );
    assert_eq!(s.invoke("wordcount_count", json!({"text": "still"})).0, 200);

    // Restarted (killed past a flush): still active, with its statistics,
    // and the tasks' records.
    std::thread::sleep(Duration::from_millis(500));
    s.restart().unwrap();
    let (_, tool) = s.get("/tools/wordcount_count");
    assert_eq!(tool["status"], "active", "{tool}");
    assert_eq!(tool["stats"]["call_count"], 4, "{tool}");
    assert_eq!(status(&s, &id)["status"], "completed");
    assert_eq!(status(&s, &bad)["status"], "failed");
}

#[test]
fn loops_bad_requests_and_restarts_end_tasks_cleanly() {
    let mut s =
        Server::start_with(PluginsDir::new().add("calc", "calc"), Some(&config(""))).unwrap();
    // Refused at submit: not an admin, a taken name, a callback host not
    // allowed, nonsense.
    let r = s
        .client()
        .post(s.url("/tools/request"))
        .json(&json!({"name": "x", "description": "d"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let (code, body) = request(
        &s,
        json!({"name": "calc", "language": "python", "source": WORDCOUNT}),
    );
    assert_eq!(code, 409, "{body}");
    let (code, body) = request(
        &s,
        json!({"name": "cb", "description": "d", "callback_url": "http://169.254.169.254/"}),
    );
    assert_eq!(code, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("callback_url refused"),
        "{body}"
    );
    let (code, _) = request(&s, json!({"name": "x", "source": "y", "language": "cobol"}));
    assert_eq!(code, 422);

    // A description only: pending until a builder claims it and submits
    // source; this source builds and loops in its example, which the
    // limits stop.
    let (code, body) = request(&s, json!({"name": "spinner", "description": "Spins."}));
    assert_eq!(code, 202, "{body}");
    let id = body["task_id"].as_str().unwrap().to_owned();
    assert_eq!(status(&s, &id)["status"], "pending");
    let post = |path: String, body: Value| admin(&s, reqwest::Method::POST, &path, Some(body));
    let (code, _) = post(
        format!("/tasks/{id}/submit"),
        json!({"language": "python", "source": "x"}),
    );
    assert_eq!(code, 409, "no source before a claim");
    let (code, body) = post(
        format!("/tasks/{id}/claim"),
        json!({"builder": "coding-agent"}),
    );
    assert_eq!((code, &body["status"]), (200, &json!("building")), "{body}");
    let (code, _) = post(format!("/tasks/{id}/claim"), json!({"builder": "another"}));
    assert_eq!(code, 409, "claimed once");
    // In JavaScript (the other SDK language a task builds).
    let spin = "import { tool } from 'toolhost-sdk';\n\ntool({ name: 'spin', description: 'Spin.', input: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } },\n  ({ n }) => { while (true) { n += 1; } });\n";
    let (code, body) = post(
        format!("/tasks/{id}/submit"),
        json!({"language": "javascript", "source": spin, "examples": [{"tool": "spin", "input": {"n": 1}}]}),
    );
    assert_eq!(code, 202, "{body}");
    assert_eq!(events(&s, &id).last().unwrap()["status"], "failed");
    let failed = status(&s, &id);
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.starts_with("example 1 (`spin`)")
            && (error.contains("out_of_fuel") || error.contains("timeout")),
        "{failed}"
    );
    assert!(
        !s.tool_ids().iter().any(|t| t.starts_with("spinner")),
        "never installed"
    );
    assert_eq!(
        s.invoke("calc_evaluate", json!({"expression": "1+1"})).0,
        200
    );

    // A restart in the middle of a build: the task ends failed, with why.
    let (code, body) = request(
        &s,
        json!({"name": "midway", "language": "python", "source": sources::unique(WORDCOUNT)}),
    );
    assert_eq!(code, 202, "{body}");
    let id = body["task_id"].as_str().unwrap().to_owned();
    wait_for(Duration::from_secs(60), || {
        (status(&s, &id)["status"] == "building").then_some(())
    })
    .expect("building");
    s.restart().unwrap();
    // (Once, on a busy run, the first answer after the restart still said
    // `building`: waited for, within bounds, until that is understood.)
    let ended = wait_for(Duration::from_secs(10), || {
        let now = status(&s, &id);
        (now["status"] == "failed").then_some(now)
    })
    .unwrap_or_else(|| status(&s, &id));
    assert_eq!(ended["status"], "failed", "{ended}");
    assert!(
        ended["error"]
            .as_str()
            .unwrap()
            .contains("the server stopped while this task was building"),
        "{ended}"
    );

    // A cancelled task ends at once; an ended one cannot be cancelled.
    let (_, body) = request(&s, json!({"name": "later", "description": "Some day."}));
    let id = body["task_id"].as_str().unwrap().to_owned();
    let (code, body) = admin(&s, reqwest::Method::DELETE, &format!("/tasks/{id}"), None);
    assert_eq!(
        (code, &body["status"]),
        (200, &json!("cancelled")),
        "{body}"
    );
    let (code, _) = admin(&s, reqwest::Method::DELETE, &format!("/tasks/{id}"), None);
    assert_eq!(code, 409);
    let (code, _) = admin(&s, reqwest::Method::GET, "/tasks/task-nope/status", None);
    assert_eq!(code, 404);
    let (code, list) = admin(&s, reqwest::Method::GET, "/tasks", None);
    assert_eq!(code, 200);
    assert_eq!(list["tasks"].as_array().unwrap().len(), 3, "{list}");
}

const SERVICE: &str = r#"
import json
from http.server import BaseHTTPRequestHandler, HTTPServer

class Handler(BaseHTTPRequestHandler):
    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.answer(200, {"ok": True})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.answer(200, {"reversed": body["text"][::-1]})

HTTPServer(("127.0.0.1", 8080), Handler).serve_forever()
"#;

fn reverse_tool() -> Value {
    json!({"name": "reverse", "endpoint_path": "/reverse", "http_method": "POST",
           "description": "Reverse a text.",
           "input_schema": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}})
}

#[test]
fn services_deploy_from_files_and_from_a_git_repository() {
    if !require_docker() {
        return;
    }
    let s = Server::start_with(
        PluginsDir::new().add("calc", "calc"),
        Some(&config("[tasks]\ngit_allow = [\"file\"]\n")),
    )
    .unwrap();
    // Inline files, the endpoints given.
    let (code, body) = request(
        &s,
        json!({
            "type": "service_deploy", "name": "reverser", "description": "Reverses texts.",
            "category": "text",
            "files": {"service.py": SERVICE},
            "command": ["python3", "-u", "/toolkit/service.py"],
            "internal_port": 8080, "health_path": "/health",
            "tools": [reverse_tool()],
            "examples": [{"tool": "reverse", "input": {"text": "abc"}, "output": {"reversed": "cba"}}],
        }),
    );
    assert_eq!(code, 202, "{body}");
    let id = body["task_id"].as_str().unwrap().to_owned();
    let seen = events(&s, &id);
    let done = status(&s, &id);
    assert_eq!(done["status"], "completed", "{done}\n{seen:?}\n{}", s.log());
    assert!(
        seen.iter()
            .any(|e| e["message"].as_str().unwrap().contains("as staging")),
        "{seen:?}"
    );
    let (code, body) = s.invoke("reverser_reverse", json!({"text": "toolhost"}));
    assert_eq!(
        (code, &body["result"]["reversed"]),
        (200, &json!("tsohloot")),
        "{body}"
    );
    let (_, tool) = s.get("/tools/reverser_reverse");
    assert_eq!(
        (&tool["runtime"], &tool["category"]),
        (&json!("docker"), &json!("text"))
    );

    // From a git repository, the endpoints from its OpenAPI document.
    let repo = tempfile::tempdir().unwrap();
    std::fs::write(repo.path().join("service.py"), SERVICE).unwrap();
    for args in [
        vec!["init", "-q", "-b", "main"],
        vec!["add", "service.py"],
        vec![
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "-q",
            "-m",
            "service",
        ],
    ] {
        assert!(
            std::process::Command::new("git")
                .args(&args)
                .current_dir(repo.path())
                .status()
                .unwrap()
                .success()
        );
    }
    let api_spec = json!({"openapi": "3.0.0", "info": {"title": "reverser", "version": "1"}, "paths": {
        "/reverse": {"post": {"operationId": "reverse", "summary": "Reverse a text.",
            "requestBody": {"content": {"application/json": {"schema": {
                "type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}}}}}}}});
    let (code, body) = request(
        &s,
        json!({
            "type": "github_deploy", "name": "gitrev", "description": "Reverses, from git.",
            "repo_url": format!("file://{}", repo.path().display()), "git_ref": "main",
            "command": ["python3", "-u", "/toolkit/service.py"], "internal_port": 8080,
            "api_spec": api_spec,
            "examples": [{"tool": "reverse", "input": {"text": "ab"}, "output": {"reversed": "ba"}}],
        }),
    );
    assert_eq!(code, 202, "{body}");
    let id = body["task_id"].as_str().unwrap().to_owned();
    events(&s, &id);
    let done = status(&s, &id);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["tool_id"], "gitrev_reverse");
    assert!(
        done["last_run"]["command"]
            .as_str()
            .unwrap()
            .contains("git clone"),
        "{done}"
    );
    assert_eq!(
        s.invoke("gitrev_reverse", json!({"text": "xy"})).1["result"]["reversed"],
        "yx"
    );

    // An example that fails: the toolkit is removed, the task says why.
    let (code, body) = request(
        &s,
        json!({
            "type": "service_deploy", "name": "wrongrev", "files": {"service.py": SERVICE},
            "command": ["python3", "-u", "/toolkit/service.py"], "internal_port": 8080,
            "tools": [reverse_tool()],
            "examples": [{"tool": "reverse", "input": {"text": "abc"}, "output": {"reversed": "abc"}}],
        }),
    );
    assert_eq!(code, 202, "{body}");
    let id = body["task_id"].as_str().unwrap().to_owned();
    events(&s, &id);
    let failed = status(&s, &id);
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["error"].as_str().unwrap().contains("expected"),
        "{failed}"
    );
    assert!(!s.plugins_dir().join("wrongrev").exists());
    assert_eq!(s.invoke("wrongrev_reverse", json!({"text": "a"})).0, 404);
    // Refused at submit: a git host not allowed, a context file out of bounds.
    let (code, body) = request(
        &s,
        json!({"type": "github_deploy", "name": "far", "repo_url": "https://example.com/x.git",
               "internal_port": 8080, "tools": [reverse_tool()]}),
    );
    assert_eq!(code, 422, "{body}");
    let (code, _) = request(
        &s,
        json!({"type": "service_deploy", "name": "sneaky", "files": {"../x": "y"},
               "internal_port": 8080, "tools": [reverse_tool()]}),
    );
    assert_eq!(code, 422);
}

/// Seed 004's own request bodies (§4.1, §4.2, §6), sent verbatim from the
/// seed's file: accepted, with what each field became said in `notes`.
#[test]
fn the_seeds_own_examples_are_accepted_as_written() {
    let examples: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/fixtures/seed004/examples.json")).unwrap(),
    )
    .unwrap();
    // §4.3 repairs `image_compress_api`: an API toolkit `image` with the
    // tool `compress_api` (never called here).
    let image = "description = \"Images.\"\n[api]\nbase_url = \"http://127.0.0.1:9\"\nallow = [\"127.0.0.1:9\"]\n\
                 [[tools]]\nname = \"compress_api\"\ndescription = \"Compress.\"\nmethod = \"POST\"\npath = \"/compress\"\n";
    let s = Server::start_with(
        PluginsDir::new().folder("image", &[("image.toml", image)]),
        Some(&config(
            "[tasks]\ncallback_allow = [\"caller\"]\ngit_allow = [\"github.com\"]\n",
        )),
    )
    .unwrap();
    let answers: Vec<(u16, Value)> = examples.iter().map(|e| request(&s, e.clone())).collect();
    for (status, body) in &answers {
        assert_eq!(*status, 202, "{body}");
    }
    let (deploy, build, described) = (&answers[0].1, &answers[1].1, &answers[2].1);
    let repair = &answers[3].1;
    assert_eq!(
        (repair["type"].as_str(), repair["name"].as_str()),
        (Some("repair_tool"), Some("image")),
        "{repair}"
    );
    let (_, task) = admin(
        &s,
        reqwest::Method::GET,
        &format!("/tasks/{}", repair["task_id"].as_str().unwrap()),
        None,
    );
    assert_eq!(task["status"], "pending", "{task}");
    assert_eq!(task["spec"]["tool"], "image_compress_api", "{task}");
    assert_eq!(task["spec"]["error"], "HTTP 503: Service Unavailable");
    assert_eq!(task["spec"]["container_id"], "abc123...");
    assert_eq!(task["context"]["backend"], "api", "{task}");
    assert!(
        task["context"]["files"]["image.toml"]
            .as_str()
            .unwrap()
            .contains("compress_api")
    );
    // A second repair of it while this one is open: 409; a tool not there: 404.
    let (status, body) = request(&s, examples[3].clone());
    assert_eq!(status, 409, "{body}");
    let mut nowhere = examples[3].clone();
    nowhere["tool_id"] = json!("nowhere_tool");
    let (status, body) = request(&s, nowhere);
    assert_eq!(status, 404, "{body}");
    assert!(
        body.to_string()
            .contains("no tool or toolkit `nowhere_tool` to repair"),
        "{body}"
    );
    // Claimed like a request; a module fix without a language is refused, named.
    let id = repair["task_id"].as_str().unwrap();
    let (status, _) = admin(
        &s,
        reqwest::Method::POST,
        &format!("/tasks/{id}/claim"),
        Some(json!({"builder": "b"})),
    );
    assert_eq!(status, 200);
    let (status, body) = admin(
        &s,
        reqwest::Method::POST,
        &format!("/tasks/{id}/submit"),
        Some(json!({"source": "x = 1"})),
    );
    assert_eq!(status, 422, "{body}");
    assert!(
        body.to_string().contains("`source` needs `language`"),
        "{body}"
    );
    let (status, body) = admin(
        &s,
        reqwest::Method::POST,
        &format!("/tasks/{id}/submit"),
        Some(json!({"files": {"image.toml": "x"}})),
    );
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("not the manifest"), "{body}");
    assert_eq!(deploy["type"], "github_deploy", "{deploy}");
    assert_eq!(deploy["name"], "project-api", "{deploy}");
    assert!(deploy["notes"].to_string().contains("/api/run"), "{deploy}");
    assert_eq!(build["type"], "request", "{build}");
    assert_eq!(build["name"], "text-summarizer-api", "{build}");
    assert!(
        build["notes"].to_string().contains("transformers, torch"),
        "{build}"
    );
    assert_eq!(described["type"], "request", "{described}");
    assert!(
        described["name"].as_str().unwrap().starts_with("tool-"),
        "{described}"
    );
    // What cannot be honoured is refused by name, not by shape.
    let mut gpu = examples[0].clone();
    gpu["tool_name"] = json!("gpu_api");
    gpu["requirements"]["gpu"] = json!(true);
    let (status, body) = request(&s, gpu);
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("requirements.gpu"), "{body}");
}
