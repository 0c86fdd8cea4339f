//! Browser safety for every route: the `Host` a request names and the
//! `Origin` a browser sends, checked before authentication and before any
//! handler, so a web page can neither drive a loopback server (a cross-site
//! `fetch`, a form) nor reach it through a name it rebinds to 127.0.0.1.
//!
//! - **Host.** On a loopback server every request must name a loopback host
//!   (`localhost`, `127.0.0.1`, `::1`), the bind address or one of
//!   `[server] allowed_hosts`; anything else is 403. On another address the
//!   operator's own names are unknown, so any `Host` passes unless
//!   `allowed_hosts` is set (`"*"` lets any through everywhere).
//! - **Origin.** Browsers send `Origin` with every request that is not a
//!   plain GET or HEAD (and with every cross-origin `fetch`). A request that
//!   carries one is served only when it is the server's own origin (the
//!   console) or listed in `[server] allowed_origins`; any other is 403.
//!   Clients that are not browsers send no `Origin` and are not affected.
//! - **CORS** only for `allowed_origins`: their preflights are answered and
//!   their answers carry `Access-Control-Allow-Origin`; nothing else gets
//!   CORS headers, so a browser keeps every other page's reads blocked.
//!
//! JSON routes also refuse a body typed as anything but JSON (415, in
//! [`super::body`]): the types a page may send without a preflight
//! (`text/plain`, forms) never parse as a tool call.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// The headers a cross-origin page may read from an answer.
const EXPOSED: &str = "mcp-session-id, mcp-protocol-version, x-request-id, x-toolhost-session, retry-after, www-authenticate";
/// The methods a preflight is told about.
const METHODS: &str = "GET, POST, PUT, DELETE, OPTIONS";
/// How long a browser may remember a preflight, seconds.
const MAX_AGE: &str = "600";

/// Which hosts and origins the server answers.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// `None`: any `Host`.
    hosts: Option<Vec<String>>,
    /// Exact origins (`scheme://host[:port]`, lower case, no trailing `/`).
    origins: Vec<String>,
    /// `allowed_origins` holds `"*"`.
    any_origin: bool,
}

impl Guard {
    /// The guard of a server bound to `bind`, with `[server] allowed_hosts`
    /// and `allowed_origins`.
    pub fn new(
        bind: std::net::IpAddr,
        allowed_hosts: &[String],
        allowed_origins: &[String],
    ) -> Self {
        let any_host = allowed_hosts.iter().any(|h| h == "*");
        let hosts = (!any_host && (bind.is_loopback() || !allowed_hosts.is_empty())).then(|| {
            // `[::1]` as well, for rmcp's own check of `/mcp`.
            let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
                .into_iter()
                .map(String::from)
                .collect();
            if !bind.is_unspecified() {
                hosts.push(bind.to_string());
            }
            hosts.extend(allowed_hosts.iter().map(|h| h.to_ascii_lowercase()));
            hosts
        });
        Guard {
            hosts,
            origins: allowed_origins
                .iter()
                .filter(|o| *o != "*")
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            any_origin: allowed_origins.iter().any(|o| o == "*"),
        }
    }

    /// The `Host` names accepted, for the surfaces that check it again
    /// themselves (rmcp's); `None` accepts any.
    pub fn hosts(&self) -> Option<Vec<String>> {
        self.hosts.clone()
    }

    /// Why a request with these headers is refused (`Err`); else the
    /// listed origin it came from, whose answer gets CORS headers.
    fn verdict(
        &self,
        headers: &HeaderMap,
        uri_host: Option<&str>,
    ) -> Result<Option<HeaderValue>, String> {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .or(uri_host);
        if let Some(allowed) = &self.hosts {
            let Some(host) = host else {
                return Err("the request names no Host".into());
            };
            let name = host_name(host);
            if !name.is_some_and(|n| allowed.iter().any(|a| a.eq_ignore_ascii_case(n))) {
                return Err(format!(
                    "Host `{host}` is not a name of this server (DNS rebinding protection; \
                     add it to [server] allowed_hosts)"
                ));
            }
        }
        let Some(value) = headers.get(header::ORIGIN) else {
            return Ok(None);
        };
        let Ok(origin) = value.to_str() else {
            return Err("the Origin header is not text".into());
        };
        if self.origin_listed(origin) {
            return Ok(Some(value.clone()));
        }
        if host.is_some_and(|h| same_origin(origin, h)) {
            return Ok(None);
        }
        Err(format!(
            "cross-origin request from `{origin}` refused (add it to [server] allowed_origins)"
        ))
    }

    fn origin_listed(&self, origin: &str) -> bool {
        self.any_origin
            || self
                .origins
                .iter()
                .any(|o| o.eq_ignore_ascii_case(origin.trim_end_matches('/')))
    }
}

/// The host part of a `Host` value (brackets of an IPv6 address removed);
/// `None` for a value that is not a plain `host[:port]`. A slice of the
/// header: every request on loopback goes through here, and names that are
/// not plain cannot match a listed one anyway.
fn host_name(host: &str) -> Option<&str> {
    let port_ok = |port: &str| port.bytes().all(|b| b.is_ascii_digit());
    if host.contains('@') {
        return None;
    }
    let name = match host.strip_prefix('[') {
        Some(rest) => {
            let (name, after) = rest.split_once(']')?;
            (after.is_empty() || after.strip_prefix(':').is_some_and(port_ok)).then_some(name)?
        }
        None => match host.rsplit_once(':') {
            Some((name, port)) if port_ok(port) && !name.contains(':') => name,
            Some(_) => return None,
            None => host,
        },
    };
    (!name.is_empty()).then_some(name)
}

