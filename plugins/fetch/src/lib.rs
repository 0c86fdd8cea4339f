//! `fetch`: a web page as an agent wants it, readable text plus links.
//!
//! The request goes out through `wasi:http/outgoing-handler`; the host checks
//! it against this plugin's manifest (`[http] allow`) before any connection
//! is made, so the plugin reaches exactly the hosts its operator listed. A
//! refused request is an error the agent reads (`HTTP-request-denied`).

mod html;

use serde::Serialize;
use toolhost_sdk::{Deserialize, Json, JsonSchema, ToolError, host};
use wasip2::http::outgoing_handler;
use wasip2::http::types::{ErrorCode, Fields, Method, OutgoingRequest, Scheme};
use wasip2::io::streams::StreamError;

/// Largest body read, bytes; the rest is not downloaded.
const MAX_BODY: usize = 5 << 20;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PageInput {
    /// The page's URL, `http://` or `https://`.
    url: String,
    /// At most this many characters of text are returned (default 20000).
    #[schemars(range(min = 100, max = 500000))]
    max_chars: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
struct Page {
    /// The URL fetched.
    url: String,
    /// HTTP status code.
    status: u16,
    /// The `content-type` header, if any.
    content_type: Option<String>,
    /// The `<title>` of an HTML page.
    title: Option<String>,
    /// Readable text: scripts, styles and markup removed, blocks on their own lines.
    text: String,
    /// Whether `text` was cut at `max_chars`.
    truncated: bool,
    /// Links of the page, resolved against its URL (at most 200).
    links: Vec<html::Link>,
}

/// Fetch a web page and return its readable text and links.
fn page(input: PageInput) -> Result<Json<Page>, ToolError> {
    let url = url::Url::parse(&input.url)
        .map_err(|e| ToolError::invalid_input(format!("`url` is not a URL: {e}")))?;
    let scheme = match url.scheme() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => {
            return Err(ToolError::invalid_input(format!(
                "`url` must be http or https, not {other}"
            )));
        }
    };
    let host_part = url
        .host_str()
        .ok_or_else(|| ToolError::invalid_input("`url` has no host"))?;
    let authority = match url.port() {
        Some(port) => format!("{host_part}:{port}"),
        None => host_part.to_owned(),
    };
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };

    host::progress(&format!("GET {url}"), None, None);
    let (status, content_type, body) = get(scheme, &authority, &path)?;
    let body = String::from_utf8_lossy(&body);
    let is_html = content_type
        .as_deref()
        .is_none_or(|t| t.contains("html") || t.contains("xml"));
    let (title, text, links) = if is_html {
        let doc = html::extract(&body, &url);
        (doc.title, doc.text, doc.links)
    } else {
        (None, body.into_owned(), Vec::new())
    };
    let max = input.max_chars.unwrap_or(20_000);
    let truncated = text.chars().count() > max;
    let text = if truncated {
        text.chars().take(max).collect()
    } else {
        text
    };
    Ok(Json(Page {
        url: url.to_string(),
        status,
        content_type,
        title,
        text,
        truncated,
        links,
    }))
}

/// One GET; the status, content type and (at most [`MAX_BODY`] bytes of) body.
fn get(
    scheme: Scheme,
    authority: &str,
    path: &str,
) -> Result<(u16, Option<String>, Vec<u8>), ToolError> {
    let headers =
        Fields::from_list(&[("user-agent".to_owned(), b"toolhost-fetch/0.1".to_vec())])
            .map_err(|e| ToolError::failed(format!("cannot build the request headers: {e:?}")))?;
    let request = OutgoingRequest::new(headers);
    let bad = |what: &str| ToolError::invalid_input(format!("cannot use this URL's {what}"));
    request
        .set_method(&Method::Get)
        .map_err(|()| bad("method"))?;
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| bad("scheme"))?;
    request
        .set_authority(Some(authority))
        .map_err(|()| bad("host"))?;
    request
        .set_path_with_query(Some(path))
        .map_err(|()| bad("path"))?;

    let pending = outgoing_handler::handle(request, None).map_err(http_error)?;
    let response = loop {
        match pending.get() {
            Some(Ok(Ok(response))) => break response,
            Some(Ok(Err(e))) => return Err(http_error(e)),
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
    while bytes.len() < MAX_BODY {
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
    bytes.truncate(MAX_BODY);
    Ok((status, content_type, bytes))
}

/// A wasi:http error as the agent should read it.
fn http_error(e: ErrorCode) -> ToolError {
    match e {
        ErrorCode::HttpRequestDenied => ToolError::failed(
            "HTTP request denied: this host is not in the fetch plugin's allow-list \
             (the manifest's [http] allow)",
        ),
        ErrorCode::DnsError(_) => ToolError::failed("the host name could not be resolved"),
        ErrorCode::ConnectionRefused => ToolError::failed("the connection was refused"),
        other => ToolError::failed(format!("the request failed: {other:?}")),
    }
}

toolhost_sdk::toolkit! {
    page: "Fetch a web page over HTTP(S) and return its readable text (scripts, styles and markup removed) and its links, resolved to absolute URLs.",
}
