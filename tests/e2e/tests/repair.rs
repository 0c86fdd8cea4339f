//! A service that starts failing its health path, end to end (seed 004's
//! §4.3 and §5.4 on a real container): the look every `[health]
//! interval_s` asks its running container's health path, finds 503, turns
//! its tools `degraded` and sends `health_alert` with that container; a
//! `repair_tool` task opens with the service's files, errors and health;
//! calls meanwhile go to its fallback (`served_by`); a coding agent on
//! `/admin/mcp` (the official MCP Python SDK) claims the task and submits
//! the fixed file; the fix is deployed with its example, and the tool is
//! `running` again and serves its calls itself.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::admin::{TOKEN, request as admin, task_ended as ended};
use toolhost_e2e::sources;
use toolhost_e2e::*;

const FLAKY: &str = include_str!("../../fixtures/services/flaky.py");
const TINY: &str = include_str!("../../fixtures/services/tiny.py");

fn service(script: &str, extra: &str, tools: &str) -> String {
    format!(
        "[docker]\nimage = \"toolhost-node:latest\"\ncommand = [\"python3\", \"-u\", \"/toolkit/{script}\"]\n\
         internal_port = 9000\nhealth_path = \"/health\"\nstart_timeout_s = 20\ncpus = 0.25\nmemory_mb = 128\n\
         {extra}\n{tools}"
    )
}

const TEXT: &str =
    "input_schema = { type = \"object\", properties = { text = { type = \"string\" } } }";

fn admin_get(s: &Server, path: &str) -> Value {
    s.client()
        .get(s.url(path))
        .bearer_auth(TOKEN)
        .send()
        .unwrap()
        .json()
        .unwrap()
}

fn health(s: &Server, id: &str) -> Value {
    s.get(&format!("/tools/{id}")).1["health"].clone()
}