/// Whether `origin` (`scheme://authority`) is the origin of a page served
/// by the server that `host` names: the console's own requests.
fn same_origin(origin: &str, host: &str) -> bool {
    let origin = origin.to_ascii_lowercase();
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let default_port = match scheme {
        "http" => ":80",
        "https" => ":443",
        _ => return false,
    };
    let strip = |a: &str| -> String {
        a.strip_suffix(default_port)
            .unwrap_or(a)
            .to_ascii_lowercase()
    };
    // A Host sent by a browser to an http origin carries no `:443`, and so on.
    strip(authority) == strip(host)
}

impl Guard {
    /// Admit a request (`Ok`, with the listed origin whose answer gets CORS
    /// headers, [`expose`]) or answer it here (`Err`): a refusal, or a
    /// listed origin's preflight.
    pub fn admit(&self, request: &Request) -> Result<Option<HeaderValue>, Box<Response>> {
        let origin = match self.verdict(request.headers(), request.uri().host()) {
            Ok(Some(listed)) => listed,
            Ok(None) => return Ok(None),
            Err(reason) => {
                tracing::warn!(
                    method = %request.method(),
                    path = %request.uri().path(),
                    reason = %reason,
                    "request refused by the browser guard"
                );
                let refused =
                    ApiError::new(StatusCode::FORBIDDEN, "forbidden", reason).into_response();
                return Err(Box::new(super::body::close_unread(
                    request.headers(),
                    refused,
                )));
            }
        };
        if request.method() == Method::OPTIONS
            && request
                .headers()
                .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        {
            let mut response = StatusCode::NO_CONTENT.into_response();
            let h = response.headers_mut();
            h.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static(METHODS),
            );
            if let Some(asked) = request
                .headers()
                .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            {
                h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked.clone());
            }
            h.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static(MAX_AGE),
            );
            allow(h, origin);
            return Err(Box::new(response));
        }
        Ok(Some(origin))
    }
}

/// Mark the answer to a listed origin readable by its page.
pub fn expose(response: &mut Response, origin: HeaderValue) {
    let h = response.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSED),
    );
    allow(h, origin);
}

fn allow(h: &mut HeaderMap, origin: HeaderValue) {
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.append(header::VARY, HeaderValue::from_static("origin"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    /// Why the guard refuses these headers, if it does.
    fn refusal(g: &Guard, h: &HeaderMap) -> Option<String> {
        g.verdict(h, None).err()
    }

    fn loopback(hosts: &[&str], origins: &[&str]) -> Guard {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Guard::new([127, 0, 0, 1].into(), &s(hosts), &s(origins))
    }

    #[test]
    fn a_loopback_server_answers_its_own_names_only() {
        let g = loopback(&[], &[]);
        for ok in [
            "127.0.0.1:8001",
            "localhost:8001",
            "LOCALHOST",
            "[::1]:8001",
            "127.0.0.1",
        ] {
            assert_eq!(refusal(&g, &headers(&[("host", ok)])), None, "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8001",
            "localhost.:8001",
            "127.0.0.1.evil.example",
            "127.1:8001",
            "localhost:8001@evil",
            "[::1",
            "[::1]x",
            "localhost:80:80",
            ":8001",
            "local host",
            "::1",
        ] {
            assert!(refusal(&g, &headers(&[("host", bad)])).is_some(), "{bad}");
        }
        assert!(refusal(&g, &headers(&[])).is_some(), "no Host");
        let g = loopback(&["toolhost.internal"], &[]);
        assert_eq!(
            refusal(&g, &headers(&[("host", "toolhost.internal:80")])),
            None
        );
        let g = loopback(&["*"], &[]);
        assert_eq!(refusal(&g, &headers(&[("host", "evil.example")])), None);
        // Elsewhere any name passes unless names are configured.
        let g = Guard::new([0, 0, 0, 0].into(), &[], &[]);
        assert_eq!(refusal(&g, &headers(&[("host", "toolhost.example")])), None);
        let g = Guard::new([0, 0, 0, 0].into(), &["toolhost.example".into()], &[]);
        assert_eq!(refusal(&g, &headers(&[("host", "toolhost.example")])), None);
        assert!(refusal(&g, &headers(&[("host", "evil.example")])).is_some());
    }

    #[test]
    fn only_the_own_or_a_listed_origin_is_served() {
        let g = loopback(&[], &["https://app.example"]);
        let host = ("host", "127.0.0.1:8001");
        assert_eq!(refusal(&g, &headers(&[host])), None, "no Origin");
        for own in ["http://127.0.0.1:8001", "HTTP://127.0.0.1:8001"] {
            assert_eq!(
                refusal(&g, &headers(&[host, ("origin", own)])),
                None,
                "{own}"
            );
        }
        assert_eq!(
            refusal(&g, &headers(&[host, ("origin", "https://app.example/")])),
            None
        );
        for foreign in [
            "http://evil.example",
            "http://127.0.0.1:9999",
            "https://127.0.0.1:8001.evil.example",
            "null",
            "file://",
            "https://app.example.evil",
        ] {
            assert!(
                refusal(&g, &headers(&[host, ("origin", foreign)])).is_some(),
                "{foreign}"
            );
        }
        // Default ports: a page on http://localhost talks to Host localhost.
        let h = headers(&[("host", "localhost"), ("origin", "http://localhost:80")]);
        assert_eq!(refusal(&g, &h), None);
        assert!(loopback(&[], &["*"]).origin_listed("http://anything.example"));
    }
}
