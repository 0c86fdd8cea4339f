//! One request an API tool sends: what its operation makes of the input
//! (headers, a form or JSON body), written as HTTP/1.1, and what becomes of
//! it when the answer redirects.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use hyper::header::{
    AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST, HeaderMap, HeaderName, HeaderValue,
    LOCATION, PROXY_AUTHORIZATION, USER_AGENT, WWW_AUTHENTICATE,
};
use hyper::{Method, StatusCode};
use url::Url;

/// What the host sends as `User-Agent`.
const AGENT: &str = concat!("toolhost/", env!("CARGO_PKG_VERSION"));

/// A request before it is sent.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub method: Method,
    pub url: Url,
    pub headers: HeaderMap,
    body: Bytes,
    /// The body's media type, sent unless a header parameter names one.
    body_type: Option<&'static str>,
}

impl Outgoing {
    pub fn new(method: Method, url: Url) -> Outgoing {
        Outgoing {
            method,
            url,
            headers: HeaderMap::new(),
            body: Bytes::new(),
            body_type: None,
        }
    }

    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Outgoing {
        self.headers.append(name, value);
        self
    }

    /// A `application/x-www-form-urlencoded` body of `pairs`.
    pub fn form(mut self, pairs: &[(String, String)]) -> Outgoing {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        self.body = Bytes::from(body);
        self.body_type = Some("application/x-www-form-urlencoded");
        self
    }

    /// A JSON body.
    pub fn json(mut self, value: &serde_json::Value) -> Outgoing {
        self.body = Bytes::from(value.to_string());
        self.body_type = Some("application/json");
        self
    }

