//! Qwen-Agent's MCP manager (pinned, unmodified) mounts toolhost's tools:
//! every tool, including those without arguments, whose schemas once lacked
//! `properties` and made it refuse the whole server.

use std::process::Command;

use toolhost_e2e::{PluginsDir, Server, python_venv, repo_root};

#[test]
fn qwen_agents_mcp_manager_mounts_every_tool() {
    let s = Server::start(
        PluginsDir::new()
            .add("calc", "calc")
            .add("hostile", "hostile"),
    );
    let python = python_venv("tests/qwen/requirements.txt");
    let out = Command::new(python)
        .arg(repo_root().join("tests/qwen/qwen_mcp.py"))
        .arg("--url")
        .arg(s.url("/mcp"))
        .output()
        .expect("run qwen_mcp.py");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{report}");
    assert!(
        out.status.success(),
        "Qwen-Agent failed:\n{report}\nserver log:\n{}",
        s.log()
    );
    for step in ["init", "schemas", "call", "no_arguments"] {
        assert!(
            report.lines().any(|l| l.starts_with(&format!("ok {step}"))),
            "step {step} did not pass:\n{report}"
        );
    }
}
