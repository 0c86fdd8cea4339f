//! The host's outbound HTTP for one API toolkit: its allow-list checked
//! before every connection (the first request and each redirect), names
//! resolved by the host with internal addresses refused unless the host is
//! allowed by its exact name, connect and total timeouts, a response-size
//! cap read as the body streams, keep-alive connections pooled per toolkit
//! and driven by the calling task (`outbound::link`), and the toolkit's
//! secret injected here and scrubbed from whatever comes back.

use crate::telemetry;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

use hyper::Method;
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use url::Url;

use super::manifest::{Auth, AuthKind};
use super::outgoing::Outgoing;
use crate::outbound::HttpPolicy;
use crate::outbound::link::{Answer, Failure, Link};
use crate::outbound::pool::{Pool, Trouble};
use crate::tool::{CallError, Content};

/// Most of a failed response's body quoted in the error.
const EXCERPT: usize = 512;
/// Idle connections kept per origin, and for how long.
const MAX_IDLE: usize = 64;
const IDLE_FOR: Duration = Duration::from_secs(60);

/// Every method: an API toolkit's operations name theirs.
const ALL_METHODS: [&str; 8] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE",
];

/// What an API toolkit sends requests with.
pub struct Outbound {
    policy: Arc<HttpPolicy>,
    pool: Pool,
    connect_timeout: Duration,
    max_redirects: usize,
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
        let header = match &auth {
            Some((a, secret)) => a.header(secret)?,
            None => None,
        };
        let query = auth.as_ref().and_then(|(a, secret)| {
            (a.kind == AuthKind::Query)
                .then(|| (a.name.clone().unwrap_or_default(), secret.clone()))
        });
        Ok(Outbound {
            policy,
            pool: Pool::new(MAX_IDLE, IDLE_FOR),
            connect_timeout,
            max_redirects,
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
    pub fn request(&self, method: &str, mut url: Url) -> Result<Outgoing, CallError> {
        if let Some(why) = self.refusal(method, &url) {
            return Err(CallError::ToolError(format!("request refused: {why}")));
        }
        let method = Method::from_bytes(method.as_bytes())
            .map_err(|_| CallError::Internal(format!("bad method {method}")))?;
        if let Some((name, secret)) = &self.query {
            url.query_pairs_mut().append_pair(name, secret);
        }
        let mut request = Outgoing::new(method, url);
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
        request: Outgoing,
        timeout: Duration,
    ) -> Result<Vec<Content>, CallError> {
        self.send_capped(request, timeout, self.max_bytes).await
    }

    /// [`Outbound::send`] with a body cap of its own (a spec at load).
    pub async fn send_capped(
        &self,
        request: Outgoing,
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
        mut request: Outgoing,
        max_bytes: usize,
    ) -> Result<Vec<Content>, CallError> {
        let span = telemetry::client_span(
            request.method.as_str(),
            request.url.as_str(),
            request.url.host_str().unwrap_or(""),
        );
        telemetry::inject_headers_of(&span, &mut request.headers);
        let answered = self
            .follow(request, max_bytes)
            .instrument(span.clone())
            .await;
        telemetry::ended(
            &span,
            answered
                .as_ref()
                .map(|a| a.head.status.as_u16())
                .map_err(|_| "request_failed"),
        );
        let answer = answered?;
        let status = answer.head.status;
        let media = answer
            .head
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let body = self.scrub(answer.body.into());
        if !status.is_success() {
            return Err(status_error(status.as_u16(), &body));
        }
        Ok(vec![content(status.as_u16(), &media, body)])
    }

    /// Send `request`, following redirects on the allow-list (each target
    /// checked before it is connected to) up to the toolkit's limit.
    async fn follow(&self, mut request: Outgoing, max_bytes: usize) -> Result<Answer, CallError> {
        let mut followed = 0;
        loop {
            let answer = self.once(&request, max_bytes).await?;
            let Some(next) = request.redirect_target(answer.head.status, &answer.head.headers)
            else {
                return Ok(answer);
            };
            if followed >= self.max_redirects {
                return Err(CallError::ToolError(format!(
                    "redirect failed: more than {} redirects ({})",
                    self.max_redirects,
                    followed + 1
                )));
            }
            followed += 1;
            request = request.redirected(
                answer.head.status,
                next,
                self.header.as_ref().map(|(n, _)| n),
            );
            if let Some(why) = self.refusal(request.method.as_str(), &request.url) {
                return Err(CallError::ToolError(format!(
                    "redirect failed: redirect refused: {why}"
                )));
            }
        }
    }

    /// One exchange with `request`'s origin, on a kept connection when
    /// there is one ([`Pool::exchange`]: a kept one closed meanwhile is
    /// replaced, for GET and the other methods safe to repeat also when
    /// the answer broke off before it began).
    async fn once(&self, request: &Outgoing, max_bytes: usize) -> Result<Answer, CallError> {
        let origin = request.url.origin().ascii_serialization();
        let connect = || self.connect(&request.url);
        let http = || request.to_http().map_err(CallError::ToolError);
        match self
            .pool
            .exchange(&origin, connect, http, max_bytes, request.idempotent())
            .await
        {
            Ok(answer) => Ok(answer),
            Err(Trouble::Ours(e)) => Err(e),
            Err(Trouble::Link(failure)) => Err(self.failure(failure)),
        }
    }

    async fn connect(&self, url: &Url) -> Result<Link, CallError> {
        let stream = crate::outbound::connect::connect(&self.policy, url, self.connect_timeout)
            .await
            .map_err(|e| self.unavailable(&e))?;
        Link::open(stream)
            .await
            .map_err(|e| self.unavailable(&e.to_string()))
    }

    /// A connection that could not be made: the backend is unavailable.
    fn unavailable(&self, why: &str) -> CallError {
        CallError::BackendUnavailable(format!("cannot connect: {}", self.scrub_text(why)))
    }

    /// A transport failure as a call error, with the secret scrubbed.
    fn failure(&self, failure: Failure) -> CallError {
        let e = match failure {
            Failure::TooLarge { size, limit } => return CallError::OutputTooLarge { size, limit },
            Failure::NotSent(_) => {
                return CallError::ToolError(
                    "the request failed: the connection closed before it was sent".into(),
                );
            }
            Failure::Failed(e) => e,
        };
        let kind = if e.is_incomplete_message() || e.is_body_write_aborted() {
            "the response broke off"
        } else {
            "the request failed"
        };
        let mut chain = Vec::new();
        let mut source: Option<&dyn std::error::Error> = Some(&e);
        while let Some(s) = source {
            let text = s.to_string();
            if !chain.iter().any(|c: &String| c.contains(&text)) {
                chain.push(text);
            }
            source = s.source();
        }
        CallError::ToolError(format!("{kind}: {}", self.scrub_text(&chain.join(": "))))
    }

    fn scrub_text(&self, text: &str) -> String {
        String::from_utf8_lossy(&self.scrub(text.as_bytes().to_vec())).into_owned()
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
    let reason = hyper::StatusCode::from_u16(status)
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

    /// A server that answers one request per connection and closes it (as
    /// a server does whose keep-alive ran out while the link sat idle).
    async fn one_answer_each() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let n = 1 + counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut buf = vec![0u8; 4096];
                let _ = tcp.read(&mut buf).await;
                let body = format!("{{\"n\":{n}}}");
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = tcp.write_all(answer.as_bytes()).await;
            }
        });
        (port, accepted)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_kept_connection_closed_meanwhile_is_replaced_unseen() {
        let (port, accepted) = one_answer_each().await;
        let out = Outbound::new(
            &[format!("127.0.0.1:{port}")],
            Duration::from_secs(2),
            3,
            1 << 20,
            None,
        )
        .unwrap();
        let url = Url::parse(&format!("http://127.0.0.1:{port}/n")).unwrap();
        for n in 1..=3 {
            let request = out.request("GET", url.clone()).unwrap();
            let content = out.send(request, Duration::from_secs(5)).await.unwrap();
            match &content[..] {
                [Content::Json(v)] => assert_eq!(v["n"], n),
                other => panic!("{other:?}"),
            }
            // The server's close reaches the kept link before the next call.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
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
