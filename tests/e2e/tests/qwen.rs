//! Qwen-Agent's MCP manager (pinned, unmodified) mounts toolhost's tools:
//! every tool, including those without arguments, whose schemas once lacked
//! `properties` and made it refuse the whole server.

use toolhost_e2e::{PluginsDir, Server, python_venv, run_python};

#[test]
fn qwen_agents_mcp_manager_mounts_every_tool() {
    let s = Server::start(
        PluginsDir::new()
            .add("calc", "calc")
            .add("hostile", "hostile"),
    );
    let python = python_venv("tests/qwen/requirements.txt");
    let url = s.url("/mcp");
    let (ok, report) = run_python(
        &python,
        "tests/qwen/qwen_mcp.py",
        &["--url".as_ref(), url.as_ref()],
    );
    assert!(ok, "Qwen-Agent failed:\n{report}\nserver log:\n{}", s.log());
    for step in ["init", "schemas", "call", "no_arguments"] {
        assert!(
            report.lines().any(|l| l.starts_with(&format!("ok {step}"))),
            "step {step} did not pass:\n{report}"
        );
    }
}
