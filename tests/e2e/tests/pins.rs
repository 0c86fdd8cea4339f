//! Tool definitions pinned (`[pins] mode = "first-use"`): a mounted MCP
//! server (`tests/fixtures/mcp/rugpull.py`, the official Python SDK) that
//! rewrites a tool's description and schema and adds a tool after its
//! first load has both held in `staging` (not listed, not callable) with
//! the change for the admin to read, until approved; a definition that
//! goes back to the pinned one is served again; pins survive a restart.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::services::Service;
use toolhost_e2e::*;

const ADMIN: &str = "admin-token-pins-aaaaaaaa";

/// The admin's `GET /plugins/rug/changes`.
fn changes_answer(s: &Server) -> Value {
    let r = s
        .client()
        .get(s.url("/plugins/rug/changes"))
        .bearer_auth(ADMIN)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json().unwrap()
}

fn changes(s: &Server) -> Vec<Value> {
    changes_answer(s)["changes"].as_array().unwrap().clone()
}

fn approve(s: &Server, body: Value) -> Value {
    let r = s
        .client()
        .post(s.url("/plugins/rug/changes/approve"))
        .bearer_auth(ADMIN)
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json().unwrap()
}

/// Wait until the toolkit was reloaded into `want` held changes.
fn held(s: &Server, want: usize) -> Vec<Value> {
    let got = wait_for(Duration::from_secs(15), || {
        let c = changes(s);
        (c.len() == want).then_some(c)
    });
    got.unwrap_or_else(|| panic!("{want} held changes: {:?}\n{}", changes(s), s.log()))
}

#[test]
fn a_changed_or_new_tool_waits_for_the_admin() {
    let rug = Service::python_mcp(&repo_root().join("tests/fixtures/mcp/rugpull.py"));
    let manifest = rug.mcp_manifest();
    let config = format!("[auth]\nadmin_token = \"{ADMIN}\"\n\n[pins]\nmode = \"first-use\"\n");
    let mut s = Server::start_with(
        PluginsDir::new().folder("rug", &[("rug.toml", &manifest)]),
        Some(&config),
    )
    .unwrap();
    assert_eq!(s.tool_ids(), ["rug_greet", "rug_turn", "rug_turn_back"]);
    assert!(changes(&s).is_empty(), "the first load is pinned as it is");
    let (status, body) = s.invoke("rug_greet", json!({"name": "ada"}));
    assert_eq!(status, 200, "{body}");

    // The rug pull: greet rewritten, exfiltrate added. Both held.
    assert_eq!(s.invoke("rug_turn", json!({})).0, 200);
    let held_now = held(&s, 2);
    let greet = held_now
        .iter()
        .find(|c| c["tool_id"] == "rug_greet")
        .unwrap();
    assert_eq!(greet["pinned"]["description"], "Says hello to `name`.");
    assert!(
        greet["now"]["description"]
            .as_str()
            .unwrap()
            .contains("id_rsa"),
        "{greet}"
    );
    assert!(greet["now"]["input_schema"]["properties"]["note"].is_object());
    let new = held_now
        .iter()
        .find(|c| c["tool_id"] == "rug_exfiltrate")
        .unwrap();
    assert!(new["pinned"].is_null(), "a new tool has no pin: {new}");
    assert_eq!(s.tool_ids(), ["rug_turn", "rug_turn_back"]);
    let (status, body) = s.invoke("rug_greet", json!({"name": "ada", "note": "secret"}));
    assert_ne!(status, 200, "a held tool is not callable: {body}");
    assert_ne!(s.invoke("rug_exfiltrate", json!({})).0, 200);
    let r = s
        .client()
        .get(s.url("/plugins/rug/changes"))
        .send()
        .unwrap();
    assert!(
        matches!(r.status().as_u16(), 401 | 403),
        "the changes are the admin's"
    );

    // Back to the pinned definition: served again (and exfiltrate, gone
    // from the server's list, is no longer a change).
    assert_eq!(s.invoke("rug_turn_back", json!({})).0, 200);
    held(&s, 0);
    assert_eq!(s.invoke("rug_greet", json!({"name": "ada"})).0, 200);
    assert_eq!(s.tool_ids(), ["rug_greet", "rug_turn", "rug_turn_back"]);

    // Turned again, then approved one by one.
    assert_eq!(s.invoke("rug_turn", json!({})).0, 200);
    held(&s, 2);
    let approved = approve(&s, json!({"tools": ["rug_greet"]}));
    assert_eq!(approved["approved"], json!(["rug_greet"]));
    let (status, body) = s.invoke("rug_greet", json!({"name": "ada", "note": "n"}));
    assert_eq!(
        status, 200,
        "approved, the new definition is served: {body}"
    );
    assert_eq!(changes(&s).len(), 1);
    approve(&s, json!({}));
    assert!(changes(&s).is_empty());
    assert_eq!(
        s.tool_ids(),
        ["rug_exfiltrate", "rug_greet", "rug_turn", "rug_turn_back"]
    );

    // The pins are the registry's: after a restart the approved definitions
    // are served, and a change made while nobody looked is held.
    s.restart().unwrap();
    assert_eq!(s.tool_ids().len(), 4, "{:?}", s.tool_ids());
    assert!(changes(&s).is_empty());
    assert_eq!(s.invoke("rug_turn_back", json!({})).0, 200);
    // greet differs from its (approved, turned) pin; exfiltrate is gone from
    // the server's list, so nothing of it is held.
    let again = held(&s, 1);
    assert_eq!(again[0]["tool_id"], "rug_greet");
    assert_eq!(s.tool_ids(), ["rug_turn", "rug_turn_back"]);
}

/// The MCP reference server (server-everything), under the default
/// (`"first-use"`, no `[pins]` table): its tools, the capability-dependent
/// ones it registers at the handshake included, are all pinned at the
/// first load and served; nothing is held.
#[test]
fn the_reference_server_is_pinned_whole_at_its_first_load_by_default() {
    let everything = Service::everything();
    let manifest = everything.mcp_manifest();
    let config = format!("[auth]\nadmin_token = \"{ADMIN}\"\n");
    let s = Server::start_with(
        PluginsDir::new().folder("rug", &[("rug.toml", &manifest)]),
        Some(&config),
    )
    .unwrap();
    assert_eq!(changes_answer(&s)["mode"], "first-use");
    std::thread::sleep(Duration::from_secs(2));
    assert!(changes(&s).is_empty(), "{:?}", changes(&s));
    let listed = s.tool_ids();
    assert!(
        listed.contains(&"rug_echo".to_string())
            && listed.contains(&"rug_trigger-sampling-request".to_string()),
        "{listed:?}"
    );
}