#[test]
fn a_failing_service_is_degraded_served_by_its_fallback_repaired_and_running_again() {
    if !require_docker() {
        return;
    }
    let flaky = service(
        "flaky.py",
        "[health]\ninterval_s = 1\n[fallback]\necho = [\"backup_ok\"]\n",
        &format!(
            "[[tools]]\nname = \"echo\"\ndescription = \"Echo.\"\nendpoint_path = \"/echo\"\n{TEXT}\n\
             [[tools]]\nname = \"break\"\ndescription = \"Break it.\"\nendpoint_path = \"/break\"\n\
             input_schema = {{ type = \"object\" }}\n"
        ),
    );
    let backup = service(
        "tiny.py",
        "",
        &format!(
            "[[tools]]\nname = \"ok\"\ndescription = \"Echo.\"\nendpoint_path = \"/ok\"\n{TEXT}\n"
        ),
    );
    let s = Server::start_with(
        PluginsDir::new()
            .folder("backup", &[("backup.toml", &backup), ("tiny.py", TINY)])
            .folder("flaky", &[("flaky.toml", &flaky), ("flaky.py", FLAKY)]),
        Some(&format!(
            "[auth]\nadmin_token = \"{TOKEN}\"\n[health]\ninterval_s = 60\nrepair = \"request\"\n"
        )),
    )
    .unwrap();
    let alerts = toolhost_e2e::events::subscribe(&s, TOKEN);

    // Healthy: served by itself.
    let (code, body) = s.invoke("flaky_echo", json!({"text": "one"}));
    assert_eq!(code, 200, "{body}\n{}", s.log());
    assert_eq!(body["result"]["version"], 1, "{body}");
    assert!(body.get("served_by").is_none(), "{body}");
    assert!(
        wait_for(Duration::from_secs(10), || {
            health(&s, "flaky_echo")["last_check"]
                .as_str()
                .filter(|c| c.contains("answered 200"))
                .map(str::to_owned)
        })
        .is_some(),
        "the look asks the running container: {}",
        health(&s, "flaky_echo")
    );

    // Its health path starts failing: degraded at the next look (its own
    // interval, 1 s, not the server's 60 s), with the container asked.
    assert_eq!(s.invoke("flaky_break", json!({})).0, 200);
    let alert = loop {
        let a = alerts
            .recv_timeout(Duration::from_secs(15))
            .unwrap_or_else(|_| panic!("no health_alert\n{}", s.log()));
        if a["type"] == "health_alert" && a["payload"]["tool_id"] == "flaky_echo" {
            break a;
        }
    };
    let payload = &alert["payload"];
    assert!(
        payload["error"].as_str().unwrap().contains("answered 503"),
        "{alert}"
    );
    let container = payload["container_id"].as_str().unwrap();
    assert!(
        s.containers()
            .iter()
            .any(|c| c.starts_with(&container[..12])),
        "{container} is the service's container: {:?}",
        s.containers()
    );
    assert!(payload["last_healthy"].as_str().unwrap().ends_with('Z'));
    let h = health(&s, "flaky_echo");
    assert_eq!(
        (h["state"].as_str(), h["container_id"].as_str()),
        (Some("degraded"), Some(container)),
        "{h}"
    );

    // Calls meanwhile: its fallback serves, named, the input as given.
    let (code, body) = s.invoke("flaky_echo", json!({"text": "two"}));
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["served_by"], "backup_ok", "{body}");
    assert_eq!(body["result"]["echo"], json!({"text": "two"}), "{body}");

    // A repair task opened by itself, with what a builder needs.
    let task = wait_for(Duration::from_secs(10), || {
        admin_get(&s, "/tasks")["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "repair_tool")
            .cloned()
    })
    .expect("a repair_tool task");
    assert_eq!(task["status"], "pending", "{task}");
    assert_eq!(task["spec"]["name"], "flaky");
    assert_eq!(
        task["spec"]["container_id"], container,
        "§4.3's fields: {task}"
    );
    assert!(
        task["spec"]["error"].as_str().unwrap().contains("503"),
        "{task}"
    );
    assert_eq!(task["context"]["files"]["flaky.py"], FLAKY);
    assert_eq!(task["context"]["health"][0]["health"]["state"], "degraded");
    // One repair per toolkit, though both of its tools are degraded.
    let repairs = admin_get(&s, "/tasks")["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == "repair_tool")
        .count();
    assert_eq!(repairs, 1);

    // A coding agent repairs it over /admin/mcp.
    let url = s.url("/admin/mcp");
    let (ok, report) = run_python(
        &python_venv("tests/mcp/requirements.txt"),
        "tests/mcp/repairing_agent.py",
        &[
            "--url".as_ref(),
            url.as_ref(),
            "--token".as_ref(),
            TOKEN.as_ref(),
            "--toolkit".as_ref(),
            "flaky".as_ref(),
        ],
    );
    assert!(
        ok,
        "the repairing agent failed:\n{report}\nserver log:\n{}",
        s.log()
    );
    let seen = last_json(&report);
    assert_eq!(
        seen["claimed"],
        json!({"status": "building", "claimed_by": "repairing-agent"}),
        "{seen}"
    );
    assert_eq!(seen["compiled"], true, "{seen}");
    assert_eq!(seen["task"]["status"], "completed", "{seen}\n{}", s.log());

    // Running again, served by itself, the fixed version.
    assert!(
        wait_for(Duration::from_secs(10), || {
            (health(&s, "flaky_echo")["state"] == "running").then_some(())
        })
        .is_some(),
        "{}",
        health(&s, "flaky_echo")
    );
    let (code, body) = s.invoke("flaky_echo", json!({"text": "three"}));
    assert_eq!(code, 200, "{body}");
    assert!(body.get("served_by").is_none(), "{body}");
    assert!(body.to_string().contains("\"version\":2"), "{body}");
    // Breaking it no longer breaks it.
    assert_eq!(s.invoke("flaky_break", json!({})).0, 200);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(health(&s, "flaky_echo")["state"], "running");
}

/// A tool a build task made, repaired by source (seed §4.3 asked by hand):
/// the repair carries the source it was built from; the claiming builder's
/// new module is built with the examples the tool was made with, and
/// replaces it, keeping its manifest (description, category).
#[test]
fn a_built_tool_is_repaired_by_its_new_source_with_its_own_examples() {
    let s = Server::start_with(
        PluginsDir::new(),
        Some(&format!("[auth]\nadmin_token = \"{TOKEN}\"\n")),
    )
    .unwrap();
    let (code, made) = admin(
        &s,
        reqwest::Method::POST,
        "/tools/request",
        Some(
            json!({"type": "build_tool", "name": "wordcount", "description": "Counts words.",
            "category": "text", "language": "python", "source": sources::WORDCOUNT,
            "examples": [{"tool": "count", "input": {"text": "a b c"}, "output": 3}],
            "cost_usd": 1.5}),
        ),
    );
    assert_eq!(code, 202, "{made}");
    assert_eq!(
        ended(&s, made["task_id"].as_str().unwrap())["status"],
        "completed"
    );
    // Its builder's reported cost entered in the billing log at completion.
    let (_, budget) = admin(&s, reqwest::Method::GET, "/budget", None);
    let billed = &budget["transactions"][0];
    assert_eq!(
        (billed["amount_usd"].as_f64(), billed["provider"].as_str()),
        (Some(1.5), Some("builder:toolhost")),
        "{budget}"
    );
    assert_eq!(billed["task_id"], made["task_id"]);
    assert_eq!(
        s.invoke("wordcount_count", json!({"text": "a, b"})).1["result"],
        2
    );

    let (code, repair) = admin(
        &s,
        reqwest::Method::POST,
        "/tools/request",
        Some(json!({"type": "repair_tool", "tool_id": "wordcount_count",
            "error": "counts punctuation as words", "description": "a lone comma is a word"})),
    );
    assert_eq!(code, 202, "{repair}");
    let id = repair["task_id"].as_str().unwrap();
    let (_, task) = admin(&s, reqwest::Method::GET, &format!("/tasks/{id}"), None);
    assert_eq!(
        task["context"]["source"]["source"],
        sources::WORDCOUNT,
        "{task}"
    );
    assert_eq!(task["context"]["source"]["language"], "python");
    assert_eq!(
        task["spec"]["examples"][0]["output"], 3,
        "the tool's own examples: {task}"
    );
    let (code, _) = admin(
        &s,
        reqwest::Method::POST,
        &format!("/tasks/{id}/claim"),
        Some(json!({"builder": "b"})),
    );
    assert_eq!(code, 200);
    let fixed = sources::WORDCOUNT.replace(
        "return len(text.split())",
        "return len([w for w in text.split() if any(c.isalnum() for c in w)])",
    );
    let (code, body) = admin(
        &s,
        reqwest::Method::POST,
        &format!("/tasks/{id}/submit"),
        Some(json!({"language": "python", "source": fixed})),
    );
    assert_eq!(code, 202, "{body}");
    let done = ended(&s, id);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        s.invoke("wordcount_count", json!({"text": "a , b"})).1["result"],
        2
    );
    let (_, tool) = s.get("/tools/wordcount_count");
    assert_eq!(
        (
            tool["description"].as_str().is_some(),
            tool["category"].as_str()
        ),
        (true, Some("text")),
        "{tool}"
    );
    let manifest = std::fs::read_to_string(s.plugins_dir().join("wordcount.toml")).unwrap();
    assert!(
        manifest.contains("Counts words."),
        "the manifest it served with: {manifest}"
    );
}
