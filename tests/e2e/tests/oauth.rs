//! OAuth 2.1 access tokens as callers (MCP's authorization spec), wired
//! through the real server: the protected resource metadata (RFC 9728), the
//! 401 challenge naming it, JWT access tokens checked against a key set
//! served on 127.0.0.1 (tokens minted here with the test keys of
//! `tests/fixtures/oauth`), scopes mapped to tools, and an OAuth caller's
//! sessions apart from a static caller's. A real authorization server and
//! the MCP SDK's OAuth client are not part of this test.

use std::io::{Read, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use toolhost_e2e::*;

const ALICE: &str = "alice-token-aaaaaaaaaaaa";
const RESOURCE: &str = "https://toolhost.test/mcp";
const ISSUER: &str = "http://127.0.0.1/issuer";

/// The key set, served on 127.0.0.1 by a thread until the test ends.
fn jwks_server() -> u16 {
    let jwks =
        std::fs::read_to_string(repo_root().join("tests/fixtures/oauth/jwks1.json")).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{jwks}",
                jwks.len()
            );
        }
    });
    port
}

fn token(claims: Value) -> String {
    let key = std::fs::read(repo_root().join("tests/fixtures/oauth/key1.pem")).unwrap();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("k1".into());
    jsonwebtoken::encode(&header, &claims, &EncodingKey::from_rsa_pem(&key).unwrap()).unwrap()
}

fn claims(sub: &str, scope: &str) -> Value {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    json!({"iss": ISSUER, "aud": RESOURCE, "sub": sub, "exp": now + 300, "iat": now, "scope": scope})
}

#[test]
fn access_tokens_are_callers() {
    let port = jwks_server();
    let config = format!(
        r#"
[[auth.callers]]
name = "alice"
token = "{ALICE}"

[auth.oauth]
issuer = "{ISSUER}"
resource = "{RESOURCE}"
jwks_uri = "http://127.0.0.1:{port}/jwks"
required_scopes = ["tools"]

[[auth.oauth.scopes]]
scope = "calc"
tools = ["calc_*"]

[[auth.oauth.scopes]]
scope = "files"
tools = ["files_*"]
"#
    );
    let s = Server::start_with(
        PluginsDir::new().add("calc", "calc").add("files", "files"),
        Some(&config),
    )
    .expect("server starts");
    let invoke = |bearer: &str, session: &str, tool: &str, params: Value| {
        let r = s
            .client()
            .post(s.url(&format!("/tools/{tool}/invoke")))
            .bearer_auth(bearer)
            .header("x-toolhost-session", session)
            .json(&json!({ "params": params }))
            .send()
            .unwrap();
        let challenge = r
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned());
        (
            r.status().as_u16(),
            challenge,
            r.json::<Value>().unwrap_or(Value::Null),
        )
    };

    // The metadata, without a token.
    let r = s
        .client()
        .get(s.url("/.well-known/oauth-protected-resource/mcp"))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let meta: Value = r.json().unwrap();
    assert_eq!(meta["resource"], RESOURCE);
    assert_eq!(meta["authorization_servers"], json!([ISSUER]));
    // No token: 401 naming it.
    let r = s
        .client()
        .post(s.url("/mcp"))
        .json(&json!({}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(
        r.headers()["www-authenticate"],
        "Bearer resource_metadata=\"https://toolhost.test/.well-known/oauth-protected-resource/mcp\""
    );

    // A good token with the calc scope: calc, not files.
    let calc = token(claims("user-1", "tools calc"));
    let (status, _, body) = invoke(&calc, "s1", "calc_evaluate", json!({"expression": "6*7"}));
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = invoke(&calc, "s1", "files_list", json!({"path": "."}));
    assert_eq!(status, 403, "{body}");
    // Both scopes: its own `s1`, apart from Alice's (a static caller).
    let both = token(claims("user-1", "tools calc files"));
    let (status, _, body) = invoke(
        &both,
        "s1",
        "files_write",
        json!({"path": "mine.txt", "content": "oauth user's"}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = invoke(ALICE, "s1", "files_read", json!({"path": "mine.txt"}));
    assert_ne!(status, 200, "Alice read the OAuth caller's file: {body}");
    // MCP with the token.
    let r = s
        .client()
        .post(s.url("/mcp"))
        .bearer_auth(&calc)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}}}),
        )
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let listed = r.text().unwrap();
    assert!(
        listed.contains("calc_evaluate") && !listed.contains("files_"),
        "{listed}"
    );

    // Refusals: each its own, none a crash.
    let mut expired = claims("user-1", "tools calc");
    expired["exp"] = json!(1);
    let mut foreign = claims("user-1", "tools calc");
    foreign["aud"] = json!("https://elsewhere.test/mcp");
    for (bad, says) in [
        (token(expired), "expired"),
        (token(foreign), "not for this resource"),
        (token(claims("user-1", "calc")), "scope"),
        // Over `max_token_bytes` (8 KiB): refused unread.
        (format!("a.{}.b", "x".repeat(10_000)), "too large"),
    ] {
        let (status, challenge, body) =
            invoke(&bad, "s2", "calc_evaluate", json!({"expression": "1"}));
        assert!(matches!(status, 401 | 403), "{says}: {status} {body}");
        assert!(body.to_string().contains(says), "{says}: {body}");
        let challenge = challenge.unwrap_or_default();
        if status == 401 {
            assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        } else {
            assert!(challenge.contains("insufficient_scope"), "{challenge}");
        }
    }
    // A 1 MB token: hyper refuses the header block before toolhost reads it
    // (431), and closes; a client still writing the header then sees the
    // connection closed instead of the answer (seen on a busy machine).
    let huge = s
        .client()
        .post(s.url("/tools/calc_evaluate/invoke"))
        .bearer_auth(format!("a.{}.b", "x".repeat(1 << 20)))
        .json(&json!({"params": {"expression": "1"}}))
        .send();
    match huge {
        Ok(r) => assert_eq!(r.status().as_u16(), 431),
        Err(e) => assert!(
            format!("{e:?}").contains("BrokenPipe") || format!("{e:?}").contains("ConnectionReset"),
            "{e:?}"
        ),
    }
    let (status, _, _) = invoke(&calc, "s1", "calc_evaluate", json!({"expression": "1"}));
    assert_eq!(status, 200, "the server goes on");
}

