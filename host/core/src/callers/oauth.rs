//! Callers from OAuth 2.1 access tokens (MCP's authorization spec): toolhost
//! as a resource server. A JWT access token is checked against its issuer's
//! keys (the JWKS, fetched through the outbound allow-list, which names the
//! JWKS host exactly; cached, fetched again for a key id it does not know, at
//! most every [`REFETCH_EVERY`]): the algorithm (asymmetric ones only: no
//! `none`, no HMAC, so a token signed with the public key as an HMAC secret
//! is refused), the issuer, the audience (this resource, RFC 8707), `exp` and
//! `nbf`, and the scopes the configuration requires. Its subject is the
//! caller; its scopes map to the caller's policy. An opaque token is asked
//! about at the issuer's introspection endpoint when one is configured
//! ([`introspect`]), with the same checks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Caller, Grant, Policy};

mod introspect;
pub use introspect::IntrospectionConfig;

/// A key id the cached keys lack makes them fetched again, at most this often.
pub const REFETCH_EVERY: Duration = Duration::from_secs(10);
/// Cached keys are fetched again after this long anyway (rotation).
pub const KEYS_TTL: Duration = Duration::from_secs(300);
/// Callers remembered (their usage counts add up across requests).
const MAX_REMEMBERED: usize = 10_000;

/// `[auth.oauth]`: the authorization server whose access tokens are callers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The issuer (`iss`), e.g. `https://id.example.com`.
    pub issuer: String,
    /// This server as a protected resource (RFC 9728 `resource`, RFC 8707):
    /// its `/mcp` URL as clients reach it, e.g. `https://tools.example.com/mcp`.
    /// Tokens must name it in `aud`.
    pub resource: String,
    /// Where the issuer's keys are (default: `<issuer>/jwks`). Its host is
    /// the one outbound host this reaches (exactly, loopback included).
    pub jwks_uri: Option<String>,
    /// Scopes every token must carry (403 `insufficient_scope` otherwise).
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// What each scope grants (tools, admin). Without any, a valid token may
    /// call every tool; with some, only what its scopes grant.
    #[serde(default)]
    pub scopes: Vec<ScopeGrant>,
    /// Seconds of clock skew allowed for `exp` and `nbf`.
    #[serde(default = "default_leeway")]
    pub leeway_s: u64,
    /// Longest token looked at (longer ones are refused unread).
    #[serde(default = "default_max_token")]
    pub max_token_bytes: usize,
    /// Requests a second per OAuth subject (none: no limit), as
    /// `[[auth.callers]] rate_limit_per_s` is for a static caller.
    #[serde(default)]
    pub rate_limit_per_s: Option<u32>,
    /// Opaque (non-JWT) access tokens are asked about here (RFC 7662);
    /// without it only JWTs are taken.
    #[serde(default)]
    pub introspection: Option<IntrospectionConfig>,
}

fn default_leeway() -> u64 {
    30
}

fn default_max_token() -> usize {
    8192
}

/// `[[auth.oauth.scopes]]`: one scope's grant.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScopeGrant {
    pub scope: String,
    /// Tool patterns the scope lets its holder list and call.
    pub tools: Vec<String>,
    /// The admin routes.
    pub admin: bool,
}

impl OAuthConfig {
    pub fn jwks_uri(&self) -> String {
        self.jwks_uri
            .clone()
            .unwrap_or_else(|| format!("{}/jwks", self.issuer.trim_end_matches('/')))
    }