    /// The request as hyper writes it: origin-form target, `Host`, the
    /// agent, the body's type and length.
    pub fn to_http(&self) -> Result<Request<Full<Bytes>>, String> {
        let mut target = self.url.path().to_owned();
        if let Some(query) = self.url.query() {
            target.push('?');
            target.push_str(query);
        }
        let mut request = Request::builder()
            .method(self.method.clone())
            .uri(target)
            .body(Full::new(self.body.clone()))
            .map_err(|e| format!("cannot write the request: {e}"))?;
        let headers = request.headers_mut();
        headers.clone_from(&self.headers);
        let host = match self.url.port() {
            Some(port) => format!("{}:{port}", self.url.host_str().unwrap_or("")),
            None => self.url.host_str().unwrap_or("").to_owned(),
        };
        headers.insert(
            HOST,
            HeaderValue::from_str(&host).map_err(|_| format!("bad host {host}"))?,
        );
        if !headers.contains_key(USER_AGENT) {
            headers.insert(USER_AGENT, HeaderValue::from_static(AGENT));
        }
        if let Some(media) = self.body_type
            && !headers.contains_key(CONTENT_TYPE)
        {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(media));
        }
        if !self.body.is_empty() || !matches!(self.method, Method::GET | Method::HEAD) {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(self.body.len()));
        }
        Ok(request)
    }

    /// Whether sending this again is harmless (RFC 9110's idempotent methods).
    pub fn idempotent(&self) -> bool {
        matches!(
            self.method,
            Method::GET
                | Method::HEAD
                | Method::PUT
                | Method::DELETE
                | Method::OPTIONS
                | Method::TRACE
        )
    }

    /// Where an answer of `status` with `headers` sends this request next,
    /// if it is a redirect to follow.
    pub fn redirect_target(&self, status: StatusCode, headers: &HeaderMap) -> Option<Url> {
        if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
            return None;
        }
        let location = headers.get(LOCATION)?.to_str().ok()?;
        let next = self.url.join(location).ok()?;
        matches!(next.scheme(), "http" | "https").then_some(next)
    }

    /// This request sent on to `next` after an answer of `status`: 301, 302
    /// and 303 as `GET` without a body (`HEAD` stays), 307 and 308 as they
    /// were. Credentials (`Authorization`, cookies and the toolkit's own
    /// secret header `secret_header`) go only to the same origin.
    pub fn redirected(
        mut self,
        status: StatusCode,
        next: Url,
        secret_header: Option<&HeaderName>,
    ) -> Outgoing {
        if matches!(status.as_u16(), 301..=303) {
            if self.method != Method::HEAD {
                self.method = Method::GET;
            }
            self.body = Bytes::new();
            self.body_type = None;
            self.headers.remove(CONTENT_TYPE);
        }
        if next.origin() != self.url.origin() {
            for name in [AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION, WWW_AUTHENTICATE] {
                self.headers.remove(name);
            }
            if let Some(name) = secret_header {
                self.headers.remove(name);
            }
        }
        self.url = next;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(url: &str) -> Outgoing {
        Outgoing::new(Method::GET, Url::parse(url).unwrap())
    }

    #[test]
    fn written_in_origin_form_with_host_agent_and_body_type() {
        let request = Outgoing::new(
            Method::POST,
            Url::parse("http://api.example:8080/a/b?x=1").unwrap(),
        )
        .form(&[("k".into(), "a b".into())])
        .to_http()
        .unwrap();
        assert_eq!(request.uri(), "/a/b?x=1");
        let h = request.headers();
        assert_eq!(h[HOST], "api.example:8080");
        assert_eq!(h[CONTENT_TYPE], "application/x-www-form-urlencoded");
        assert_eq!(h[CONTENT_LENGTH], "5");
        assert!(h[USER_AGENT].to_str().unwrap().starts_with("toolhost/"));
        // A header parameter's own type wins; a later JSON body replaces the form.
        let request = get("https://api.example/")
            .header(
                CONTENT_TYPE,
                HeaderValue::from_static("application/vnd.x+json"),
            )
            .form(&[("a".into(), "1".into())])
            .json(&serde_json::json!({"b": 2}))
            .to_http()
            .unwrap();
        assert_eq!(request.headers()[CONTENT_TYPE], "application/vnd.x+json");
        assert_eq!(request.headers()[HOST], "api.example");
        assert!(request.headers().get(CONTENT_LENGTH).is_some());
        assert!(
            get("http://h/")
                .to_http()
                .unwrap()
                .headers()
                .get(CONTENT_LENGTH)
                .is_none()
        );
    }

    #[test]
    fn redirects_change_the_method_and_keep_credentials_at_home() {
        let key = HeaderName::from_static("x-api-key");
        let post = Outgoing::new(Method::POST, Url::parse("http://a.example/p").unwrap())
            .header(AUTHORIZATION, HeaderValue::from_static("Bearer s"))
            .header(key.clone(), HeaderValue::from_static("s"))
            .json(&serde_json::json!({}));
        let mut location = HeaderMap::new();
        location.insert(LOCATION, HeaderValue::from_static("/q?x=1"));
        let next = post.redirect_target(StatusCode::FOUND, &location).unwrap();
        assert_eq!(next.as_str(), "http://a.example/q?x=1");
        let same = post.clone().redirected(StatusCode::FOUND, next, Some(&key));
        assert_eq!(same.method, Method::GET);
        assert!(same.body.is_empty() && same.body_type.is_none());
        assert!(same.headers.contains_key(AUTHORIZATION) && same.headers.contains_key(&key));
        let kept = post.clone().redirected(
            StatusCode::TEMPORARY_REDIRECT,
            Url::parse("http://b.example/").unwrap(),
            Some(&key),
        );
        assert_eq!(kept.method, Method::POST);
        assert!(!kept.body.is_empty());
        assert!(!kept.headers.contains_key(AUTHORIZATION) && !kept.headers.contains_key(&key));
        // Not a redirect to follow: 304, no Location, another scheme.
        assert!(
            post.redirect_target(StatusCode::NOT_MODIFIED, &location)
                .is_none()
        );
        assert!(
            post.redirect_target(StatusCode::FOUND, &HeaderMap::new())
                .is_none()
        );
        location.insert(LOCATION, HeaderValue::from_static("file:///etc/passwd"));
        assert!(post.redirect_target(StatusCode::FOUND, &location).is_none());
    }
}
