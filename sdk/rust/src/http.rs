//! Outbound HTTP through `wasi:http/outgoing-handler` (feature `http`).
//!
//! The host checks every request against the plugin's manifest (`[http]
//! allow`) before any connection is made, and adds the secrets of
//! `[[http.auth]]` itself: a plugin never holds a key. A response's head comes
//! first ([`send`]), so a plugin can refuse a body by its type or declared
//! length before reading any of it; [`Reply::read`] counts bytes as they
//! stream and stops at the cap. [`get`] and [`post`] do both for the common
//! case, with errors an agent can read.
//!
//! Outside wasm (a plugin's native unit tests) there is no network: every
//! request fails.

use url::Url;

use crate::ToolError;

/// Why a request gave no usable answer.
#[derive(Debug)]
pub enum NetError {
    /// The host refused the request (not on the allow-list, or a method it
    /// does not grant).
    Denied,
    /// The body is larger than the cap (`declared`: its `content-length`).
    TooLarge { limit: usize, declared: Option<u64> },
    /// Anything else, said for an agent.
    Failed(String),
}

impl NetError {
    /// As a tool error, naming `plugin` in the allow-list message.
    pub fn for_agent(self, plugin: &str) -> ToolError {
        match self {
            NetError::Denied => ToolError::failed(format!(
                "HTTP request denied: this host is not in the {plugin} plugin's allow-list \
                 (the manifest's [http] allow)"
            )),
            NetError::TooLarge { limit, declared } => ToolError::failed(format!(
                "the response is larger than {} KB{}",
                limit >> 10,
                declared.map_or(String::new(), |d| format!(" ({} KB declared)", d >> 10))
            )),
            NetError::Failed(m) => ToolError::failed(m),
        }
    }
}

/// A request to send.
pub struct Request<'a> {
    pub method: &'a str,
    pub url: &'a Url,
    pub headers: &'a [(&'a str, String)],
    pub body: Option<&'a [u8]>,
}

/// The head of a response; its body is read with [`Reply::read`].
pub struct Reply {
    pub status: u16,
    pub content_type: Option<String>,
    pub content_length: Option<u64>,
    pub location: Option<String>,
    #[cfg(target_arch = "wasm32")]
    body: wasip2::http::types::IncomingResponse,
}

/// An answer to [`get`] or [`post`].
#[derive(Debug)]
pub struct Response {
    /// The URL asked for.
    pub url: Url,
    /// HTTP status code.
    pub status: u16,
    /// The `content-type` header, if any.
    pub content_type: Option<String>,
    /// The body, at most the cap given.
    pub body: Vec<u8>,
    /// Whether the body went on past the cap (and was cut there).
    pub cut: bool,
}

/// Parse `url` as an http(s) URL; the agent's error otherwise.
pub fn parse_url(url: &str) -> Result<Url, ToolError> {
    let parsed = Url::parse(url)
        .map_err(|e| ToolError::invalid_input(format!("`url` is not a URL: {e}")))?;
    match parsed.scheme() {
        "http" | "https" => {}
        other => {
            return Err(ToolError::invalid_input(format!(
                "`url` must be http or https, not {other}"
            )));
        }
    }
    if parsed.host_str().is_none() {
        return Err(ToolError::invalid_input("`url` has no host"));
    }
    Ok(parsed)
}

/// GET `url` with `user_agent`, reading at most `max_body` bytes of the body
/// (`cut` says whether there was more; the rest is never downloaded).
/// `plugin` names the plugin in the allow-list error.
pub fn get(
    url: &Url,
    user_agent: &str,
    max_body: usize,
    plugin: &str,
) -> Result<Response, ToolError> {
    let headers = [("user-agent", user_agent.to_owned())];
    fetch(
        &Request {
            method: "GET",
            url,
            headers: &headers,
            body: None,
        },
        max_body,
        plugin,
    )
}

