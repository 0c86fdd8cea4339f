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
//!
//! `[[http.auth]]` entries ([`Credentials`]) add a secret, as a sensitive
//! header, to the requests that passed the check and go to that exact host
//! and port (`kind = "header"` with a `name`, or `"bearer"`). The value comes
//! from the server's `[secrets]` or `TOOLHOST_SECRET_<NAME>` when the plugin
//! loads (a missing one fails the load, shown in `GET /plugins`); the plugin
//! never holds it, and redirects it follows to other hosts do not carry it.

use std::future::Future;
use std::sync::Arc;

use axum::http;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use crate::credentials::Secrets;
pub use crate::outbound::HttpPolicy;
use crate::wasm::manifest::HttpAuth;

/// The secrets a plugin's manifest has the host inject (`[[http.auth]]`),
/// resolved at load time. `Debug` shows hosts and header names only.
#[derive(Default)]
pub struct Credentials(Vec<Credential>);

struct Credential {
    host: String,
    /// None: the scheme's default port.
    port: Option<u16>,
    name: http::HeaderName,
    value: http::HeaderValue,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|c| (&c.host, c.port, c.name.as_str())))
            .finish()
    }
}

impl Credentials {
    /// Each entry's secret from `secrets`, checked against `policy` (its
    /// host must be allowed for `method`); errors name the entry.
    pub fn resolve(
        grants: &[HttpAuth],
        secrets: &Secrets,
        policy: &HttpPolicy,
        method: &str,
    ) -> Result<Credentials, String> {
        let mut out = Vec::new();
        for grant in grants {
            let field = format!("http.auth for `{}`", grant.host);
            let (host, port) = grant.target()?;
            let allowed = ["https", "http"]
                .iter()
                .any(|scheme| policy.refusal(method, scheme, &host, port).is_none());
            if !allowed {
                return Err(format!("{field}: the host is not in http.allow"));
            }
            let secret = secrets
                .get(&grant.secret)
                .map_err(|e| format!("{field}: {e}"))?;
            let (name, value) = grant
                .as_auth()
                .header(&secret)
                .map_err(|e| format!("{field}: {e}"))?
                .ok_or_else(|| format!("{field}: kind: header or bearer"))?;
            out.push(Credential {
                host,
                port,
                name,
                value,
            });
        }
        Ok(Credentials(out))
    }

    /// The headers for a request to `host` (and `port`, else the scheme's
    /// default) over `scheme`.
    fn for_target<'a>(
        &'a self,
        scheme: &str,
        host: &str,
        port: Option<u16>,
    ) -> impl Iterator<Item = (&'a http::HeaderName, &'a http::HeaderValue)> {
        let default = if scheme == "https" { 443 } else { 80 };
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let port = port.unwrap_or(default);
        self.0
            .iter()
            .filter(move |c| c.host == host && c.port.unwrap_or(default) == port)
            .map(|c| (&c.name, &c.value))
    }
}

/// The wasi:http hooks of one call: the policy check before the default
/// sender.
pub struct PolicyHooks {
    pub policy: Arc<HttpPolicy>,
    pub credentials: Arc<Credentials>,
    pub plugin: String,
    pub tool: String,
}

impl WasiHttpHooks for PolicyHooks {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
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
        let uri = uri.clone();
        let scheme = uri.scheme_str().unwrap_or("");
        for (name, value) in
            self.credentials
                .for_target(scheme, uri.host().unwrap_or(""), uri.port_u16())
        {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        let _ = fut;
        let span = crate::telemetry::client_span(
            request.method().as_str(),
            &uri.to_string(),
            uri.host().unwrap_or(""),
        );
        crate::telemetry::inject_headers_of(&span, request.headers_mut());
        Box::new(async move {
            use http_body_util::BodyExt;
            use tracing::Instrument;
            let sent = wasmtime_wasi_http::default_send_request(request, options)
                .instrument(span.clone())
                .await;
            crate::telemetry::ended(
                &span,
                sent.as_ref()
                    .map(|(r, _)| r.status().as_u16())
                    .map_err(|_| "request_failed"),
            );
            let (response, io) = sent?;
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
    use crate::wasm::manifest::Manifest;

    fn grants(text: &str) -> Vec<HttpAuth> {
        Manifest::parse(text).unwrap().http.auth
    }

    #[test]
    fn credentials_go_to_their_exact_host_and_port_only() {
        let policy =
            HttpPolicy::parse(&["api.example.com".into(), "127.0.0.1:*".into()], &[]).unwrap();
        let secrets = Secrets::new([("K".to_owned(), "s3cr3t".to_owned())].into());
        let auth = grants(
            "[[http.auth]]\nhost = \"API.example.com\"\nkind = \"header\"\nname = \"X-Key\"\nsecret = \"K\"\n\
             [[http.auth]]\nhost = \"127.0.0.1:8080\"\nkind = \"bearer\"\nsecret = \"K\"\n",
        );
        let creds = Credentials::resolve(&auth, &secrets, &policy, "GET").unwrap();
        assert!(!format!("{creds:?}").contains("s3cr3t"), "{creds:?}");
        let sent = |scheme, host, port| {
            creds
                .for_target(scheme, host, port)
                .map(|(n, v)| {
                    (
                        n.as_str().to_owned(),
                        v.to_str().unwrap().to_owned(),
                        v.is_sensitive(),
                    )
                })
                .collect::<Vec<_>>()
        };
        let key = vec![("x-key".to_owned(), "s3cr3t".to_owned(), true)];
        assert_eq!(sent("https", "api.example.com", None), key);
        assert_eq!(sent("https", "api.example.com", Some(443)), key);
        assert_eq!(sent("https", "api.example.com.", None), key);
        assert!(sent("https", "api.example.com", Some(8443)).is_empty());
        assert!(sent("https", "evil.api.example.com", None).is_empty());
        assert!(sent("https", "example.com", None).is_empty());
        let bearer = vec![("authorization".to_owned(), "Bearer s3cr3t".to_owned(), true)];
        assert_eq!(sent("http", "127.0.0.1", Some(8080)), bearer);
        assert!(sent("http", "127.0.0.1", Some(8081)).is_empty());
        assert!(sent("http", "127.0.0.1", None).is_empty());
    }

    #[test]
    fn a_missing_secret_or_an_unlisted_host_fails_the_load() {
        let policy = HttpPolicy::parse(&["api.example.com".into()], &[]).unwrap();
        let auth = grants(
            "[[http.auth]]\nhost = \"api.example.com\"\nkind = \"bearer\"\nsecret = \"NOT_SET_ANYWHERE_23\"\n",
        );
        let err = Credentials::resolve(&auth, &Secrets::default(), &policy, "GET").unwrap_err();
        assert!(
            err.contains("api.example.com") && err.contains("TOOLHOST_SECRET_NOT_SET_ANYWHERE_23"),
            "{err}"
        );
        let auth = grants(
            "[[http.auth]]\nhost = \"other.example.com\"\nkind = \"bearer\"\nsecret = \"K\"\n",
        );
        let secrets = Secrets::new([("K".to_owned(), "v".to_owned())].into());
        let err = Credentials::resolve(&auth, &secrets, &policy, "GET").unwrap_err();
        assert!(err.contains("not in http.allow"), "{err}");
        let err = Credentials::resolve(&auth, &secrets, &policy, "POST").unwrap_err();
        assert!(err.contains("other.example.com"), "{err}");
    }
}
