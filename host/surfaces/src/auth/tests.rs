//! Tests of [`super`] (`auth/`).

use super::*;
use toolhost_core::callers::Policy;

fn config(tokens: &[&str], rate: u32, burst: u32) -> AuthConfig {
    AuthConfig {
        admin_token: Some("admin-admin-admin-admin".into()),
        tokens: tokens.iter().map(|t| t.to_string()).collect(),
        callers: Vec::new(),
        oauth: None,
        rate_limit_per_s: rate,
        rate_limit_burst: burst,
    }
}

#[test]
fn tokens_are_told_apart_and_the_admin_token_is_a_caller() {
    assert!(CallerAuth::from_config(&config(&[], 0, 1)).is_none());
    let auth = CallerAuth::from_config(&config(
        &["first-token-aaaaaaaa", "second-token-bbbbbbb"],
        0,
        1,
    ))
    .unwrap();
    let id = |t: &str| auth.identify(&Presented::new(t));
    assert_eq!(id("first-token-aaaaaaaa"), Some(0));
    assert_eq!(id("second-token-bbbbbbb"), Some(1));
    assert_eq!(id("admin-admin-admin-admin"), Some(2));
    assert_eq!(id("first-token-aaaaaaa"), None);
    assert_eq!(id(""), None);
    let name = |i: usize| auth.known[i].caller.name().to_owned();
    assert_eq!(
        (name(0), name(1), name(2)),
        ("token-1".into(), "token-2".into(), ADMIN.into())
    );
    assert!(auth.known[2].caller.policy().admin && !auth.known[0].caller.policy().admin);
}

#[test]
fn named_callers_with_plain_or_hashed_tokens() {
    let digest = "a3f0e4d1b5c1b4b5b0b5e27dfd2d1f76a0eb1f9eaf5dc43f8a4a4df1b0f2f6ad";
    let mut auth = config(&[], 0, 1);
    auth.callers = vec![
        CallerConfig {
            name: "alice".into(),
            token: Some("alice-token-aaaaaaaa".into()),
            tools: vec!["calc_*".into()],
            max_sessions: 3,
            ..CallerConfig::default()
        },
        CallerConfig {
            name: "bob".into(),
            token_sha256: Some(toolhost_core::text::hex(&Sha256::digest(
                b"bob-token-bbbbbbbbbb",
            ))),
            rate_limit_per_s: Some(1),
            ..CallerConfig::default()
        },
    ];
    assert_eq!(auth.check(), Ok(()));
    let built = CallerAuth::from_config(&auth).unwrap();
    let who = |t: &str| {
        built
            .identify(&Presented::new(t))
            .map(|i| built.known[i].caller.name().to_owned())
    };
    assert_eq!(who("alice-token-aaaaaaaa").as_deref(), Some("alice"));
    assert_eq!(who("bob-token-bbbbbbbbbb").as_deref(), Some("bob"));
    assert_eq!(who(digest), None, "a digest is no token");
    assert_eq!(
        built.known[0].caller.policy().tools,
        vec!["calc_*".to_owned()]
    );
    assert_eq!(built.known[0].caller.policy().max_sessions, 3);
    assert!(built.limiters[0].is_none() && built.limiters[1].is_some());
    // Refused settings.
    for (edit, says) in [
        (
            (|c: &mut CallerConfig| c.name = "Alice".into()) as fn(&mut CallerConfig),
            "caller name",
        ),
        (|c| c.name = "admin".into(), "`admin`"),
        (|c| c.name = "token-3".into(), "`admin`"),
        (|c| c.name = "bob".into(), "two callers"),
        (|c| c.token = Some("short".into()), "16 characters"),
        (|c| c.token_sha256 = Some("abc".into()), "one of"),
        (
            |c| {
                c.token = None;
                c.token_sha256 = Some("xyz".into());
            },
            "64 hex",
        ),
        (|c| c.token = None, "one of"),
        (|c| c.tools = vec![String::new()], "empty"),
    ] {
        let mut bad = auth.clone();
        edit(&mut bad.callers[0]);
        let err = bad.check().unwrap_err();
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn admin_routes_take_an_admin_caller() {
    let alice = Caller::named("alice", Policy::default());
    let boss = Caller::named(
        "boss",
        Policy {
            admin: true,
            ..Policy::default()
        },
    );
    let none = HeaderMap::new();
    assert!(check(None, &none, &boss).is_ok(), "no admin token needed");
    assert_eq!(
        check(None, &none, &alice).unwrap_err().status,
        StatusCode::FORBIDDEN
    );
    let t = AdminToken::new("s3cret-s3cret-s3cret");
    assert_eq!(
        check(Some(&t), &with_auth("Bearer s3cret-s3cret-s3cret"), &alice)
            .unwrap_err()
            .status,
        StatusCode::FORBIDDEN,
        "a caller without the admin policy is refused whatever it sends"
    );
}

#[test]
fn the_rate_limit_is_per_caller() {
    let auth = CallerAuth::from_config(&config(
        &["first-token-aaaaaaaa", "second-token-bbbbbbb"],
        1,
        3,
    ))
    .unwrap();
    let limiter = |i: usize| auth.limiters[i].as_ref().unwrap();
    for _ in 0..3 {
        assert!(limiter(0).check().is_ok());
    }
    assert!(limiter(0).check().is_err(), "the burst is spent");
    assert!(limiter(1).check().is_ok(), "another caller is not affected");
}

fn with_auth(v: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
    h
}

#[test]
fn admin_tokens() {
    let t = AdminToken::new("s3cret-s3cret-s3cret");
    assert_eq!(
        check(None, &with_auth("Bearer x"), &Caller::anonymous())
            .unwrap_err()
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        check(Some(&t), &HeaderMap::new(), &Caller::anonymous())
            .unwrap_err()
            .status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        check(Some(&t), &with_auth("Bearer s3cret"), &Caller::anonymous())
            .unwrap_err()
            .status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        check(
            Some(&t),
            &with_auth("Basic s3cret-s3cret-s3cret"),
            &Caller::anonymous()
        )
        .unwrap_err()
        .status,
        StatusCode::UNAUTHORIZED
    );
    assert!(
        check(
            Some(&t),
            &with_auth("Bearer s3cret-s3cret-s3cret"),
            &Caller::anonymous()
        )
        .is_ok()
    );
}

#[test]
fn bearer_needs_the_scheme() {
    let mut h = HeaderMap::new();
    h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
    assert_eq!(bearer(&h), None);
    h.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer abc "),
    );
    assert_eq!(bearer(&h), Some("abc"));
}
