//! Who may call: bearer tokens, compared in constant time, and a rate limit
//! per token.
//!
//! With no caller token configured every route is open (the default bind is
//! loopback). With tokens, every route but `/health` (and `/health/ready`'s
//! bare status) needs `Authorization: Bearer <token>`; the admin token is accepted as a caller
//! token too, and the admin routes check it again themselves.

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
use crate::config::AuthConfig;

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

/// Middleware: refuse requests without a valid token (401) and those over
/// their token's rate (429 with `Retry-After`). `/health` stays open, so
/// load balancers and orchestrators need no secret, and so do the console's
/// static files (the page asks for the token); `/health/ready` without an
/// `Authorization` header answers its status and `{"ready": …}` only.
pub async fn require_token(
    State(auth): State<Arc<CallerAuth>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    if path == "/health" || super::console::is_public(path) {
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
    // A refusal leaves the request's body unread, and the connection is then
    // not reused: say so, so that a client does not send its next request
    // on it.
    let close = |mut response: Response| {
        let has_body = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
            || request.headers().contains_key(header::TRANSFER_ENCODING);
        if has_body {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    };
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