/// POST `body` (its content type among `headers`) to `url`; as [`get`].
pub fn post(
    url: &Url,
    body: &[u8],
    headers: &[(&str, String)],
    max_body: usize,
    plugin: &str,
) -> Result<Response, ToolError> {
    fetch(
        &Request {
            method: "POST",
            url,
            headers,
            body: Some(body),
        },
        max_body,
        plugin,
    )
}

fn fetch(request: &Request, max_body: usize, plugin: &str) -> Result<Response, ToolError> {
    let reply = send(request).map_err(|e| e.for_agent(plugin))?;
    let (status, content_type) = (reply.status, reply.content_type.clone());
    let (body, cut) = imp::read(reply, max_body, true).map_err(|e| e.for_agent(plugin))?;
    Ok(Response {
        url: request.url.clone(),
        status,
        content_type,
        body,
        cut,
    })
}

/// Send `request`; the response's head.
pub fn send(request: &Request) -> Result<Reply, NetError> {
    imp::send(request)
}

impl Reply {
    /// The whole body, or [`NetError::TooLarge`] as soon as it passes `limit`
    /// bytes (a declared larger length fails before any of it is read).
    pub fn read(self, limit: usize) -> Result<Vec<u8>, NetError> {
        if let Some(declared) = self.content_length.filter(|&n| n > limit as u64) {
            return Err(NetError::TooLarge {
                limit,
                declared: Some(declared),
            });
        }
        imp::read(self, limit, false).map(|(bytes, _)| bytes)
    }

    /// Whether this is a redirect with somewhere to go.
    pub fn redirect(&self) -> Option<&str> {
        matches!(self.status, 301 | 302 | 303 | 307 | 308)
            .then_some(self.location.as_deref())
            .flatten()
    }
}

