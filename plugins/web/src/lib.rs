//! `web`: web search through a provider the operator configures, and a web
//! page's main content as Markdown. Tools (seen by agents as `web_<name>`):
//!
//! - `search {query, max_results?}`: `{query, provider, results: [{title,
//!   url, snippet, published?}], cached, fetched_at}`, the same shape for
//!   SearXNG, Brave, Bing, Tavily and Serper ([`providers`]); answers are
//!   cached per session for `cache_ttl_s` ([`cache`]).
//! - `extractor {url | html, base_url?, offset?, max_chars?}`: `{title,
//!   byline, lang, markdown, links, images, ...}`, readability-style
//!   ([`extract`]); long Markdown comes in pages (`next_offset`).
//!
//! Untrusted bytes (provider answers, pages) are parsed here, inside the
//! sandbox. The host enforces the manifest's `[http] allow` on every request
//! and adds the provider's key (`[[http.auth]]`): this code never sees it.
//!
//! `[config]` keys: `provider` (searxng | brave | bing | tavily | serper),
//! `endpoint` (the provider's search URL; required for searxng),
//! `cache_ttl_s` (3600; 0: no cache), `max_results` (10, at most 50),
//! `max_page_kb` (5120: the largest page or `html` read).

pub mod cache;
pub mod content;
pub mod extract;
pub mod markdown;
pub mod providers;

use std::path::Path;

use serde::Serialize;
use toolhost_sdk::{Deserialize, Json, JsonSchema, ToolError, host};
use url::Url;

use content::Kind;
use extract::{Image, Link};
use providers::{Hit, Provider};
use toolhost_sdk::http::{self as net, NetError};

/// Where the host mounts the session workspace inside the sandbox.
pub const WORKSPACE: &str = "/workspace";
/// Largest provider answer read, bytes.
const MAX_ANSWER: usize = 4 << 20;
/// Redirects `extractor` follows (each checked by the host again).
const MAX_REDIRECTS: usize = 5;
const USER_AGENT: &str = "toolhost-web/0.1";

