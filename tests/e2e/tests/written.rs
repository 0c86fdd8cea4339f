//! The files a call wrote, as an MCP client sees them (`resource_link`s),
//! told by the kernel rather than by walking the workspace: a workspace of
//! any size gets its links (the walk gave none past 10,000 files), and only
//! the call's own writes are linked, not what changed between calls.

use serde_json::{Value, json};
use toolhost_e2e::mcp::McpClient;
use toolhost_e2e::{PluginsDir, Server};

fn links(answer: &Value) -> Vec<String> {
    answer["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .filter(|b| b["type"] == "resource_link")
        .map(|b| b["uri"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_workspace_of_any_size_gets_the_links_of_what_a_call_wrote() {
    let s = Server::start(PluginsDir::new().add("files", "files"));
    let mut c = McpClient::new(&s);
    c.initialize("2025-11-25");
    let w = c.call(
        1,
        "files_write",
        json!({"path": "first.txt", "content": "1"}),
    );
    assert_eq!(links(&w), ["toolhost://workspace/first.txt"], "{w}");

    // 12,000 files put there behind the server's back, between calls.
    let root = s.data.path().join("data/workspaces");
    let workspace = std::fs::read_dir(&root)
        .expect("workspaces")
        .flatten()
        .next()
        .expect("the session's workspace")
        .path();
    for d in 0..12 {
        let dir = workspace.join(format!("bulk{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..1000 {
            std::fs::write(dir.join(format!("{i}.txt")), "x").unwrap();
        }
    }
    let w = c.call(
        2,
        "files_write",
        json!({"path": "bulk3/new.txt", "content": "new"}),
    );
    assert_eq!(
        links(&w),
        ["toolhost://workspace/bulk3/new.txt"],
        "only the call's own file, in a workspace of 12,002 files: {w}"
    );
    let w = c.call(
        3,
        "files_write",
        json!({"path": "bulk0/1.txt", "content": "changed"}),
    );
    assert_eq!(links(&w), ["toolhost://workspace/bulk0/1.txt"], "{w}");
    let r = c.call(4, "files_read", json!({"path": "bulk0/1.txt"}));
    assert!(links(&r).is_empty(), "a call that wrote nothing: {r}");
}
