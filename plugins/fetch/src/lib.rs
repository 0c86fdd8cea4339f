//! `fetch`: a web page as an agent wants it, readable text plus links.
//!
//! The request goes out through `wasi:http/outgoing-handler` (the SDK's
//! `http::get`); the host checks it against this plugin's manifest (`[http] allow`) before any connection
//! is made, so the plugin reaches exactly the hosts its operator listed. A
//! refused request is an error the agent reads (`HTTP-request-denied`).

mod html;

use serde::Serialize;
use toolhost_sdk::{Deserialize, Json, JsonSchema, ToolError, host, http};

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
    let url = http::parse_url(&input.url)?;
    host::progress(&format!("GET {url}"), None, None);
    let response = http::get(&url, "toolhost-fetch/0.1", MAX_BODY, "fetch")?;
    let body = String::from_utf8_lossy(&response.body);
    let is_html = response
        .content_type
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
        status: response.status,
        content_type: response.content_type,
        title,
        text,
        truncated,
        links,
    }))
}

toolhost_sdk::toolkit! {
    page: "Fetch a web page over HTTP(S) and return its readable text (scripts, styles and markup removed) and its links, resolved to absolute URLs.",
}
