//! Who may call what: bearer tokens, compared in constant time, a rate limit
//! per token, and the admin token's routes.
//!
//! With no caller token configured every route is open (the default bind is
//! loopback; [`super::guard`] keeps web pages out). With tokens, every route
//! but `/health` (and `/health/ready`'s bare status) and the paths the
//! router declares public (the console's static files) needs
//! `Authorization: Bearer <token>`; the admin token is accepted as a caller
//! token too, and the admin routes check it again themselves ([`check`],
//! [`required`]).

use std::num::NonZeroU32;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use sha2::{Digest, Sha256};

use super::error::ApiError;
use serde::{Deserialize, Serialize};

/// A configured secret, kept as a digest so checks take the same time
/// whatever the presented token looks like.
#[derive(Clone)]
pub struct Token([u8; 32]);

impl Token {
    pub fn new(token: &str) -> Self {
        Token(Sha256::digest(token.as_bytes()).into())
    }

    /// Constant-time comparison of digests (no early exit, no length leak).
    pub fn matches(&self, presented: &Presented) -> bool {
        presented
            .0
            .iter()
            .zip(self.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

/// The digest of a presented token, computed once per request.
pub struct Presented([u8; 32]);

impl Presented {
    pub fn new(token: &str) -> Self {
        Presented(Sha256::digest(token.as_bytes()).into())
    }
}

/// The token of `Authorization: Bearer <token>`, if the header has that shape.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// Access control.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Bearer token of the admin routes (plugin upload and delete). Unset:
    /// those routes are refused. The environment variable
    /// `TOOLHOST_ADMIN_TOKEN` sets it too.
    pub admin_token: Option<String>,
    /// Bearer tokens of callers. When any is set (here or with the
    /// environment variable `TOOLHOST_TOKEN`), every route but `/health`
    /// needs `Authorization: Bearer <token>` (the admin token is accepted too).
    pub tokens: Vec<String>,
    /// Requests per second each token may make, sustained (0: no limit).
    /// Beyond it: 429 with `Retry-After`.
    pub rate_limit_per_s: u32,
    /// Requests a token may make at once above the sustained rate.
    pub rate_limit_burst: u32,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            admin_token: None,
            tokens: Vec::new(),
            rate_limit_per_s: 0,
            rate_limit_burst: 50,
        }
    }
}

impl AuthConfig {
    /// Whether callers must present a token.
    pub fn required(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// Why these settings cannot work, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.admin_token.as_ref().is_some_and(|t| t.len() < 16) {
            return Err("auth.admin_token must be at least 16 characters".into());
        }
        if self
            .tokens
            .iter()
            .any(|t| t.len() < 16 || t.chars().any(char::is_whitespace))
        {
            return Err("every auth token must be at least 16 characters, without spaces".into());
        }
        if self.rate_limit_per_s != 0 && self.rate_limit_burst < 1 {
            return Err(
                "auth.rate_limit_burst must be at least 1 when auth.rate_limit_per_s is set".into(),
            );
        }
        Ok(())
    }
}

/// The caller check of the whole router.
pub struct CallerAuth {
    tokens: Vec<Token>,
    admin: Option<Token>,
    /// Keyed by the token's index (the admin token: `tokens.len()`): a fixed
    /// set of keys, so its memory is bounded.
    limiter: Option<DefaultKeyedRateLimiter<usize>>,
    clock: DefaultClock,
}

impl CallerAuth {
    /// `None` when no caller token is configured: nothing to check.
    pub fn from_config(auth: &AuthConfig) -> Option<Arc<Self>> {
        if !auth.required() {
            return None;
        }
        let limiter = NonZeroU32::new(auth.rate_limit_per_s).map(|rate| {
            let burst = NonZeroU32::new(auth.rate_limit_burst).unwrap_or(NonZeroU32::MIN);
            RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
        });
        Some(Arc::new(CallerAuth {
            tokens: auth.tokens.iter().map(|t| Token::new(t)).collect(),
            admin: auth.admin_token.as_deref().map(Token::new),
            limiter,
            clock: DefaultClock::default(),
        }))
    }

    /// The key of the token presented, checked against every configured
    /// token without an early exit.
    fn identify(&self, presented: &Presented) -> Option<usize> {
        let mut found = None;
        for (i, token) in self.tokens.iter().chain(self.admin.iter()).enumerate() {
            if token.matches(presented) && found.is_none() {
                found = Some(i);
            }
        }
        found
    }
}

