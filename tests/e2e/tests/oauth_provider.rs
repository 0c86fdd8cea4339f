//! MCP's authorization flow end to end, with real parts on both sides of
//! toolhost: a real OpenID provider (npm's certified `oidc-provider`,
//! `tests/oauth/provider.mjs`) and the official MCP Python SDK's own OAuth
//! client (`tests/oauth/mcp_oauth_client.py`). The SDK meets toolhost's
//! 401, follows its protected resource metadata to the provider, registers
//! itself, runs authorization code + PKCE for toolhost's `/mcp` as the
//! resource, and lists and calls tools with the token; toolhost checks the
//! token (a JWT against the provider's keys, or an opaque token by
//! introspection) and serves what its scopes grant.

use std::ffi::OsStr;

use serde_json::{Value, json};
use toolhost_e2e::services::Service;
use toolhost_e2e::*;

const ADMIN: &str = "admin-token-aaaaaaaaaaaaa";

/// One run of the SDK's flow against a provider issuing `opaque` or JWT
/// tokens with the scopes `calc files`; returns the client's report and
/// the admin's `GET /callers`.
fn flow(opaque: bool) -> (Value, Value) {
    let provider_port = free_port().unwrap();
    let issuer = format!("http://127.0.0.1:{provider_port}");
    let introspection = if opaque {
        format!(
            "[auth.oauth.introspection]\nendpoint = \"{issuer}/token/introspection\"\n\
             client_id = \"toolhost\"\nclient_secret = \"toolhost-introspection-secret\"\n"
        )
    } else {
        String::new()
    };
    let config = format!(
        r#"
[[auth.callers]]
name = "ops"
token = "{ADMIN}"
admin = true

[auth.oauth]
issuer = "{issuer}"
resource = "http://127.0.0.1:@PORT@/mcp"
jwks_uri = "{issuer}/jwks"
{introspection}
[[auth.oauth.scopes]]
scope = "calc"
tools = ["calc_*"]

[[auth.oauth.scopes]]
scope = "files"
tools = ["files_*"]
"#
    );
    let s = Server::start_with(
        PluginsDir::new()
            .add("calc", "calc")
            .add("files", "files")
            .add("checksum", "checksum"),
        Some(&config),
    )
    .expect("server starts");
    let _provider = Service::oidc_provider(provider_port, &s.url("/mcp"), "calc files", opaque);

    let python = python_venv("tests/mcp/requirements.txt");
    let report = tempfile::NamedTempFile::new().unwrap();
    let url = s.url("/mcp");
    let args: Vec<&OsStr> = vec![
        OsStr::new(&url),
        OsStr::new("--report"),
        report.path().as_os_str(),
        OsStr::new("--call"),
        OsStr::new("calc_evaluate"),
        OsStr::new(r#"{"expression": "6*7"}"#),
        OsStr::new("--call"),
        OsStr::new("files_write"),
        OsStr::new(r#"{"path": "note.txt", "content": "from the SDK"}"#),
    ];
    let (ok, out) = run_python(&python, "tests/oauth/mcp_oauth_client.py", &args);
    assert!(ok, "the SDK's OAuth flow failed:\n{out}\n{}", s.log());
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(report.path()).unwrap()).unwrap();
    let callers: Value = s
        .client()
        .get(s.url("/callers"))
        .bearer_auth(ADMIN)
        .send()
        .unwrap()
        .json()
        .unwrap();
    (report, callers)
}

/// What both token formats must show: the flow went through the
/// provider's authorization and login steps; the tools listed are those
/// the scopes grant (no `checksum_*`); both calls ran; the provider's
/// subject is a caller the admin sees, with its calls counted.
fn common(report: &Value, callers: &Value) {
    let hops: Vec<&str> = report["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert_eq!(hops.first(), Some(&"/auth"), "{report}");
    assert!(
        hops.iter().any(|h| h.starts_with("/interaction/")),
        "{report}"
    );
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"calc_evaluate"), "{tools:?}");
    assert!(tools.contains(&"files_write"), "{tools:?}");
    assert!(
        tools
            .iter()
            .all(|t| t.starts_with("calc_") || t.starts_with("files_")),
        "tools past the token's scopes: {tools:?}"
    );
    assert_eq!(report["calls"][0]["is_error"], json!(false), "{report}");
    assert_eq!(
        report["calls"][0]["structured"]["value"],
        json!(42.0),
        "{report}"
    );
    assert_eq!(report["calls"][1]["is_error"], json!(false), "{report}");
    assert_eq!(
        report["token_type"].as_str().map(str::to_lowercase),
        Some("bearer".into())
    );
    let alice = callers["callers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "oauth" && c["name"] == "alice")
        .unwrap_or_else(|| panic!("the OAuth subject in GET /callers: {callers}"));
    assert!(
        alice["usage"]["ok"].as_u64().unwrap_or(0) >= 2,
        "its calls counted: {alice}"
    );
    // The identity is the subject, its client and its scopes.
    assert_eq!(alice["grant"]["client"], report["client_id"], "{alice}");
    let scopes = alice["grant"]["scopes"].as_array().unwrap();
    assert!(
        scopes.contains(&json!("calc")) && scopes.contains(&json!("files")),
        "{alice}"
    );
}

#[test]
fn the_sdk_gets_a_jwt_from_a_real_provider_and_calls_tools() {
    let (report, callers) = flow(false);
    common(&report, &callers);
    // A JWT for toolhost's /mcp (RFC 8707), from the provider, for its user.
    let token = &report["token"];
    assert!(token["aud"].as_str().unwrap().ends_with("/mcp"), "{token}");
    assert!(
        token["iss"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:"),
        "{token}"
    );
    assert_eq!(token["sub"], "alice");
    assert_eq!(
        token["client_id"], report["client_id"],
        "the client the SDK registered"
    );
}

#[test]
fn the_sdk_gets_an_opaque_token_that_toolhost_introspects() {
    let (report, callers) = flow(true);
    common(&report, &callers);
    assert_eq!(report["token"], Value::Null, "an opaque token: {report}");
}
