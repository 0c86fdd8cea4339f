//! What a tool may reach over outbound HTTP: the allow-list every backend
//! that sends requests for tools checks before a connection is opened (wasm
//! plugins through wasi:http, API tools through the host's client).
//!
//! An `allow` entry is a host (exact, or `*.domain` for its subdomains, not the
//! domain itself) with an optional port: none means the scheme's default port
//! (80 / 443), `*` any port. A wildcard never matches an IP address.
//! [`is_internal`] tells the addresses (loopback, private, link-local ...)
//! that a backend reaches only when the host is on the list by its exact
//! name or address.

use std::net::{IpAddr, SocketAddr};

pub mod connect;
pub mod link;
pub mod pool;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpPolicy {
    rules: Vec<Rule>,
    methods: Vec<String>,
    /// The manifest field of the list, as messages name it.
    field: &'static str,
}

impl Default for HttpPolicy {
    /// Nothing granted.
    fn default() -> Self {
        HttpPolicy {
            rules: Vec::new(),
            methods: Vec::new(),
            field: "http.allow",
        }
    }
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
        Ok(HttpPolicy {
            rules,
            methods,
            field: "http.allow",
        })
    }

    /// The same policy, its list named `field` in messages (`[api] allow`).
    pub fn named(mut self, field: &'static str) -> Self {
        self.field = field;
        self
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
            return Some(format!(
                "the manifest grants no outbound HTTP ({} is empty)",
                self.field
            ));
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
        let literal = host.trim_matches(['[', ']']).parse::<IpAddr>().is_ok();
        let allowed = self.rules.iter().any(|r| {
            let host_ok = if r.wildcard {
                !literal
                    && host.len() > r.host.len() + 1
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
        (!allowed).then(|| format!("{host}:{port} is not in the manifest's {} list", self.field))
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

/// Whether `ip` is an address a tool reaches only when its host is allowed
/// by exact name: loopback, private (RFC 1918, unique local), link-local,
/// carrier-grade NAT, unspecified, multicast, broadcast, documentation, or an
/// IPv4-mapped IPv6 form of one of those.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || (a == 100 && (64..128).contains(&b))
                || a == 0
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

impl HttpPolicy {
    /// Whether `host` (any port) is on the list by its exact name or
    /// address, not through a wildcard: what [`is_internal`] addresses
    /// need.
    pub fn names_exactly(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.rules.iter().any(|r| !r.wildcard && r.host == host)
    }
}

/// Name resolution under an allow-list, for the host's HTTP clients:
/// internal addresses only for hosts the list names exactly ([`usable`]).
/// Implemented for reqwest (the OAuth, OCI and build callbacks' clients, and
/// rmcp's client); API toolkits' own connections call
/// [`PolicyResolver::resolve_with`] (`connect.rs`).
pub struct PolicyResolver(pub std::sync::Arc<HttpPolicy>);

impl PolicyResolver {
    /// The addresses of `host` (port 0) a request under `policy` may use.
    pub async fn resolve_with(policy: &HttpPolicy, host: &str) -> Result<Vec<SocketAddr>, String> {
        let found: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
            .await
            .map_err(|e| format!("{host}: {e}"))?
            .collect();
        usable(policy, host, &found)
    }
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let (policy, host) = (self.0.clone(), name.as_str().to_owned());
        Box::pin(async move {
            let addrs = PolicyResolver::resolve_with(&policy, &host).await?;
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// The addresses of `host` a request may use: internal ones only when the
/// allow-list names the host exactly; an error when none is left.
pub fn usable(
    policy: &HttpPolicy,
    host: &str,
    found: &[SocketAddr],
) -> Result<Vec<SocketAddr>, String> {
    let exact = policy.names_exactly(host);
    let usable: Vec<SocketAddr> = found
        .iter()
        .copied()
        .filter(|a| exact || !is_internal(a.ip()))
        .collect();
    if usable.is_empty() {
        return Err(if found.is_empty() {
            format!("{host} has no address")
        } else {
            format!(
                "{host} resolves only to internal addresses: list it by its exact name in the allow-list to reach it"
            )
        });
    }
    Ok(usable)
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
    fn wildcards_never_match_addresses_and_internal_ones_are_told() {
        let p = policy(&["*.0.1:*", "localhost:*"], &[]);
        assert!(p.refusal("GET", "http", "127.0.0.1", Some(80)).is_some());
        assert!(p.names_exactly("LOCALHOST"));
        assert!(!p.names_exactly("a.0.1"));
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
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
    #[test]
    fn internal_addresses_need_the_exact_name() {
        let policy = HttpPolicy::parse(
            &["*.corp.example:*".into(), "db.corp.example:*".into()],
            &[],
        )
        .unwrap();
        let private: SocketAddr = "10.0.0.5:0".parse().unwrap();
        let public: SocketAddr = "93.184.216.34:0".parse().unwrap();
        let err = usable(&policy, "wiki.corp.example", &[private]).unwrap_err();
        assert!(err.contains("internal addresses"), "{err}");
        assert_eq!(
            usable(&policy, "wiki.corp.example", &[private, public]).unwrap(),
            [public]
        );
        assert_eq!(
            usable(&policy, "db.corp.example", &[private]).unwrap(),
            [private]
        );
        assert!(
            usable(&policy, "x.corp.example", &[])
                .unwrap_err()
                .contains("no address")
        );
    }
}