/// An OAuth subject's own rate (`[auth.oauth] rate_limit_per_s`), apart
/// from another subject's; and an opaque token whose introspection endpoint
/// does not answer is 503 `auth_unavailable` (the token may be good), not a
/// 401 sending the client to authorize again.
#[test]
fn oauth_subjects_have_a_rate_and_a_silent_introspection_endpoint_is_503() {
    let port = jwks_server();
    let dead = free_port().unwrap();
    let config = format!(
        r#"
[auth]
rate_limit_burst = 5

[auth.oauth]
issuer = "{ISSUER}"
resource = "{RESOURCE}"
jwks_uri = "http://127.0.0.1:{port}/jwks"
rate_limit_per_s = 1

[auth.oauth.introspection]
endpoint = "http://127.0.0.1:{dead}/introspect"
client_id = "toolhost"
client_secret = "s"
"#
    );
    let s = Server::start_with(PluginsDir::new().add("calc", "calc"), Some(&config))
        .expect("server starts");
    let call = |bearer: &str| {
        let r = s
            .client()
            .post(s.url("/tools/calc_evaluate/invoke"))
            .bearer_auth(bearer)
            .json(&json!({"params": {"expression": "1+1"}}))
            .send()
            .unwrap();
        let retry = r
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        (
            r.status().as_u16(),
            retry,
            r.json::<Value>().unwrap_or(Value::Null),
        )
    };
    let one = token(claims("user-1", "tools"));
    let statuses: Vec<u16> = (0..12).map(|_| call(&one).0).collect();
    assert_eq!(statuses[..5], [200; 5], "the burst passes: {statuses:?}");
    assert!(statuses.contains(&429), "past the burst: {statuses:?}");
    let (status, retry, body) = call(&one);
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["kind"], "rate_limited");
    assert!(retry.is_some());
    // Another subject has a rate of its own.
    let (status, _, body) = call(&token(claims("user-2", "tools")));
    assert_eq!(status, 200, "{body}");

    let (status, retry, body) = call("an-opaque-token");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["kind"], "auth_unavailable");
    assert_eq!(retry.as_deref(), Some("1"));
}
