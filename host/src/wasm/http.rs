//! Outbound HTTP for plugins (`wasi:http/outgoing-handler`), denied unless the
//! manifest grants it:
//!
//! ```toml
//! [http]
//! allow = ["example.com", "*.wikipedia.org", "127.0.0.1:8080", "api.example.net:*"]
//! methods = ["GET", "HEAD"]   # the default
//! ```
//!
//! An `allow` entry is a host (exact, or `*.domain` for its subdomains, not the
//! domain itself) with an optional port: none means the scheme's default port
//! (80 / 443), `*` any port. Every request is checked here before a
//! connection is opened; a refused one gets `HTTP-request-denied` inside the
//! plugin and a log line in the host. Names are matched as written: a name on
//! the list that resolves to an internal address is reached (list hosts you
//! trust).

use std::future::Future;
use std::sync::Arc;

use axum::http;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

/// One `allow` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    /// Lowercase host, without the `*.` of a wildcard.
    host: String,
    wildcard: bool,
    port: Port,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Port {
    /// The scheme's default port.
    Default,
    Any,
    Exact(u16),
}

/// What a plugin may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpPolicy {
    rules: Vec<Rule>,
    methods: Vec<String>,
}

/// The methods allowed when the manifest names none.
pub const DEFAULT_METHODS: [&str; 2] = ["GET", "HEAD"];

impl HttpPolicy {
    /// Parse the manifest's `[http]` grant; errors name the bad entry.
    pub fn parse(allow: &[String], methods: &[String]) -> Result<HttpPolicy, String> {
        let rules = allow
            .iter()
            .map(|entry| parse_rule(entry).map_err(|e| format!("http.allow entry `{entry}`: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let methods = if methods.is_empty() {
            DEFAULT_METHODS.iter().map(|m| m.to_string()).collect()
        } else {
            methods
                .iter()
                .map(|m| {
                    let upper = m.to_ascii_uppercase();
                    if !upper.is_empty() && upper.bytes().all(|b| b.is_ascii_uppercase()) {
                        Ok(upper)
                    } else {
                        Err(format!("http.methods entry `{m}` is not an HTTP method"))
                    }
                })
                .collect::<Result<Vec<_>, _>>()?
        };
        Ok(HttpPolicy { rules, methods })
    }

    /// Whether anything is granted at all.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Why a request may not go out, or `None` if it may.
    pub fn refusal(
        &self,
        method: &str,
        scheme: &str,
        host: &str,
        port: Option<u16>,
    ) -> Option<String> {
        if self.rules.is_empty() {
            return Some("the plugin's manifest grants no outbound HTTP ([http] allow)".into());
        }
        if !self.methods.iter().any(|m| m == method) {
            return Some(format!(
                "method {method} is not in the manifest's http.methods {:?}",
                self.methods
            ));
        }
        let default_port = match scheme {
            "http" => 80,
            "https" => 443,
            other => return Some(format!("scheme `{other}` is not allowed")),
        };
        let port = port.unwrap_or(default_port);
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let allowed = self.rules.iter().any(|r| {
            let host_ok = if r.wildcard {
                host.len() > r.host.len() + 1
                    && host.ends_with(&r.host)
                    && host.as_bytes()[host.len() - r.host.len() - 1] == b'.'
            } else {
                host == r.host
            };
            let port_ok = match r.port {
                Port::Default => port == default_port,
                Port::Any => true,
                Port::Exact(p) => port == p,
            };
            host_ok && port_ok
        });
        (!allowed).then(|| format!("{host}:{port} is not in the manifest's http.allow list"))
    }
}

fn parse_rule(entry: &str) -> Result<Rule, String> {
    let entry = entry.trim().to_ascii_lowercase();
    if entry.contains("://") || entry.contains('/') {
        return Err("write a host with an optional port, without a scheme or path".into());
    }
    // `[::1]:8080` / `[::1]` (IPv6) or `host:port` / `host`.
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (addr, after) = rest.split_once(']').ok_or("unclosed `[`")?;
        (format!("[{addr}]"), after.strip_prefix(':'))
    } else {
        match entry.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (entry.clone(), None),
        }
    };
    let port = match port {
        None => Port::Default,
        Some("*") => Port::Any,
        Some(p) => Port::Exact(p.parse().map_err(|_| format!("bad port `{p}`"))?),
    };
    let (host, wildcard) = match host.strip_prefix("*.") {
        Some(domain) => (domain.to_owned(), true),
        None => (host, false),
    };
    let valid = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.[]:".contains(&b));
    if !valid {
        return Err("not a host name or address (`*` only as `*.domain`)".into());
    }
    Ok(Rule {
        host,
        wildcard,
        port,
    })
}

