//! Speaking to a registry: plain HTTP to loopback registries, HTTPS to every
//! other, and the two logins of the distribution spec. A request answered
//! 401 is sent again with what the challenge asks: `Basic` with the
//! registry's credentials, or `Bearer` with a token fetched from the
//! challenge's realm (with the credentials, if any; anonymously else).
//! Credentials are only ever sent over HTTPS or to loopback.

use std::sync::Mutex;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode};

/// A registry login: `[oci.logins."host:port"]` in the server config.
#[derive(Clone)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

/// A client of one registry.
pub struct Client {
    http: reqwest::Client,
    registry: String,
    credentials: Option<Credentials>,
    /// The `Authorization` the registry last accepted (a Basic login or a
    /// Bearer token), sent first from then on.
    accepted: Mutex<Option<String>>,
}

/// A request to send (again, after a challenge).
pub struct Request {
    pub method: Method,
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Option<bytes::Bytes>,
}

impl Request {
    pub fn get(url: String) -> Self {
        Request {
            method: Method::GET,
            url,
            headers: Vec::new(),
            body: None,
        }
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn body(mut self, method: Method, body: impl Into<bytes::Bytes>) -> Self {
        self.method = method;
        self.body = Some(body.into());
        self
    }
}

fn is_loopback(host_port: &str) -> bool {
    let host = host_port.rsplit_once(':').map_or(host_port, |(h, _)| h);
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

impl Client {
    pub fn new(registry: &str, credentials: Option<Credentials>) -> Result<Client, String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Client {
            http,
            registry: registry.to_owned(),
            credentials,
            accepted: Mutex::new(None),
        })
    }

    /// `https://host` (`http://` for loopback).
    pub fn base(&self) -> String {
        let scheme = if is_loopback(&self.registry) {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{}", self.registry)
    }

    fn build(&self, r: &Request, auth: Option<&str>) -> reqwest::RequestBuilder {
        let mut b = self.http.request(r.method.clone(), &r.url);
        for (name, value) in &r.headers {
            b = b.header(*name, value);
        }
        if let Some(body) = &r.body {
            b = b.body(body.clone());
        }
        if let Some(auth) = auth {
            b = b.header(AUTHORIZATION, auth);
        }
        b
    }

    /// Send `r`, logging in when challenged; the answer whatever its status.
    pub async fn send(&self, r: &Request) -> Result<reqwest::Response, String> {
        let first = self.accepted.lock().expect("accepted lock").clone();
        let response = self
            .build(r, first.as_deref())
            .send()
            .await
            .map_err(|e| format!("{}: {e}", r.url))?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let auth = self.login(&challenge, &r.url).await?;
        let response = self
            .build(r, Some(&auth))
            .send()
            .await
            .map_err(|e| format!("{}: {e}", r.url))?;
        if response.status() == StatusCode::UNAUTHORIZED {
            return Err(format!(
                "{}: the registry refused the login{}",
                r.url,
                if self.credentials.is_some() {
                    ""
                } else {
                    " (no credentials for it: [oci.logins.\"<host>\"] in the config)"
                }
            ));
        }
        Ok(response)
    }

    /// The `Authorization` value `challenge` asks for.
    async fn login(&self, challenge: &str, url: &str) -> Result<String, String> {
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        let params = parse_params(params);
        let secure = self.base().starts_with("https://") || is_loopback(&self.registry);
        match scheme.to_ascii_lowercase().as_str() {
            "basic" => {
                let c = self.credentials.as_ref().ok_or_else(|| {
                    format!(
                        "{url}: the registry asks for a login and the config has none for {} ([oci.logins.\"{}\"])",
                        self.registry, self.registry
                    )
                })?;
                if !secure {
                    return Err(format!("{url}: credentials are only sent over HTTPS"));
                }
                let auth = basic(c);
                *self.accepted.lock().expect("accepted lock") = Some(auth.clone());
                Ok(auth)
            }
            "bearer" => {
                let realm = params
                    .iter()
                    .find(|(k, _)| k == "realm")
                    .map(|(_, v)| v.clone())
                    .ok_or_else(|| format!("{url}: a Bearer challenge with no realm"))?;
                let realm_url = reqwest::Url::parse(&realm)
                    .map_err(|e| format!("{url}: the token realm `{realm}`: {e}"))?;
                let realm_secure = realm_url.scheme() == "https"
                    || realm_url
                        .host_str()
                        .is_some_and(|h| matches!(h, "localhost" | "127.0.0.1" | "[::1]" | "::1"));
                let query: Vec<(String, String)> = params
                    .into_iter()
                    .filter(|(k, _)| k == "service" || k == "scope")
                    .collect();
                let mut b = self.http.get(realm_url).query(&query);
                if let Some(c) = &self.credentials {
                    if !realm_secure {
                        return Err(format!(
                            "{url}: the token realm {realm} is not HTTPS: credentials not sent"
                        ));
                    }
                    b = b.header(AUTHORIZATION, basic(c));
                }
                let response = b.send().await.map_err(|e| format!("{realm}: {e}"))?;
                if !response.status().is_success() {
                    return Err(format!(
                        "{url}: the token service {realm} answered {}",
                        response.status()
                    ));
                }
                let body: serde_json::Value = response
                    .json()
                    .await
                    .map_err(|e| format!("{realm}: not a token answer: {e}"))?;
                let token = body
                    .get("token")
                    .or_else(|| body.get("access_token"))
                    .and_then(|t| t.as_str())
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| format!("{realm}: the answer has no token"))?
                    .to_owned();
                let auth = format!("Bearer {token}");
                *self.accepted.lock().expect("accepted lock") = Some(auth.clone());
                Ok(auth)
            }
            _ => Err(format!(
                "{url}: the registry asks for a login this client does not speak (`{challenge}`)"
            )),
        }
    }
}

