//! Outbound HTTP through `wasi:http/outgoing-handler`. The host checks every
//! request against the manifest's `[http] allow` before a connection is made
//! and adds the secrets of `[[http.auth]]` itself: this code never holds a key.
//!
//! A response's head comes first ([`send`]), so a caller can refuse a body by
//! its type or declared length before reading any of it; [`Reply::read`]
//! counts bytes as they stream and stops at the cap.

use url::Url;

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
        let outgoing = request
            .body()
            .map_err(|()| NetError::Failed("the request body was already taken".into()))?;
        let pending = outgoing_handler::handle(request, None).map_err(error)?;
        if let Some(body) = req.body {
            let stream = outgoing
                .write()
                .map_err(|()| NetError::Failed("cannot write the request body".into()))?;
            for chunk in body.chunks(4096) {
                stream
                    .blocking_write_and_flush(chunk)
                    .map_err(|e| NetError::Failed(format!("sending the body failed: {e:?}")))?;
            }
            drop(stream);
        }
        OutgoingBody::finish(outgoing, None).map_err(error)?;
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

    pub fn read(reply: Reply, limit: usize) -> Result<Vec<u8>, NetError> {
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
                        return Err(NetError::TooLarge {
                            limit,
                            declared: None,
                        });
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => {
                    return Err(NetError::Failed(format!(
                        "reading the body failed: {}",
                        e.to_debug_string()
                    )));
                }
            }
        }
        Ok(bytes)
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

    pub fn read(_: Reply, _: usize) -> Result<Vec<u8>, NetError> {
        Err(NetError::Failed("no network outside the sandbox".into()))
    }
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
        imp::read(self, limit)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_one_short_line() {
        assert_eq!(excerpt(b"a\n\tb\x00c", 100), "a b c");
        assert_eq!(excerpt("é".repeat(10).as_bytes(), 3), "ééé…");
        assert_eq!(excerpt(&[0xff, b'x'], 10), "\u{fffd}x");
    }
}