/// The wasi:http hooks of one call: the policy check before the default
/// sender.
pub struct PolicyHooks {
    pub policy: Arc<HttpPolicy>,
    pub plugin: String,
    pub tool: String,
}

impl WasiHttpHooks for PolicyHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<WasiBody>,
                        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                    ),
                    HttpError,
                >,
            > + Send,
    > {
        let uri = request.uri();
        let refusal = self.policy.refusal(
            request.method().as_str(),
            uri.scheme_str().unwrap_or(""),
            uri.host().unwrap_or(""),
            uri.port_u16(),
        );
        if let Some(why) = refusal {
            tracing::warn!(
                plugin = %self.plugin,
                tool = %self.tool,
                method = %request.method(),
                uri = %uri,
                "outbound HTTP refused: {why}"
            );
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        tracing::debug!(plugin = %self.plugin, method = %request.method(), uri = %uri, "outbound HTTP");
        let _ = fut;
        Box::new(async move {
            use http_body_util::BodyExt;
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = Result<(), HttpError>> + Send>,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], methods: &[&str]) -> HttpPolicy {
        HttpPolicy::parse(
            &allow.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            &methods.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap()
    }

    #[test]
    fn hosts_wildcards_ports_and_methods() {
        let p = policy(
            &[
                "example.com",
                "*.wiki.org",
                "127.0.0.1:8080",
                "api.net:*",
                "[::1]:9000",
            ],
            &[],
        );
        let ok = |m: &str, s: &str, h: &str, port: Option<u16>| p.refusal(m, s, h, port).is_none();
        assert!(ok("GET", "https", "example.com", None));
        assert!(ok("GET", "http", "EXAMPLE.com.", Some(80)));
        assert!(
            !ok("GET", "https", "example.com", Some(8443)),
            "default port only"
        );
        assert!(!ok("GET", "https", "sub.example.com", None), "exact host");
        assert!(!ok("GET", "https", "example.com.evil.net", None));
        assert!(ok("GET", "https", "en.wiki.org", None));
        assert!(ok("GET", "https", "a.b.wiki.org", None));
        assert!(
            !ok("GET", "https", "wiki.org", None),
            "a wildcard is subdomains only"
        );
        assert!(!ok("GET", "https", "evilwiki.org", None));
        assert!(ok("GET", "http", "127.0.0.1", Some(8080)));
        assert!(!ok("GET", "http", "127.0.0.1", Some(8081)));
        assert!(!ok("GET", "http", "127.0.0.1", None));
        assert!(ok("HEAD", "https", "api.net", Some(1234)));
        assert!(ok("GET", "http", "[::1]", Some(9000)));
        assert!(
            !ok("POST", "https", "example.com", None),
            "GET and HEAD by default"
        );
        assert!(!ok("GET", "ftp", "example.com", Some(80)));

        let post = policy(&["example.com"], &["post"]);
        assert!(post.refusal("POST", "https", "example.com", None).is_none());
        assert!(post.refusal("GET", "https", "example.com", None).is_some());

        let none = HttpPolicy::default();
        assert!(none.is_empty());
        assert!(
            none.refusal("GET", "https", "example.com", None)
                .unwrap()
                .contains("grants no outbound HTTP")
        );
    }

    #[test]
    fn bad_entries_are_refused_with_their_text() {
        for bad in [
            "http://x.com",
            "x.com/path",
            "*",
            "*.",
            "x.com:port",
            "a b",
            "[::1",
        ] {
            let err = HttpPolicy::parse(&[bad.to_string()], &[]).unwrap_err();
            assert!(err.contains(bad), "{bad}: {err}");
        }
        assert!(HttpPolicy::parse(&[], &["G ET".into()]).is_err());
    }
}