fn basic(c: &Credentials) -> String {
    use base64::Engine;
    let pair = format!("{}:{}", c.username, c.password);
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// `realm="…",service="…",scope="…"`: the challenge's parameters.
fn parse_params(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let (value, after) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            }
        };
        out.push((key, value.to_owned()));
        rest = after.trim_start_matches(',').trim();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_parse() {
        let p = parse_params(
            r#"realm="https://auth.example.com/token",service="registry.example.com",scope="repository:tools/calc:pull,push""#,
        );
        assert_eq!(
            p,
            vec![
                ("realm".into(), "https://auth.example.com/token".into()),
                ("service".into(), "registry.example.com".into()),
                ("scope".into(), "repository:tools/calc:pull,push".into()),
            ]
        );
        assert_eq!(
            parse_params("realm=x, service=y"),
            vec![("realm".into(), "x".into()), ("service".into(), "y".into())]
        );
        assert!(
            is_loopback("127.0.0.1:5000") && is_loopback("localhost") && !is_loopback("ghcr.io")
        );
    }

    #[tokio::test]
    async fn a_bearer_challenge_is_answered_with_a_token_from_its_realm() {
        use axum::http::HeaderMap;
        use axum::response::IntoResponse;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let realm = format!("http://127.0.0.1:{port}/token");
        let login = basic(&Credentials {
            username: "ci".into(),
            password: "s3cret".into(),
        });
        let auth = |h: &HeaderMap| {
            h.get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let app = axum::Router::new()
            .route(
                "/token",
                axum::routing::get(
                    move |h: HeaderMap,
                          q: axum::extract::Query<std::collections::BTreeMap<String, String>>| async move {
                        let scope = q.get("scope").map(String::as_str);
                        let service = q.get("service").map(String::as_str);
                        if auth(&h) == Some(login.clone())
                            && scope == Some("repository:tools/calc:pull")
                            && service == Some("reg")
                        {
                            r#"{"token":"t0k"}"#.into_response()
                        } else {
                            StatusCode::UNAUTHORIZED.into_response()
                        }
                    },
                ),
            )
            .route(
                "/v2/tools/calc/manifests/1.0",
                axum::routing::get(move |h: HeaderMap| async move {
                    if auth(&h).as_deref() == Some("Bearer t0k") {
                        "manifest".into_response()
                    } else {
                        let challenge = format!(
                            r#"Bearer realm="{realm}",service="reg",scope="repository:tools/calc:pull""#
                        );
                        (StatusCode::UNAUTHORIZED, [(WWW_AUTHENTICATE, challenge)]).into_response()
                    }
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await });
        let registry = format!("127.0.0.1:{port}");
        let url = format!("http://{registry}/v2/tools/calc/manifests/1.0");
        let client = Client::new(
            &registry,
            Some(Credentials {
                username: "ci".into(),
                password: "s3cret".into(),
            }),
        )
        .unwrap();
        let answer = client.send(&Request::get(url.clone())).await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(answer.text().await.unwrap(), "manifest");
        // The token is sent first from then on.
        assert_eq!(
            client.accepted.lock().unwrap().as_deref(),
            Some("Bearer t0k")
        );
        let anonymous = Client::new(&registry, None).unwrap();
        let refused = anonymous.send(&Request::get(url)).await.unwrap_err();
        assert!(
            refused.contains("token service") && refused.contains("401"),
            "{refused}"
        );
    }
}