    /// Why these settings cannot work, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        for (field, url) in [
            ("issuer", self.issuer.clone()),
            ("resource", self.resource.clone()),
            ("jwks_uri", self.jwks_uri()),
        ] {
            match reqwest::Url::parse(&url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
                _ => {
                    return Err(format!(
                        "auth.oauth.{field} must be an http(s) URL, not {url:?}"
                    ));
                }
            }
        }
        if let Some(i) = &self.introspection {
            match reqwest::Url::parse(&i.endpoint) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
                _ => {
                    return Err(format!(
                        "auth.oauth.introspection.endpoint must be an http(s) URL, not {:?}",
                        i.endpoint
                    ));
                }
            }
            i.secret()?;
        }
        if self.rate_limit_per_s == Some(0) {
            return Err("auth.oauth.rate_limit_per_s must be at least 1".into());
        }
        if self.scopes.iter().any(|s| s.scope.is_empty()) {
            return Err("auth.oauth.scopes: a grant names no scope".into());
        }
        Ok(())
    }

    /// The URL of this resource's metadata (RFC 9728 §3.1: the well-known
    /// path between the host and the resource's path).
    pub fn metadata_url(&self) -> String {
        match reqwest::Url::parse(&self.resource) {
            Ok(u) => {
                let path = u.path().trim_end_matches('/');
                let origin = u.origin().ascii_serialization();
                format!("{origin}/.well-known/oauth-protected-resource{path}")
            }
            Err(_) => String::new(),
        }
    }

    /// The protected resource metadata document (RFC 9728).
    pub fn metadata(&self) -> serde_json::Value {
        let mut scopes: Vec<&str> = self.scopes.iter().map(|s| s.scope.as_str()).collect();
        scopes.extend(self.required_scopes.iter().map(String::as_str));
        scopes.sort_unstable();
        scopes.dedup();
        serde_json::json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "toolhost",
        })
    }
}

/// Why a token is refused: `Invalid` is a 401 (`invalid_token`),
/// `InsufficientScope` a 403, `Unavailable` (the introspection endpoint
/// did not answer) a 503: the token may be good, so the client is not sent
/// to authorize again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0}")]
    Invalid(String),
    #[error("the token lacks scope `{0}`")]
    InsufficientScope(String),
    #[error("{0}")]
    Unavailable(String),
}

#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    azp: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Vec<String>>,
}

struct Keys {
    set: JwkSet,
    fetched: Instant,
}

/// Checks access tokens; one per server.
pub struct Verifier {
    config: OAuthConfig,
    http: reqwest::Client,
    keys: RwLock<Option<Keys>>,
    /// When the keys were last asked for (a refetch at most every
    /// [`REFETCH_EVERY`]), behind an async lock so one request fetches.
    fetching: tokio::sync::Mutex<Option<Instant>>,
    callers: Mutex<HashMap<String, Caller>>,
    introspector: Option<introspect::Introspector>,
}

/// An HTTP client that reaches `url`'s host (and port) only, with `method`,
/// without redirects or a proxy from the environment (a proxy would
/// resolve the name itself, past the allow-list); `what` names the setting
/// in refusals.
fn client_for(url: &str, method: &str, what: &'static str) -> Result<reqwest::Client, String> {
    let url = reqwest::Url::parse(url).map_err(|e| format!("{what}: {e}"))?;
    let host = url.host_str().unwrap_or_default();
    let allow = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let policy = crate::outbound::HttpPolicy::parse(&[allow], &[method.to_owned()])?.named(what);
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(crate::outbound::PolicyResolver(Arc::new(policy))))
        .build()
        .map_err(|e| e.to_string())
}

impl Verifier {
    pub fn new(config: OAuthConfig) -> Result<Verifier, String> {
        config.check()?;
        let http = client_for(&config.jwks_uri(), "GET", "[auth.oauth] jwks_uri")?;
        let introspector = match &config.introspection {
            Some(c) => Some(introspect::Introspector::new(c.clone())?),
            None => None,
        };
        Ok(Verifier {
            config,
            http,
            keys: RwLock::new(None),
            fetching: tokio::sync::Mutex::new(None),
            callers: Mutex::new(HashMap::new()),
            introspector,
        })
    }

    pub fn config(&self) -> &OAuthConfig {
        &self.config
    }

