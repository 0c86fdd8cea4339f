//! Outbound HTTP (GET, POST) through `wasi:http/outgoing-handler` (feature `http`).
//!
//! The host checks every request against the plugin's manifest (`[http]
//! allow`) before any connection is made, so a plugin reaches exactly the hosts
//! its operator listed; a refused request comes back as an error the agent
//! can read. Bodies are read up to a cap, counted while they stream.

use wasip2::http::outgoing_handler;
use wasip2::http::types::{ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
use wasip2::io::streams::StreamError;

use crate::ToolError;

/// An answer to [`get`].
#[derive(Debug)]
pub struct Response {
    /// The URL asked for.
    pub url: url::Url,
    /// HTTP status code.
    pub status: u16,
    /// The `content-type` header, if any.
    pub content_type: Option<String>,
    /// The body, at most the cap given to [`get`].
    pub body: Vec<u8>,
    /// Whether the body went on past the cap (and was cut there).
    pub cut: bool,
}

/// Parse `url` as an http(s) URL; the agent's error otherwise.
pub fn parse_url(url: &str) -> Result<url::Url, ToolError> {
    let parsed = url::Url::parse(url)
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
    url: &url::Url,
    user_agent: &str,
    max_body: usize,
    plugin: &str,
) -> Result<Response, ToolError> {
    send(url, None, &[("user-agent", user_agent)], max_body, plugin)
}

/// POST `body` (its content type among `headers`) to `url`; as [`get`].
pub fn post(
    url: &url::Url,
    body: &[u8],
    headers: &[(&str, &str)],
    max_body: usize,
    plugin: &str,
) -> Result<Response, ToolError> {
    send(url, Some(body), headers, max_body, plugin)
}

fn send(
    url: &url::Url,
    body: Option<&[u8]>,
    headers: &[(&str, &str)],
    max_body: usize,
    plugin: &str,
) -> Result<Response, ToolError> {
    let scheme = match url.scheme() {
        "https" => Scheme::Https,
        _ => Scheme::Http,
    };
    let host = url
        .host_str()
        .ok_or_else(|| ToolError::invalid_input("`url` has no host"))?;
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    let fields: Vec<(String, Vec<u8>)> = headers
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
        .collect();
    let headers = Fields::from_list(&fields)
        .map_err(|e| ToolError::failed(format!("cannot build the request headers: {e:?}")))?;
    let request = OutgoingRequest::new(headers);
    let bad = |what: &str| ToolError::invalid_input(format!("cannot use this URL's {what}"));
    let method = if body.is_some() {
        Method::Post
    } else {
        Method::Get
    };
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
        .map_err(|()| ToolError::failed("cannot open the request body"))?;

    let error = |e| http_error(e, plugin);
    let pending = outgoing_handler::handle(request, None).map_err(error)?;
    // The body is written once the request is under way, so that a body larger
    // than the host's buffer never blocks before anything reads it.
    if let Some(body) = body {
        let stream = outgoing
            .write()
            .map_err(|()| ToolError::failed("cannot write the request body"))?;
        for chunk in body.chunks(4096) {
            stream.blocking_write_and_flush(chunk).map_err(|e| {
                ToolError::failed(format!("sending the request body failed: {e:?}"))
            })?;
        }
        drop(stream);
    }
    OutgoingBody::finish(outgoing, None)
        .map_err(|e| ToolError::failed(format!("sending the request failed: {e:?}")))?;
    let response = loop {
        match pending.get() {
            Some(Ok(Ok(response))) => break response,
            Some(Ok(Err(e))) => return Err(error(e)),
            Some(Err(())) => return Err(ToolError::failed("the response was already taken")),
            None => pending.subscribe().block(),
        }
    };
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .first()
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let body = response
        .consume()
        .map_err(|()| ToolError::failed("the response has no body"))?;
    let stream = body
        .stream()
        .map_err(|()| ToolError::failed("cannot read the response body"))?;
    let mut bytes = Vec::new();
    let mut cut = false;
    loop {
        if bytes.len() > max_body {
            cut = true;
            break;
        }
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(ToolError::failed(format!(
                    "reading the body failed: {}",
                    e.to_debug_string()
                )));
            }
        }
    }
    bytes.truncate(max_body);
    Ok(Response {
        url: url.clone(),
        status,
        content_type,
        body: bytes,
        cut,
    })
}

/// A wasi:http error as the agent should read it.
fn http_error(e: ErrorCode, plugin: &str) -> ToolError {
    match e {
        ErrorCode::HttpRequestDenied => ToolError::failed(format!(
            "HTTP request denied: this host is not in the {plugin} plugin's allow-list \
             (the manifest's [http] allow)"
        )),
        ErrorCode::DnsError(_) => ToolError::failed("the host name could not be resolved"),
        ErrorCode::ConnectionRefused => ToolError::failed("the connection was refused"),
        other => ToolError::failed(format!("the request failed: {other:?}")),
    }
}
