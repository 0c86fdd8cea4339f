//! Who may call what: every request's caller ([`Who`]), identified by its
//! bearer token (compared in constant time), its rate limit, and the admin
//! routes.
//!
//! With no caller token configured every route is open to one caller, the
//! anonymous one (the default bind is loopback; [`super::guard`] keeps web
//! pages out). With tokens (`[auth] tokens`, `[[auth.callers]]`), every
//! route but `/health` (and `/health/ready`'s bare status) and the paths the
//! router declares public (the console's static files) needs
//! `Authorization: Bearer <token>`, and the request carries the caller the
//! token names: its sessions, its policy. The admin token is the caller
//! `admin`; the admin routes accept it, or a caller whose policy says
//! `admin` ([`check`], [`required`]).

mod config;
#[cfg(test)]
mod tests;

use std::num::NonZeroU32;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use sha2::{Digest, Sha256};
use toolhost_core::callers::Caller;
use toolhost_core::callers::oauth::{Refusal, Verifier};

use super::error::ApiError;
use config::Known;
pub use config::{ADMIN, AuthConfig, CallerConfig};

/// A configured secret, kept as a digest so checks take the same time
/// whatever the presented token looks like.
#[derive(Clone)]
pub struct Token([u8; 32]);

impl Token {
    pub fn new(token: &str) -> Self {
        Token(Sha256::digest(token.as_bytes()).into())
    }

    /// A token known by its SHA-256 in hex (64 digits, either case).
    pub fn from_hex(digest: &str) -> Option<Self> {
        let digest = digest.trim().as_bytes();
        if digest.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in digest.chunks(2).enumerate() {
            let pair = std::str::from_utf8(pair).ok()?;
            out[i] = u8::from_str_radix(pair, 16).ok()?;
        }
        Some(Token(out))
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
    known: Vec<Known>,
    /// OAuth access tokens' checker (`[auth.oauth]`).
    oauth: Option<Verifier>,
    /// One per known caller whose rate is limited, in the same order.
    limiters: Vec<Option<DefaultDirectRateLimiter>>,
    /// OAuth subjects' rates (`[auth.oauth] rate_limit_per_s`), by caller.
    oauth_limiter: Option<DefaultKeyedRateLimiter<String>>,
    clock: DefaultClock,
}

/// OAuth subjects whose rates are remembered; past it, those not seen
/// lately are forgotten.
const OAUTH_RATES_KEPT: usize = 10_000;

impl CallerAuth {
    /// `None` when no caller token is configured: nothing to check.
    pub fn from_config(auth: &AuthConfig) -> Option<Arc<Self>> {
        if !auth.required() {
            return None;
        }
        let known = auth.known();
        let burst = NonZeroU32::new(auth.rate_limit_burst).unwrap_or(NonZeroU32::MIN);
        let limiters = known
            .iter()
            .map(|k| {
                NonZeroU32::new(k.rate_per_s)
                    .map(|rate| RateLimiter::direct(Quota::per_second(rate).allow_burst(burst)))
            })
            .collect();
        let oauth = auth.oauth.clone().and_then(|c| {
            Verifier::new(c)
                .inspect_err(|e| tracing::error!(error = %e, "OAuth: no verifier; access tokens will be refused"))
                .ok()
        });
        let oauth_limiter = auth
            .oauth
            .as_ref()
            .and_then(|c| NonZeroU32::new(c.rate_limit_per_s?))
            .map(|rate| RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst)));
        Some(Arc::new(CallerAuth {
            known,
            oauth,
            limiters,
            oauth_limiter,
            clock: DefaultClock::default(),
        }))
    }

    /// Every caller a configured token names.
    pub fn callers(&self) -> Vec<Caller> {
        self.known.iter().map(|k| k.caller.clone()).collect()
    }

    /// The OAuth callers seen lately.
    pub fn oauth_callers(&self) -> Vec<Caller> {
        self.oauth.as_ref().map(Verifier::seen).unwrap_or_default()
    }

    /// The index of the caller whose token is presented, checked against
    /// every known token without an early exit.
    fn identify(&self, presented: &Presented) -> Option<usize> {
        let mut found = None;
        for (i, known) in self.known.iter().enumerate() {
            if known.token.matches(presented) && found.is_none() {
                found = Some(i);
            }
        }
        found
    }
}

/// The caller of a request: the one its token names, the anonymous caller
/// on a server without tokens. An extractor.
#[derive(Clone, Debug)]
pub struct Who(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for Who {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Who(caller_of(&parts.extensions)))
    }
}

/// The caller [`require_token`] put in a request's extensions, or the
/// anonymous one.
pub fn caller_of(extensions: &axum::http::Extensions) -> Caller {
    extensions
        .get::<Caller>()
        .cloned()
        .unwrap_or_else(Caller::anonymous)
}

/// Marks a request let through without a token (`/health/ready`'s probes):
/// its handler answers the status alone.
#[derive(Clone, Copy, Debug)]
pub struct Anonymous;

/// Paths served without a token, as the router declares them.
pub type IsPublic = fn(&str) -> bool;

