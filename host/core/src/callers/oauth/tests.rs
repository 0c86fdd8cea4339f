//! Tests of [`super`] (`callers/oauth.rs`): tokens minted here with the
//! test keys of `tests/fixtures/oauth`, the key set served on 127.0.0.1.

use super::*;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KEY1: &[u8] = include_bytes!("../../../../../tests/fixtures/oauth/key1.pem");
const KEY2: &[u8] = include_bytes!("../../../../../tests/fixtures/oauth/key2.pem");
const JWKS1: &str = include_str!("../../../../../tests/fixtures/oauth/jwks1.json");
const JWKS2: &str = include_str!("../../../../../tests/fixtures/oauth/jwks2.json");
const PUB1: &[u8] = include_bytes!("../../../../../tests/fixtures/oauth/key1.pub.pem");

/// A key-set server on 127.0.0.1 answering `served`'s text; counts requests.
async fn jwks_server(served: Arc<Mutex<String>>, hits: Arc<std::sync::atomic::AtomicUsize>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let body = served.lock().unwrap().clone();
            hits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn token(key: &[u8], kid: &str, claims: serde_json::Value) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, &claims, &EncodingKey::from_rsa_pem(key).unwrap()).unwrap()
}

fn good_claims() -> serde_json::Value {
    json!({"iss": "http://127.0.0.1/issuer", "aud": "http://127.0.0.1:8001/mcp",
           "sub": "user-1", "exp": now() + 300, "scope": "tools calc"})
}

async fn verifier(
    scopes: Vec<ScopeGrant>,
) -> (
    Verifier,
    Arc<Mutex<String>>,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    let served = Arc::new(Mutex::new(JWKS1.to_owned()));
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let port = jwks_server(served.clone(), hits.clone()).await;
    let config = OAuthConfig {
        issuer: "http://127.0.0.1/issuer".into(),
        resource: "http://127.0.0.1:8001/mcp".into(),
        jwks_uri: Some(format!("http://127.0.0.1:{port}/jwks")),
        required_scopes: vec!["tools".into()],
        scopes,
        leeway_s: 5,
        max_token_bytes: 8192,
        rate_limit_per_s: None,
        introspection: None,
    };
    (Verifier::new(config).unwrap(), served, hits)
}

#[tokio::test]
async fn a_good_token_is_a_caller_and_every_refusal_is_its_own() {
    let (v, _, hits) = verifier(Vec::new()).await;
    let caller = v.verify(&token(KEY1, "k1", good_claims())).await.unwrap();
    assert_eq!(caller.name(), "user-1");
    assert!(caller.space().unwrap().starts_with("oauth-"));
    assert!(
        caller.policy().tools.is_empty(),
        "no grants configured: every tool"
    );
    // The same subject is the same caller; the keys were fetched once.
    let again = v.verify(&token(KEY1, "k1", good_claims())).await.unwrap();
    assert!(again.same(&caller));
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);

    let refused = |claims: serde_json::Value| token(KEY1, "k1", claims);
    let mut c = good_claims();
    c["aud"] = json!("http://elsewhere.example/mcp");
    let cases: Vec<(String, &str)> = vec![
        (refused(c), "not for this resource"),
        (
            refused({
                let mut c = good_claims();
                c["iss"] = json!("http://evil.example");
                c
            }),
            "another issuer",
        ),
        (
            refused({
                let mut c = good_claims();
                c["exp"] = json!(now() - 600);
                c
            }),
            "expired",
        ),
        (
            refused({
                let mut c = good_claims();
                c["nbf"] = json!(now() + 600);
                c
            }),
            "not valid yet",
        ),
        (
            refused({
                let mut c = good_claims();
                c.as_object_mut().unwrap().remove("sub");
                c
            }),
            "required claim",
        ),
        (
            refused({
                let mut c = good_claims();
                c["scope"] = json!("calc");
                c
            }),
            "scope `tools`",
        ),
        (token(KEY2, "k1", good_claims()), "signature"),
        (token(KEY1, "no-such-kid", good_claims()), "unknown"),
        ("x".repeat(1 << 20), "too large"),
        ("not.a.jwt".into(), "not a JWT"),
    ];
    for (t, says) in cases {
        let e = v.verify(&t).await.unwrap_err();
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
    // alg none, and HS256 signed with the public key as the secret.
    let b64 = |v: serde_json::Value| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    };
    let none = format!(
        "{}.{}.",
        b64(json!({"alg": "none", "kid": "k1"})),
        b64(good_claims())
    );
    assert!(v.verify(&none).await.is_err());
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("k1".into());
    let hs =
        jsonwebtoken::encode(&header, &good_claims(), &EncodingKey::from_secret(PUB1)).unwrap();
    let e = v.verify(&hs).await.unwrap_err();
    assert!(e.to_string().contains("algorithm"), "{e}");
}

