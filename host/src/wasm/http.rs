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

pub use crate::outbound::HttpPolicy;

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