/// The first `max` characters of `bytes` as one line of text, for messages.
pub fn excerpt(bytes: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect();
    out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::*;
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
    use wasip2::io::streams::StreamError;

    pub fn send(req: &Request) -> Result<Reply, NetError> {
        let url = req.url;
        let scheme = match url.scheme() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => return Err(NetError::Failed(format!("scheme `{other}` is not HTTP"))),
        };
        let host = url
            .host_str()
            .ok_or_else(|| NetError::Failed("the URL has no host".into()))?;
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let path = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        };
        let mut headers: Vec<(String, Vec<u8>)> = req
            .headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
            .collect();
        if let Some(body) = req.body {
            headers.push(("content-length".into(), body.len().to_string().into_bytes()));
        }
        let fields = Fields::from_list(&headers)
            .map_err(|e| NetError::Failed(format!("cannot build the request headers: {e:?}")))?;
        let request = OutgoingRequest::new(fields);
        let method = match req.method {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "HEAD" => Method::Head,
            other => Method::Other(other.to_owned()),
        };
        let bad = |what: &str| NetError::Failed(format!("cannot use this URL's {what}"));
        request.set_method(&method).map_err(|()| bad("method"))?;
        request
            .set_scheme(Some(&scheme))
            .map_err(|()| bad("scheme"))?;
        request
            .set_authority(Some(&authority))
            .map_err(|()| bad("host"))?;
        request
            .set_path_with_query(Some(&path))
            .map_err(|()| bad("path"))?;
        // A request without a body never opens one: the host then sends it
        // as known empty. An opened body is of unknown length until it is
        // finished, so it went out chunked, and a server answering before
        // its end came closed the connection under the answer (lost to the
        // reset the late end drew).
        let outgoing = req
            .body
            .map(|body| request.body().map(|outgoing| (outgoing, body)))
            .transpose()
            .map_err(|()| NetError::Failed("the request body was already taken".into()))?;
        let pending = outgoing_handler::handle(request, None).map_err(error)?;
        // The body is written once the request is under way, so that a body
        // larger than the host's buffer never blocks before anything reads it.
        if let Some((outgoing, body)) = outgoing {
            let stream = outgoing
                .write()
                .map_err(|()| NetError::Failed("cannot write the request body".into()))?;
            for chunk in body.chunks(4096) {
                stream
                    .blocking_write_and_flush(chunk)
                    .map_err(|e| NetError::Failed(format!("sending the body failed: {e:?}")))?;
            }
            drop(stream);
            OutgoingBody::finish(outgoing, None).map_err(error)?;
        }
        let response = loop {
            match pending.get() {
                Some(Ok(Ok(response))) => break response,
                Some(Ok(Err(e))) => return Err(error(e)),
                Some(Err(())) => {
                    return Err(NetError::Failed("the response was already taken".into()));
                }
                None => pending.subscribe().block(),
            }
        };
        let head = response.headers();
        let header = |name: &str| {
            head.get(name)
                .first()
                .map(|v| String::from_utf8_lossy(v).trim().to_owned())
        };
        Ok(Reply {
            status: response.status(),
            content_type: header("content-type"),
            content_length: header("content-length").and_then(|v| v.parse().ok()),
            location: header("location"),
            body: response,
        })
    }

    /// The body up to `limit` bytes: past it, cut there (`cut`) or
    /// [`NetError::TooLarge`].
    pub fn read(reply: Reply, limit: usize, cut: bool) -> Result<(Vec<u8>, bool), NetError> {
        let body = reply
            .body
            .consume()
            .map_err(|()| NetError::Failed("the response has no body".into()))?;
        let stream = body
            .stream()
            .map_err(|()| NetError::Failed("cannot read the response body".into()))?;
        let mut bytes = Vec::new();
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => {
                    if bytes.len() + chunk.len() > limit {
                        if !cut {
                            return Err(NetError::TooLarge {
                                limit,
                                declared: None,
                            });
                        }
                        let room = limit - bytes.len();
                        bytes.extend_from_slice(&chunk[..room]);
                        return Ok((bytes, true));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Err(StreamError::Closed) => return Ok((bytes, false)),
                Err(StreamError::LastOperationFailed(e)) => {
                    return Err(NetError::Failed(format!(
                        "reading the body failed: {}",
                        e.to_debug_string()
                    )));
                }
            }
        }
    }

    fn error(e: ErrorCode) -> NetError {
        match e {
            ErrorCode::HttpRequestDenied => NetError::Denied,
            ErrorCode::DnsError(_) => {
                NetError::Failed("the host name could not be resolved".into())
            }
            ErrorCode::ConnectionRefused => NetError::Failed("the connection was refused".into()),
            ErrorCode::ConnectionTimeout => NetError::Failed("the connection timed out".into()),
            other => NetError::Failed(format!("the request failed: {other:?}")),
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    //! Native builds (unit tests, clippy) have no wasi:http.
    use super::*;

    pub fn send(_: &Request) -> Result<Reply, NetError> {
        Err(NetError::Failed("no network outside the sandbox".into()))
    }

    pub fn read(_: Reply, _: usize, _: bool) -> Result<(Vec<u8>, bool), NetError> {
        Err(NetError::Failed("no network outside the sandbox".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_one_short_line() {
        assert_eq!(excerpt(b"a\n\tb\x00c", 100), "a b c");
        assert_eq!(excerpt("é".repeat(10).as_bytes(), 3), "ééé…");
        assert_eq!(excerpt(&[0xff, b'x'], 10), "\u{fffd}x");
    }

    #[test]
    fn urls_are_http_with_a_host() {
        assert!(parse_url("https://example.com/x?y").is_ok());
        for bad in ["ftp://x/", "not a url", "http://", "file:///etc/passwd"] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn denials_name_the_allow_list() {
        let ToolError::Failed(m) = NetError::Denied.for_agent("doc") else {
            panic!()
        };
        assert!(
            m.starts_with("HTTP request denied") && m.contains("doc plugin"),
            "{m}"
        );
    }
}