fn config_number(key: &str, default: u64, max: u64) -> Result<u64, ToolError> {
    match host::config(key) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(|| {
                ToolError::failed(format!(
                    "the web plugin's manifest [config] {key} = `{v}` is not a number up to {max}"
                ))
            }),
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The search provider and its endpoint, from `[config]`.
fn provider_config() -> Result<(Provider, Url), ToolError> {
    let name = host::config("provider").unwrap_or_else(|| "searxng".into());
    let provider = Provider::parse(&name).map_err(ToolError::failed)?;
    let endpoint = host::config("endpoint")
        .filter(|e| !e.trim().is_empty())
        .or_else(|| provider.default_endpoint().map(str::to_owned))
        .ok_or_else(|| {
            ToolError::failed(format!(
                "search provider `{}` needs its URL: set endpoint in the web plugin's manifest \
                 [config] (e.g. endpoint = \"http://127.0.0.1:8888/search\")",
                provider.name()
            ))
        })?;
    let url = Url::parse(endpoint.trim())
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| {
            ToolError::failed(format!(
                "the web plugin's manifest [config] endpoint `{endpoint}` is not an http(s) URL"
            ))
        })?;
    Ok((provider, url))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchInput {
    /// What to search the web for.
    #[schemars(length(min = 1, max = 400))]
    query: String,
    /// At most this many results (default and ceiling: the operator's
    /// `max_results`, 10 unless configured).
    #[schemars(range(min = 1, max = 50))]
    max_results: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
struct SearchResults {
    /// The query searched.
    query: String,
    /// The provider that answered: searxng, brave, bing, tavily or serper.
    provider: String,
    /// The results, best first.
    results: Vec<Hit>,
    /// Whether the results came from this session's cache.
    cached: bool,
    /// When the provider answered (Unix seconds).
    fetched_at: u64,
}

/// A failed exchange with the provider, for the agent.
fn provider_error(provider: Provider, endpoint: &Url, e: NetError) -> ToolError {
    let name = provider.name();
    let host = endpoint.host_str().unwrap_or_default();
    ToolError::failed(match e {
        NetError::Denied => format!(
            "search provider `{name}`: HTTP request denied: {host} is not in the web plugin's \
             allow-list (the manifest's [http] allow and methods)"
        ),
        NetError::TooLarge { limit, .. } => {
            format!("search provider `{name}` answered more than {limit} bytes")
        }
        NetError::Failed(why) => format!("search provider `{name}` at {host}: {why}"),
    })
}

/// Search the web through the configured provider.
fn search(input: SearchInput) -> Result<Json<SearchResults>, ToolError> {
    let query = input.query.trim().to_owned();
    if query.is_empty() {
        return Err(ToolError::invalid_input("`query` is empty"));
    }
    if query.chars().count() > 400 {
        return Err(ToolError::invalid_input(
            "`query` is longer than 400 characters",
        ));
    }
    let (provider, endpoint) = provider_config()?;
    let ceiling = config_number("max_results", 10, 50)?.max(1) as usize;
    let count = input.max_results.unwrap_or(ceiling).clamp(1, ceiling);
    let ttl = config_number("cache_ttl_s", 3600, 30 * 86_400)?;
    let cache = cache::Cache::new(Path::new(WORKSPACE), ttl);
    let key = cache::key(provider.name(), endpoint.as_str(), count, &query);
    let now = unix_now();
    let answer = |results, cached, fetched_at| {
        Json(SearchResults {
            query: query.clone(),
            provider: provider.name().to_owned(),
            results,
            cached,
            fetched_at,
        })
    };
    if let Some((results, at)) = cache.get(&key, now) {
        return Ok(answer(results, true, at));
    }

    let ask = provider.ask(&endpoint, &query, count);
    let mut headers = vec![
        ("accept", "application/json".to_owned()),
        ("user-agent", USER_AGENT.to_owned()),
    ];
    if ask.body.is_some() {
        headers.push(("content-type", "application/json".to_owned()));
    }
    host::progress(&format!("asking {}", provider.name()), None, None);
    let reply = net::send(&net::Request {
        method: ask.method,
        url: &ask.url,
        headers: &headers,
        body: ask.body.as_deref(),
    })
    .map_err(|e| provider_error(provider, &endpoint, e))?;
    let status = reply.status;
    let body = reply
        .read(MAX_ANSWER)
        .map_err(|e| provider_error(provider, &endpoint, e))?;
    if !(200..300).contains(&status) {
        return Err(ToolError::failed(format!(
            "search provider `{}` answered HTTP {status}: {}",
            provider.name(),
            net::excerpt(&body, 200)
        )));
    }
    let results = provider.parse_answer(&body, count).map_err(|why| {
        ToolError::failed(format!(
            "search provider `{}` answered HTTP {status}, but {why}",
            provider.name()
        ))
    })?;
    if let Err(e) = cache.put(&key, now, &results) {
        host::warn(&format!("the search cache is not written: {e}"));
    }
    Ok(answer(results, false, now))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExtractorInput {
    /// The page to read, `http://` or `https://` (hosts on the operator's
    /// allow-list only). Give `url` or `html`.
    url: Option<String>,
    /// An HTML document to read instead of fetching one.
    html: Option<String>,
    /// With `html`: the URL relative links are resolved against.
    base_url: Option<String>,
    /// Return the Markdown from this character on (the `next_offset` of an
    /// earlier call).
    offset: Option<usize>,
    /// At most this many characters of Markdown (default 20000).
    #[schemars(range(min = 500, max = 200000))]
    max_chars: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
struct Extracted {
    /// The URL read, after redirects (none for `html` input).
    url: Option<String>,
    /// The media type of the page.
    content_type: String,
    /// The page's title.
    title: Option<String>,
    /// The author, when the page names one.
    byline: Option<String>,
    /// The page's language (`<html lang>`).
    lang: Option<String>,
    /// The main content as Markdown, from `offset`, at most `max_chars`.
    markdown: String,
    /// Characters of the whole Markdown.
    total_chars: usize,
    /// Whether more Markdown follows this part.
    truncated: bool,
    /// The `offset` of the next part, when there is one.
    next_offset: Option<usize>,
    /// Links of the main content (at most 200).
    links: Vec<Link>,
    /// How many links the main content has.
    links_total: usize,
    /// Images of the main content (at most 200).
    images: Vec<Image>,
    /// How many images the main content has.
    images_total: usize,
}

/// A page fetched: its final URL, content type and bytes.
struct Fetched {
    url: Url,
    content_type: Option<String>,
    bytes: Vec<u8>,
}

fn fetch_page(start: Url, limit: usize) -> Result<Fetched, ToolError> {
    let mut url = start;
    for _ in 0..=MAX_REDIRECTS {
        let host = url.host_str().unwrap_or_default().to_owned();
        let denied = || {
            ToolError::failed(format!(
                "HTTP request denied: {host} is not in the web plugin's allow-list (the \
                 manifest's [http] allow)"
            ))
        };
        let headers = [
            (
                "accept",
                "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1".to_owned(),
            ),
            ("user-agent", USER_AGENT.to_owned()),
        ];
        host::progress(&format!("GET {url}"), None, None);
        let reply = net::send(&net::Request {
            method: "GET",
            url: &url,
            headers: &headers,
            body: None,
        })
        .map_err(|e| match e {
            NetError::Denied => denied(),
            NetError::TooLarge { .. } | NetError::Failed(_) => {
                ToolError::failed(format!("{url}: {}", describe(&e)))
            }
        })?;
        if let Some(location) = reply.redirect() {
            url = url.join(location).map_err(|_| {
                ToolError::failed(format!("{url} redirects to `{location}`, not a URL"))
            })?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(ToolError::failed(format!(
                    "the page redirects to {url}, not http(s)"
                )));
            }
            continue;
        }
        if !(200..300).contains(&reply.status) {
            return Err(ToolError::failed(format!(
                "{url} answered HTTP {}",
                reply.status
            )));
        }
        let content_type = reply.content_type.clone();
        if let Some(Kind::Binary(t)) = content::declared(content_type.as_deref()) {
            return Err(binary(&url, &t));
        }
        let bytes = reply.read(limit).map_err(|e| match e {
            NetError::TooLarge { declared, .. } => too_large(&url, limit, declared),
            other => ToolError::failed(format!("{url}: {}", describe(&other))),
        })?;
        return Ok(Fetched {
            url,
            content_type,
            bytes,
        });
    }
    Err(ToolError::failed(format!(
        "more than {MAX_REDIRECTS} redirects, the last to {url}"
    )))
}

fn describe(e: &NetError) -> String {
    match e {
        NetError::Denied => "HTTP request denied".into(),
        NetError::TooLarge { limit, .. } => format!("more than {limit} bytes"),
        NetError::Failed(why) => why.clone(),
    }
}

fn binary(url: &Url, media_type: &str) -> ToolError {
    ToolError::invalid_input(format!(
        "{url} is {media_type}, not a web page: web_extractor reads HTML and text only"
    ))
}

fn too_large(url: &Url, limit: usize, declared: Option<u64>) -> ToolError {
    let size = declared.map_or_else(String::new, |n| format!(" ({n} bytes)"));
    ToolError::invalid_input(format!(
        "the page at {url} is larger than {} KiB{size}, the web plugin's limit ([config] \
         max_page_kb); nothing was extracted",
        limit / 1024
    ))
}

/// The main content of a web page (a URL or HTML) as Markdown.
fn extractor(input: ExtractorInput) -> Result<Json<Extracted>, ToolError> {
    let limit = config_number("max_page_kb", 5120, 1 << 20)?.max(1) as usize * 1024;
    let parse_url = |field: &str, raw: &str| {
        Url::parse(raw.trim())
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
            .ok_or_else(|| ToolError::invalid_input(format!("`{field}` is not an http(s) URL")))
    };
    let (url, content_type, text, kind) = match (input.url.as_deref(), input.html) {
        (Some(_), Some(_)) => {
            return Err(ToolError::invalid_input("give `url` or `html`, not both"));
        }
        (None, None) => return Err(ToolError::invalid_input("give `url` or `html`")),
        (None, Some(html)) => {
            if html.len() > limit {
                return Err(ToolError::invalid_input(format!(
                    "`html` is {} bytes; the limit is {limit} ([config] max_page_kb)",
                    html.len()
                )));
            }
            let base = input
                .base_url
                .as_deref()
                .map(|b| parse_url("base_url", b))
                .transpose()?;
            (base, "text/html".to_owned(), html, Kind::Html)
        }
        (Some(raw), None) => {
            let url = parse_url("url", raw)?;
            if let Ok((_, endpoint)) = provider_config()
                && endpoint.host_str() == url.host_str()
                && endpoint.port_or_known_default() == url.port_or_known_default()
            {
                return Err(ToolError::invalid_input(format!(
                    "{} is the search provider's API, not a page: use web_search",
                    url.host_str().unwrap_or_default()
                )));
            }
            let page = fetch_page(url, limit)?;
            let kind = content::classify(page.content_type.as_deref(), &page.bytes);
            if let Kind::Binary(t) = &kind {
                return Err(binary(&page.url, t));
            }
            let text = content::decode(page.content_type.as_deref(), &page.bytes);
            let media = page
                .content_type
                .as_deref()
                .map(content::media_type)
                .unwrap_or_else(|| {
                    if kind == Kind::Html {
                        "text/html"
                    } else {
                        "text/plain"
                    }
                    .to_owned()
                });
            (Some(page.url), media, text, kind)
        }
    };
    host::progress("extracting", None, None);
    let article = if kind == Kind::Html {
        extract::extract(&text, url.as_ref())
    } else {
        extract::Article {
            markdown: text,
            ..Default::default()
        }
    };
    let (markdown, total_chars, next_offset) = page_of(
        &article.markdown,
        input.offset.unwrap_or(0),
        input.max_chars.unwrap_or(20_000),
    );
    Ok(Json(Extracted {
        url: url.map(String::from),
        content_type,
        title: article.title,
        byline: article.byline,
        lang: article.lang,
        markdown,
        total_chars,
        truncated: next_offset.is_some(),
        next_offset,
        links: article.links,
        links_total: article.links_total,
        images: article.images,
        images_total: article.images_total,
    }))
}

/// Characters `offset..offset + max` of `text`, its length in characters,
/// and where the next part starts, if anywhere.
pub fn page_of(text: &str, offset: usize, max: usize) -> (String, usize, Option<usize>) {
    let total = text.chars().count();
    let part: String = text.chars().skip(offset).take(max).collect();
    let end = offset.saturating_add(max);
    (part, total, (end < total).then_some(end))
}

toolhost_sdk::toolkit! {
    search: "Search the web. Returns {query, provider, results: [{title, url, snippet, published?}], cached, fetched_at}; repeated queries within the operator's TTL come from this session's cache (cached: true).",
    extractor: "Read a web page (url, on the operator's allow-list, or html) and return its main content as Markdown (navigation, ads and other boilerplate removed) with its title, byline, language, links and images. Long pages come in parts: call again with offset = next_offset.",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_of_markdown_say_where_the_next_starts() {
        let text = "é".repeat(25);
        assert_eq!(page_of(&text, 0, 10), ("é".repeat(10), 25, Some(10)));
        assert_eq!(page_of(&text, 20, 10), ("é".repeat(5), 25, None));
        assert_eq!(page_of(&text, 10, 15), ("é".repeat(15), 25, None));
        assert_eq!(page_of(&text, 99, 10), (String::new(), 25, None));
    }
}