/// Admit a request (`Ok`: the request, marked with its caller, and that
/// caller) or answer it here (`Err`): without a valid token 401, over its
/// token's rate 429 with `Retry-After`, the RFC 9728 metadata. `/health` stays open, so
/// load balancers and orchestrators need no secret, and so do the paths
/// `is_public` names (the console's static files: the page asks for the
/// token); `/health/ready` without an `Authorization` header answers its
/// status and `{"ready": …}` only.
pub async fn admit(
    auth: &CallerAuth,
    is_public: IsPublic,
    mut request: Request,
) -> Result<(Request, Option<Caller>), Response> {
    let path = request.uri().path();
    if path == "/health" || is_public(path) {
        return Ok((request, None));
    }
    // RFC 9728: where clients learn which authorization server to ask.
    if let Some(oauth) = &auth.oauth
        && path.starts_with("/.well-known/oauth-protected-resource")
    {
        return Err(axum::Json(oauth.config().metadata()).into_response());
    }
    // A readiness probe carries no secret (Kubernetes' httpGet probes send
    // literal headers only): without a token it hears ready or not, and
    // nothing of which plugins hold it back.
    if path == "/health/ready" && !request.headers().contains_key(header::AUTHORIZATION) {
        request.extensions_mut().insert(Anonymous);
        return Ok((request, None));
    }
    let close = |response: Response| super::body::close_unread(request.headers(), response);
    let Some(token) = bearer(request.headers()) else {
        return Err(close(auth.unauthorized(
            "this server needs `Authorization: Bearer <token>`",
            None,
        )));
    };
    let Some(key) = auth.identify(&Presented::new(token)) else {
        // Not a configured token: an OAuth access token, if they are taken.
        let verified = match &auth.oauth {
            Some(oauth) => {
                // Owned: the request (not `Sync`) is not held across the wait.
                let token = token.to_owned();
                oauth.verify(&token).await
            }
            None => Err(Refusal::Invalid("unknown token".into())),
        };
        let caller = match verified {
            Ok(caller) => caller,
            Err(refusal) => {
                let answer = refused(auth, refusal);
                return Err(super::body::close_unread(request.headers(), answer));
            }
        };
        if let Some(limiter) = &auth.oauth_limiter {
            if limiter.len() > OAUTH_RATES_KEPT {
                limiter.retain_recent();
            }
            if let Err(not_until) =
                limiter.check_key(&caller.space().unwrap_or_default().to_owned())
            {
                let answer = auth.too_fast(not_until, caller);
                return Err(super::body::close_unread(request.headers(), answer));
            }
        }
        return Ok(run_as(caller, request));
    };
    if let Some(limiter) = &auth.limiters[key]
        && let Err(not_until) = limiter.check()
    {
        return Err(close(
            auth.too_fast(not_until, auth.known[key].caller.clone()),
        ));
    }
    Ok(run_as(auth.known[key].caller.clone(), request))
}

impl CallerAuth {
    /// 429 with `Retry-After` for `caller`, over its rate until `not_until`.
    fn too_fast(
        &self,
        not_until: governor::NotUntil<governor::clock::QuantaInstant>,
        caller: Caller,
    ) -> Response {
        let wait = not_until.wait_time_from(self.clock.now());
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let mut response = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!(
                "this caller's request rate is exceeded; retry in {} ms",
                wait.as_millis()
            ),
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        response.extensions_mut().insert(caller);
        response
    }
}

/// The answer to an access token refused for `refusal`.
fn refused(auth: &CallerAuth, refusal: Refusal) -> Response {
    match refusal {
        Refusal::Invalid(why) => auth.unauthorized(&why, Some("invalid_token")),
        Refusal::InsufficientScope(scope) => {
            let mut response = ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("the token lacks scope `{scope}`"),
            )
            .into_response();
            let challenge = format!("Bearer error=\"insufficient_scope\", scope=\"{scope}\"");
            if let Ok(v) = HeaderValue::from_str(&challenge) {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
            response
        }
        Refusal::Unavailable(why) => {
            let mut response =
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "auth_unavailable", why)
                    .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
    }
}

/// `request` served as `caller`'s; the caller comes back beside it, for
/// [`named_refusal`].
fn run_as(caller: Caller, mut request: Request) -> (Request, Option<Caller>) {
    request.extensions_mut().insert(caller.clone());
    (request, Some(caller))
}

/// A refusal of a request served as `caller`'s names its caller to the
/// audit log ([`super::observe::audit`]).
pub fn named_refusal(response: &mut Response, caller: Caller) {
    if matches!(
        response.status(),
        StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS
    ) {
        response.extensions_mut().insert(caller);
    }
}

/// The configured admin token.
pub type AdminToken = Token;

/// Allow an admin request: from a caller whose policy says `admin` (the
/// admin token's, when caller tokens are configured), or with the admin
/// token presented as `Authorization: Bearer <token>`.
pub fn check(
    token: Option<&AdminToken>,
    headers: &HeaderMap,
    who: &Caller,
) -> Result<(), ApiError> {
    if who.policy().admin {
        return Ok(());
    }
    if !who.is_anonymous() {
        tracing::info!(
            caller = who.name(),
            rule = "auth.callers.admin",
            "admin route refused: the caller is no admin"
        );
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this caller may not use the admin routes",
        ));
    }
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
    match check(
        token.as_ref(),
        request.headers(),
        &caller_of(request.extensions()),
    ) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

impl CallerAuth {
    /// A 401: `WWW-Authenticate: Bearer`, with the resource metadata's URL
    /// (RFC 9728 §5.1) and the error when OAuth tokens are taken.
    fn unauthorized(&self, message: &str, error: Option<&str>) -> Response {
        let mut response =
            ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
        let challenge = match &self.oauth {
            Some(oauth) => {
                let mut c = format!(
                    "Bearer resource_metadata=\"{}\"",
                    oauth.config().metadata_url()
                );
                if let Some(error) = error {
                    c.push_str(&format!(", error=\"{error}\""));
                }
                c
            }
            None => "Bearer".to_owned(),
        };
        let value = HeaderValue::from_str(&challenge).unwrap_or(HeaderValue::from_static("Bearer"));
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
        response
    }
}