/// Marks a request let through without a token (`/health/ready`'s probes):
/// its handler answers the status alone.
#[derive(Clone, Copy, Debug)]
pub struct Anonymous;

/// Paths served without a token, as the router declares them.
pub type IsPublic = fn(&str) -> bool;

/// Middleware: refuse requests without a valid token (401) and those over
/// their token's rate (429 with `Retry-After`). `/health` stays open, so
/// load balancers and orchestrators need no secret, and so do the paths
/// `is_public` names (the console's static files: the page asks for the
/// token); `/health/ready` without an `Authorization` header answers its
/// status and `{"ready": …}` only.
pub async fn require_token(
    State((auth, is_public)): State<(Arc<CallerAuth>, IsPublic)>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    if path == "/health" || is_public(path) {
        return next.run(request).await;
    }
    // A readiness probe carries no secret (Kubernetes' httpGet probes send
    // literal headers only): without a token it hears ready or not, and
    // nothing of which plugins hold it back.
    if path == "/health/ready" && !request.headers().contains_key(header::AUTHORIZATION) {
        let mut request = request;
        request.extensions_mut().insert(Anonymous);
        return next.run(request).await;
    }
    let close = |response: Response| super::body::close_unread(request.headers(), response);
    let Some(presented) = bearer(request.headers()).map(Presented::new) else {
        return close(unauthorized(
            "this server needs `Authorization: Bearer <token>`",
        ));
    };
    let Some(key) = auth.identify(&presented) else {
        return close(unauthorized("unknown token"));
    };
    if let Some(limiter) = &auth.limiter
        && let Err(not_until) = limiter.check_key(&key)
    {
        let wait = not_until.wait_time_from(auth.clock.now());
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let mut response = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!(
                "this token's request rate is exceeded; retry in {} ms",
                wait.as_millis()
            ),
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        return close(response);
    }
    next.run(request).await
}

/// The configured admin token.
pub type AdminToken = Token;

/// Allow an admin request: a token must be configured and presented as
/// `Authorization: Bearer <token>`.
pub fn check(token: Option<&AdminToken>, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = token else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the admin API is disabled: start the server with an admin token \
             (TOOLHOST_ADMIN_TOKEN or [auth] admin_token)",
        ));
    };
    match bearer(headers).map(Presented::new) {
        Some(p) if token.matches(&p) => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "wrong admin token",
        )),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this route needs `Authorization: Bearer <admin token>`",
        )),
    }
}

/// A layer for routes that are all admin-only: [`check`] before the
/// handler (and before its body is read).
pub async fn required(
    State(token): State<Option<AdminToken>>,
    request: Request,
    next: Next,
) -> Response {
    match check(token.as_ref(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

fn unauthorized(message: &'static str) -> Response {
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(tokens: &[&str], rate: u32, burst: u32) -> AuthConfig {
        AuthConfig {
            admin_token: Some("admin-admin-admin-admin".into()),
            tokens: tokens.iter().map(|t| t.to_string()).collect(),
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
    }

    #[test]
    fn the_rate_limit_is_per_token() {
        let auth = CallerAuth::from_config(&config(
            &["first-token-aaaaaaaa", "second-token-bbbbbbb"],
            1,
            3,
        ))
        .unwrap();
        let limiter = auth.limiter.as_ref().unwrap();
        for _ in 0..3 {
            assert!(limiter.check_key(&0).is_ok());
        }
        assert!(limiter.check_key(&0).is_err(), "the burst is spent");
        assert!(
            limiter.check_key(&1).is_ok(),
            "another token is not affected"
        );
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
            check(None, &with_auth("Bearer x")).unwrap_err().status,
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            check(Some(&t), &HeaderMap::new()).unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            check(Some(&t), &with_auth("Bearer s3cret"))
                .unwrap_err()
                .status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            check(Some(&t), &with_auth("Basic s3cret-s3cret-s3cret"))
                .unwrap_err()
                .status,
            StatusCode::UNAUTHORIZED
        );
        assert!(check(Some(&t), &with_auth("Bearer s3cret-s3cret-s3cret")).is_ok());
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
}