    /// The OAuth callers seen lately (up to 10,000), each subject once per
    /// set of scopes it came with.
    pub fn seen(&self) -> Vec<Caller> {
        let callers = self.callers.lock().unwrap_or_else(|e| e.into_inner());
        let mut seen: Vec<Caller> = callers.values().cloned().collect();
        seen.sort_by(|a, b| a.name().cmp(b.name()));
        seen
    }

    /// Whether `token` looks like a JWT (three dot-separated parts): those
    /// are checked here, others introspected.
    pub fn looks_like_jwt(token: &str) -> bool {
        token.bytes().filter(|b| *b == b'.').count() == 2
    }

    /// The caller `token` names, or why it is refused.
    pub async fn verify(&self, token: &str) -> Result<Caller, Refusal> {
        if token.len() > self.config.max_token_bytes {
            return Err(Refusal::Invalid("the token is too large".into()));
        }
        let (sub, grant) = if Self::looks_like_jwt(token) {
            self.verify_jwt(token).await?
        } else {
            match &self.introspector {
                Some(i) => {
                    let active = i.introspect(&self.config, token).await?;
                    let grant = Grant {
                        client: active.client,
                        scopes: active.scopes,
                    };
                    (active.sub, grant)
                }
                None => return Err(Refusal::Invalid("unknown token".into())),
            }
        };
        let scopes = &grant.scopes;
        if let Some(missing) = self
            .config
            .required_scopes
            .iter()
            .find(|s| !scopes.contains(s))
        {
            return Err(Refusal::InsufficientScope(missing.clone()));
        }
        Ok(self.caller(&sub, grant))
    }

