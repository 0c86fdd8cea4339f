//! The builder tools for coding agents (seed 004 §7), admin only, driven
//! by the official MCP Python SDK as a coding agent would
//! (`tests/mcp/coding_agent.py`): an environment in a Docker node, files,
//! commands (no network, killed at their time limit), a tool registered
//! from a file of it, built, tested and served; every action in the audit
//! log; nothing of it for callers without the admin token.

use std::path::PathBuf;

use serde_json::{Value, json};
use toolhost_e2e::*;

const TOKEN: &str = "admin-admin-admin-admin";

fn mcp_python() -> PathBuf {
    python_venv("tests/mcp/requirements.txt")
}

#[test]
fn a_coding_agent_builds_and_registers_a_tool_over_mcp() {
    if !require_docker() {
        return;
    }
    // The allocation rule leaves room for one environment of 0.5 CPU.
    let cores = std::thread::available_parallelism().unwrap().get() as f64;
    let s = Server::start_with(
        PluginsDir::new().add("calc", "calc"),
        Some(&format!(
            "[auth]\nadmin_token = \"{TOKEN}\"\n[docker]\nmax_cpu_share = {}\n",
            0.5 / cores
        )),
    )
    .unwrap();
    // Not for callers without the admin token, and never in the catalog.
    let r = s
        .client()
        .get(s.url("/admin/builder/tools"))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = s
        .client()
        .post(s.url("/admin/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(!s.tool_ids().iter().any(|t| t.contains("create_env")));

    let url = s.url("/admin/mcp");
    let (ok, report) = run_python(
        &mcp_python(),
        "tests/mcp/coding_agent.py",
        &[
            "--url".as_ref(),
            url.as_ref(),
            "--token".as_ref(),
            TOKEN.as_ref(),
        ],
    );
    assert!(
        ok,
        "the coding agent failed:\n{report}\nserver log:\n{}",
        s.log()
    );
    let seen = last_json(&report);
    assert_eq!(
        seen["tools"],
        json!([
            "claim_task",
            "create_env",
            "create_uv_project",
            "destroy_env",
            "open_tasks",
            "read_file",
            "rebuild_docker_ports",
            "register_tool",
            "run",
            "run_in_uv",
            "submit_fix",
            "task_status",
            "uv_add_dependency",
            "write_file"
        ])
    );
    assert_eq!(seen["run"]["exit_code"], 0, "{seen}");
    assert!(
        seen["run"]["stdout"].as_str().unwrap().contains("parsed"),
        "{seen}"
    );
    assert_ne!(
        seen["network_exit"], 0,
        "no network in an environment: {seen}"
    );
    assert_eq!(seen["slow"]["timed_out"], true, "{seen}");
    assert_eq!(seen["escape_is_error"], true, "{seen}");
    assert_eq!(seen["task"]["status"], "completed", "{seen}");
    assert_eq!(seen["task"]["result"]["tool_id"], "shouter_shout");
    assert_eq!(seen["read_back"], true);
    // uv (seed 004 §7).
    assert_eq!(seen["uv_project"]["project_dir"], "/work/demo", "{seen}");
    assert!(
        seen["uv_project"]["python"]
            .as_str()
            .unwrap()
            .starts_with("Python 3."),
        "{seen}"
    );
    assert_eq!(seen["uv_add"]["status"], "success", "{seen}");
    assert_eq!(seen["uv_run"]["exit_code"], 0, "{seen}");
    let out = seen["uv_run"]["stdout"].as_str().unwrap();
    assert!(
        out.starts_with("1.16.0 /work/demo/.venv"),
        "six from the project's own environment: {seen}"
    );
    assert_eq!(seen["uv_missing"]["status"], "error", "{seen}");
    assert!(
        seen["uv_missing"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot be fetched from PyPI"),
        "{seen}"
    );
    assert_eq!(seen["uv_hostile_is_error"], true, "{seen}");
    assert_ne!(seen["rebuilt"]["env_id"], seen["uv_project"]["env_id"]);
    assert_eq!(seen["rebuilt"]["memory_mb"], 384, "{seen}");
    assert_eq!(seen["rebuilt"]["port_mapping"], json!({}), "{seen}");
    assert!(
        seen["rebuilt"]["ports"]
            .as_str()
            .unwrap()
            .contains("not published"),
        "{seen}"
    );
    assert_eq!(seen["rebuilt_kept_files"], true, "{seen}");
    assert_eq!(seen["old_env_gone"], true, "{seen}");
    assert_eq!(seen["gone_is_error"], true);

    // The tool serves; the environment is gone; every action was audited.
    let (code, body) = s.invoke("shouter_shout", json!({"text": "done"}));
    assert_eq!((code, &body["result"]), (200, &json!("DONE!")), "{body}");
    assert!(
        wait_for(std::time::Duration::from_secs(20), || s
            .containers()
            .is_empty()
            .then_some(()))
        .is_some(),
        "the environment's container is removed"
    );
    let audit: Value = s
        .client()
        .get(s.url("/admin/audit"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    for action in [
        "create_env",
        "write_file",
        "run",
        "register_tool",
        "task_status",
        "destroy_env",
    ] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }
    let write = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "write_file")
        .unwrap();
    assert!(
        write["args"]["content"].as_str().unwrap().starts_with('<'),
        "file contents are not copied into the log: {write}"
    );
    // In the registry, oldest first, each naming its actor and replica.
    let entries = audit["entries"].as_array().unwrap();
    assert!(
        entries
            .windows(2)
            .all(|w| w[0]["at"].as_i64() <= w[1]["at"].as_i64())
    );
    assert!(
        entries
            .iter()
            .all(|e| e["actor"] == "admin" && e["replica"].as_str().is_some_and(|r| !r.is_empty())),
        "{audit}"
    );

    // The native surface: the same tools; environments hold their share
    // of the host (the allocation rule), shown in GET /system.
    let builder = |tool: &str, args: Value| {
        let r = s
            .client()
            .post(s.url(&format!("/admin/builder/{tool}")))
            .bearer_auth(TOKEN)
            .json(&args)
            .send()
            .unwrap();
        (
            r.status().as_u16(),
            r.json::<Value>().unwrap_or(Value::Null),
        )
    };
    assert_eq!(
        builder("read_file", json!({"env_id": "env-nope", "path": "x"})).0,
        404
    );
    let (code, first) = builder("create_env", json!({"cpus": 0.5, "memory_mb": 256}));
    assert_eq!(code, 200, "{first}");
    let system: Value = s
        .client()
        .get(s.url("/system"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        system["allocations"]["docker"]["by_toolkit"]["builder"]["cpus"], 0.5,
        "{system}"
    );
    let (code, second) = builder("create_env", json!({"cpus": 0.5, "memory_mb": 256}));
    assert_eq!(code, 429, "{second}");
    assert!(
        second["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_cpu_share"),
        "{second}"
    );
    let env = first["result"]["env_id"].as_str().unwrap();
    assert_eq!(builder("destroy_env", json!({"env_id": env})).0, 200);
    assert_eq!(
        builder("create_env", json!({"cpus": 0.5})).0,
        200,
        "room again"
    );
}
