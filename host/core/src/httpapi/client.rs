//! The host's outbound HTTP for one API toolkit: its allow-list checked
//! before every connection (the first request and each redirect), names
//! resolved by the host with internal addresses refused unless the host is
//! allowed by its exact name, connect and total timeouts, a response-size
//! cap read as the body streams, keep-alive connections pooled per toolkit,
//! and the toolkit's secret injected here and scrubbed from whatever comes
//! back.

use crate::telemetry;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use reqwest::{Method, RequestBuilder, Url};

use super::manifest::{Auth, AuthKind};
use crate::outbound::HttpPolicy;
use crate::tool::{CallError, Content};

/// Every method: an API toolkit's operations name theirs.
const ALL_METHODS: [&str; 8] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE",
];

/// Most of a failed response's body quoted in the error.
const EXCERPT: usize = 512;

/// What an API toolkit sends requests with.
pub struct Outbound {
    client: reqwest::Client,
    policy: Arc<HttpPolicy>,
    max_bytes: usize,
    /// The secret's value (scrubbed from what comes back) ...
    secret: Option<String>,
    /// ... and how it travels: a header made once, or a query parameter.
    header: Option<(HeaderName, HeaderValue)>,
    query: Option<(String, String)>,
}

impl Outbound {
    pub fn new(
        allow: &[String],
        connect_timeout: Duration,
        max_redirects: usize,
        max_bytes: usize,
        auth: Option<(Auth, String)>,
    ) -> Result<Outbound, String> {
        let methods: Vec<String> = ALL_METHODS.iter().map(|m| m.to_string()).collect();
        let policy = Arc::new(
            HttpPolicy::parse(allow, &methods)
                .map_err(|e| e.replace("http.allow", "[api] allow"))?
                .named("[api] allow"),
        );
        let redirects = policy.clone();
        let client = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(connect_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(64)
            .tcp_nodelay(true)
            // A redirect's Referer would carry the previous URL (and a
            // query secret) to the next host.
            .referer(false)
            .user_agent(concat!("toolhost/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(Arc::new(crate::outbound::PolicyResolver(policy.clone())))
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() > max_redirects {
                    let n = attempt.previous().len();
                    return attempt.error(format!("more than {max_redirects} redirects ({n})"));
                }
                match refusal(&redirects, "GET", attempt.url()) {
                    Some(why) => attempt.error(format!("redirect refused: {why}")),
                    None => attempt.follow(),
                }
            }))
            .build()
            .map_err(|e| format!("cannot make the HTTP client: {e}"))?;
        let header = match &auth {
            Some((a, secret)) => a.header(secret)?,
            None => None,
        };
        let query = auth.as_ref().and_then(|(a, secret)| {
            (a.kind == AuthKind::Query)
                .then(|| (a.name.clone().unwrap_or_default(), secret.clone()))
        });
        Ok(Outbound {
            client,
            policy,
            max_bytes,
            secret: auth.map(|(_, secret)| secret),
            header,
            query,
        })
    }

    /// Why `url` may not be reached with `method`, if it may not.
    pub fn refusal(&self, method: &str, url: &Url) -> Option<String> {
        refusal(&self.policy, method, url)
    }

    /// A request to `url`, checked against the allow-list, with the secret.
    pub fn request(&self, method: &str, mut url: Url) -> Result<RequestBuilder, CallError> {
        if let Some(why) = self.refusal(method, &url) {
            return Err(CallError::ToolError(format!("request refused: {why}")));
        }
        let method = Method::from_bytes(method.as_bytes())
            .map_err(|_| CallError::Internal(format!("bad method {method}")))?;
        if let Some((name, secret)) = &self.query {
            url.query_pairs_mut().append_pair(name, secret);
        }
        let mut request = self.client.request(method, url);
        if let Some((name, value)) = &self.header {
            request = request.header(name.clone(), value.clone());
        }
        Ok(request)
    }

    /// Send `request` and read its answer within `timeout`: a 2xx body as
    /// content (JSON, text, or binary by its media type), anything else as
    /// a tool error with the status and an excerpt.
    pub async fn send(
        &self,
        request: RequestBuilder,
        timeout: Duration,
    ) -> Result<Vec<Content>, CallError> {
        self.send_capped(request, timeout, self.max_bytes).await
    }

    /// [`Outbound::send`] with a body cap of its own (a spec at load).
    pub async fn send_capped(
        &self,
        request: RequestBuilder,
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Vec<Content>, CallError> {
        let limit_ms = timeout.as_millis() as u64;
        match tokio::time::timeout(timeout, self.exchange(request, max_bytes)).await {
            Ok(result) => result,
            Err(_) => Err(CallError::Timeout { limit_ms }),
        }
    }

    async fn exchange(
        &self,
        request: RequestBuilder,
        max_bytes: usize,
    ) -> Result<Vec<Content>, CallError> {
        let mut request = request.build().map_err(|e| self.failure(e))?;
        let url = request.url();
        let span = telemetry::client_span(
            request.method().as_str(),
            url.as_str(),
            url.host_str().unwrap_or(""),
        );
        telemetry::inject_headers_of(&span, request.headers_mut());
        let sent = self.client.execute(request).instrument(span.clone()).await;
        telemetry::ended(
            &span,
            sent.as_ref()
                .map(|r| r.status().as_u16())
                .map_err(|_| "request_failed"),
        );
        let mut response = sent.map_err(|e| self.failure(e))?;
        let status = response.status();
        let media = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.failure(e))? {
            if body.len() + chunk.len() > max_bytes {
                return Err(CallError::OutputTooLarge {
                    size: body.len() + chunk.len(),
                    limit: max_bytes,
                });
            }
            body.extend_from_slice(&chunk);
        }
        let body = self.scrub(body);
        if !status.is_success() {
            return Err(status_error(status.as_u16(), &body));
        }
        Ok(vec![content(status.as_u16(), &media, body)])
    }