    /// A JWT's subject, client and scopes, once its signature and claims
    /// are checked.
    async fn verify_jwt(&self, token: &str) -> Result<(String, Grant), Refusal> {
        let invalid = |m: &str| Refusal::Invalid(m.to_owned());
        let header =
            jsonwebtoken::decode_header(token).map_err(|_| invalid("the token is not a JWT"))?;
        let family = match header.alg {
            Algorithm::RS256 | Algorithm::RS384 | Algorithm::RS512 => "RSA",
            Algorithm::PS256 | Algorithm::PS384 | Algorithm::PS512 => "RSA",
            Algorithm::ES256 | Algorithm::ES384 => "EC",
            Algorithm::EdDSA => "OKP",
            // HMAC: a resource server holds no shared secret, and a token
            // "signed" with the public key as one must not pass.
            _ => return Err(invalid("the token's algorithm is not accepted")),
        };
        let key = self.key(header.kid.as_deref(), family).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[self.config.issuer.as_str()]);
        validation.set_audience(&[self.config.resource.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = self.config.leeway_s;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            Refusal::Invalid(
                match e.kind() {
                    K::ExpiredSignature => "the token has expired",
                    K::ImmatureSignature => "the token is not valid yet",
                    K::InvalidAudience => "the token is not for this resource",
                    K::InvalidIssuer => "the token is from another issuer",
                    K::InvalidSignature => "the token's signature does not verify",
                    K::MissingRequiredClaim(_) => "the token lacks a required claim",
                    _ => "the token is invalid",
                }
                .to_owned(),
            )
        })?;
        let claims = data.claims;
        let Some(sub) = claims.sub.filter(|s| !s.is_empty()) else {
            return Err(invalid("the token lacks a required claim (sub)"));
        };
        let scopes: Vec<String> = match (claims.scope, claims.scp) {
            (Some(s), _) => s.split_whitespace().map(str::to_owned).collect(),
            (None, Some(list)) => list,
            (None, None) => Vec::new(),
        };
        let client = claims.client_id.or(claims.azp);
        Ok((sub, Grant { client, scopes }))
    }

    /// The caller of subject `sub` with `grant`: the same one (its usage
    /// adding up) for every token of that subject, client and scopes. Its
    /// sessions are the subject's, whichever client it uses.
    fn caller(&self, sub: &str, grant: Grant) -> Caller {
        let digest = Sha256::digest(format!("{}\n{sub}", self.config.issuer).as_bytes());
        let space = format!("oauth-{}", crate::text::hex(&digest[..12]));
        let scopes = &grant.scopes;
        let key = format!(
            "{space} {} {}",
            grant.client.as_deref().unwrap_or("-"),
            scopes.join(" ")
        );
        let mut callers = self.callers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = callers.get(&key) {
            return c.clone();
        }
        let mut policy = Policy::default();
        if !self.config.scopes.is_empty() {
            for grant in self
                .config
                .scopes
                .iter()
                .filter(|g| scopes.contains(&g.scope))
            {
                policy.tools.extend(grant.tools.iter().cloned());
                policy.admin |= grant.admin;
            }
            if policy.tools.is_empty() {
                // An empty list is every tool: this pattern matches none.
                policy.tools.push(String::new());
            }
        }
        let caller = Caller::granted(sub, &space, policy, Some(grant));
        if callers.len() >= MAX_REMEMBERED {
            callers.clear();
        }
        callers.insert(key, caller.clone());
        caller
    }

    /// The decoding key of `kid`, from the cached keys, else from keys
    /// fetched again (a rotation), at most every [`REFETCH_EVERY`].
    async fn key(&self, kid: Option<&str>, family: &str) -> Result<DecodingKey, Refusal> {
        if let Some(key) = self.cached(kid, family)? {
            return Ok(key);
        }
        {
            let mut last = self.fetching.lock().await;
            // Another request may have fetched them meanwhile.
            if let Some(key) = self.cached(kid, family)? {
                return Ok(key);
            }
            if last.is_none_or(|t| t.elapsed() >= REFETCH_EVERY) {
                *last = Some(Instant::now());
                match self.fetch().await {
                    Ok(set) => {
                        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Some(Keys {
                            set,
                            fetched: Instant::now(),
                        });
                    }
                    Err(e) => {
                        tracing::warn!(jwks = %self.config.jwks_uri(), error = %e, "OAuth: cannot fetch the issuer's keys")
                    }
                }
            }
        }
        self.cached(kid, family)?
            .ok_or_else(|| Refusal::Invalid("the token's signing key is unknown".into()))
    }

    fn cached(&self, kid: Option<&str>, family: &str) -> Result<Option<DecodingKey>, Refusal> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        let Some(keys) = keys.as_ref().filter(|k| k.fetched.elapsed() < KEYS_TTL) else {
            return Ok(None);
        };
        let found = match kid {
            Some(kid) => keys.set.find(kid),
            // No key id: only a set of one key can say which.
            None if keys.set.keys.len() == 1 => keys.set.keys.first(),
            None => return Err(Refusal::Invalid("the token names no key (kid)".into())),
        };
        let Some(jwk) = found else {
            return Ok(None);
        };
        let kty = match &jwk.algorithm {
            jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => "RSA",
            jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_) => "EC",
            jsonwebtoken::jwk::AlgorithmParameters::OctetKeyPair(_) => "OKP",
            jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_) => "oct",
        };
        if kty != family {
            return Err(Refusal::Invalid(
                "the token's algorithm does not fit its key".into(),
            ));
        }
        DecodingKey::from_jwk(jwk)
            .map(Some)
            .map_err(|_| Refusal::Invalid("the issuer's key is unusable".into()))
    }

    async fn fetch(&self) -> Result<JwkSet, String> {
        let response = self
            .http
            .get(self.config.jwks_uri())
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!(
                "{} answered {}",
                self.config.jwks_uri(),
                response.status()
            ));
        }
        let bytes = response.bytes().await.map_err(|e| e.to_string())?;
        if bytes.len() > 1 << 20 {
            return Err("the key set is over 1 MiB".into());
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("not a key set: {e}"))
    }
}

#[cfg(test)]
mod tests;