#[tokio::test]
async fn a_rotated_key_is_followed_and_the_old_one_refused() {
    let (v, served, hits) = verifier(Vec::new()).await;
    assert!(v.verify(&token(KEY1, "k1", good_claims())).await.is_ok());
    *served.lock().unwrap() = JWKS2.to_owned();
    // A token of the new key: its kid is unknown, so the keys are fetched
    // again (the first refetch is not held back).
    *v.fetching.lock().await = None;
    assert!(v.verify(&token(KEY2, "k2", good_claims())).await.is_ok());
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 2);
    // The old key is gone from the set: its tokens are refused, and asking
    // again within REFETCH_EVERY fetches nothing.
    let e = v
        .verify(&token(KEY1, "k1", good_claims()))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("unknown"), "{e}");
    assert!(v.verify(&token(KEY1, "k1", good_claims())).await.is_err());
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn scopes_grant_tools_and_admin() {
    let grants = vec![
        ScopeGrant {
            scope: "calc".into(),
            tools: vec!["calc_*".into()],
            admin: false,
        },
        ScopeGrant {
            scope: "ops".into(),
            tools: vec!["*".into()],
            admin: true,
        },
    ];
    let (v, _, _) = verifier(grants).await;
    let calc = v.verify(&token(KEY1, "k1", good_claims())).await.unwrap();
    assert!(calc.policy().allows_tool("calc_evaluate") && !calc.policy().allows_tool("files_read"));
    assert!(!calc.policy().admin);
    let mut c = good_claims();
    c["scope"] = json!("tools");
    let bare = v.verify(&token(KEY1, "k1", c)).await.unwrap();
    assert!(
        !bare.policy().allows_tool("calc_evaluate"),
        "no grant: no tool"
    );
    let mut c = good_claims();
    c["scope"] = json!("tools ops");
    c["sub"] = json!("operator");
    let ops = v.verify(&token(KEY1, "k1", c)).await.unwrap();
    assert!(ops.policy().admin && ops.policy().allows_tool("files_read"));
    assert!(!ops.same(&calc));
}

#[test]
fn metadata_and_its_url() {
    let config = OAuthConfig {
        issuer: "https://id.example.com".into(),
        resource: "https://tools.example.com/mcp".into(),
        jwks_uri: None,
        required_scopes: vec!["tools".into()],
        scopes: vec![ScopeGrant {
            scope: "calc".into(),
            ..ScopeGrant::default()
        }],
        leeway_s: 30,
        max_token_bytes: 8192,
        rate_limit_per_s: None,
        introspection: None,
    };
    assert_eq!(config.check(), Ok(()));
    assert_eq!(config.jwks_uri(), "https://id.example.com/jwks");
    assert_eq!(
        config.metadata_url(),
        "https://tools.example.com/.well-known/oauth-protected-resource/mcp"
    );
    let m = config.metadata();
    assert_eq!(m["resource"], "https://tools.example.com/mcp");
    assert_eq!(
        m["authorization_servers"],
        json!(["https://id.example.com"])
    );
    assert_eq!(m["scopes_supported"], json!(["calc", "tools"]));
    let bad = OAuthConfig {
        issuer: "id.example.com".into(),
        ..config
    };
    assert!(bad.check().unwrap_err().contains("issuer"));
}