    /// A transport failure as a call error, without the URL (it may carry
    /// a query secret) and with the secret scrubbed from the rest.
    fn failure(&self, e: reqwest::Error) -> CallError {
        let kind = if e.is_timeout() {
            "timed out"
        } else if e.is_connect() {
            "cannot connect"
        } else if e.is_redirect() {
            "redirect failed"
        } else if e.is_body() || e.is_decode() {
            "the response broke off"
        } else {
            "the request failed"
        };
        let mut chain = Vec::new();
        let e = e.without_url();
        let mut source: Option<&dyn std::error::Error> = Some(&e);
        while let Some(s) = source {
            let text = s.to_string();
            if !chain.iter().any(|c: &String| c.contains(&text)) {
                chain.push(text);
            }
            source = s.source();
        }
        let detail =
            String::from_utf8_lossy(&self.scrub(chain.join(": ").into_bytes())).into_owned();
        let message = format!("{kind}: {detail}");
        if e.is_connect() || e.is_timeout() {
            CallError::BackendUnavailable(message)
        } else {
            CallError::ToolError(message)
        }
    }

    /// `bytes` with every occurrence of the secret replaced.
    fn scrub(&self, bytes: Vec<u8>) -> Vec<u8> {
        match &self.secret {
            Some(secret) if !secret.is_empty() => {
                replace_all(bytes, secret.as_bytes(), b"[secret]")
            }
            _ => bytes,
        }
    }
}

fn replace_all(bytes: Vec<u8>, needle: &[u8], with: &[u8]) -> Vec<u8> {
    if needle.is_empty()
        || bytes.len() < needle.len()
        || !bytes.windows(needle.len()).any(|w| w == needle)
    {
        return bytes;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// A non-2xx answer as a tool error: the status, and the start of the body.
pub fn status_error(status: u16, body: &[u8]) -> CallError {
    let text = String::from_utf8_lossy(body);
    let mut excerpt: String = text.chars().take(EXCERPT).collect();
    if excerpt.len() < text.len() {
        excerpt.push('…');
    }
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let mut message = format!("HTTP {status} {reason}");
    if (300..400).contains(&status) {
        message.push_str(" (a redirect not followed)");
    }
    if !excerpt.trim().is_empty() {
        message.push_str(": ");
        message.push_str(excerpt.trim());
    }
    CallError::ToolError(message)
}

/// A success body as one content item, by its media type.
pub fn content(status: u16, media: &str, body: Vec<u8>) -> Content {
    let essence = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if body.is_empty() {
        return Content::Json(serde_json::json!({ "status": status }));
    }
    if (essence == "application/json" || essence.ends_with("+json"))
        && let Ok(v) = serde_json::from_slice(&body)
    {
        return Content::Json(v);
    }
    let textual = essence.starts_with("text/")
        || essence.ends_with("+xml")
        || matches!(
            essence.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/x-www-form-urlencoded"
                | ""
        );
    if textual && let Ok(text) = String::from_utf8(body.clone()) {
        return Content::Text(text);
    }
    Content::Binary {
        media_type: if essence.is_empty() {
            "application/octet-stream".into()
        } else {
            essence
        },
        data: body,
        name: None,
    }
}

fn refusal(policy: &HttpPolicy, method: &str, url: &Url) -> Option<String> {
    let host = url.host_str().unwrap_or("");
    policy.refusal(method, url.scheme(), host, url.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_become_content_by_media_type() {
        assert!(matches!(
            content(200, "application/json", b"{\"a\":1}".to_vec()),
            Content::Json(_)
        ));
        assert!(matches!(
            content(
                200,
                "application/problem+json; charset=utf-8",
                b"[1]".to_vec()
            ),
            Content::Json(_)
        ));
        assert!(matches!(
            content(200, "text/html", b"<p>".to_vec()),
            Content::Text(_)
        ));
        assert!(matches!(
            content(200, "application/json", b"not json".to_vec()),
            Content::Text(_)
        ));
        assert!(matches!(content(204, "", Vec::new()), Content::Json(_)));
        match content(200, "image/PNG", vec![0x89, b'P']) {
            Content::Binary { media_type, .. } => assert_eq!(media_type, "image/png"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            content(200, "text/plain", vec![0xff, 0xfe]),
            Content::Binary { .. }
        ));
    }

    #[test]
    fn secrets_are_scrubbed() {
        assert_eq!(
            replace_all(b"a=SEC&b=SECSEC".to_vec(), b"SEC", b"*"),
            b"a=*&b=**"
        );
        assert_eq!(
            replace_all(b"short".to_vec(), b"longer needle", b"*"),
            b"short"
        );
    }
}
