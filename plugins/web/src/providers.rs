//! The search providers: how each one is asked (method, URL, body) and how
//! its documented answer becomes the one result shape every provider shares.
//!
//! Keys are not handled here: the operator names them in the manifest's
//! `[[http.auth]]` and the host adds them to the request.
//!
//! Answer formats, from each provider's documentation:
//! - SearXNG: the Search API, `GET /search?q=..&format=json` (docs.searxng.org,
//!   "Search API"): `results[]` with `title`, `url`, `content`,
//!   `publishedDate`.
//! - Brave: Web Search API, `GET /res/v1/web/search?q=..&count=..` with the
//!   `X-Subscription-Token` header (api-dashboard.search.brave.com/docs,
//!   `WebSearchApiResponse`): `web.results[]` with `title`, `url`,
//!   `description`, `page_age` / `age`.
//! - Bing: Web Search API v7, `GET /v7.0/search?q=..&count=..` with the
//!   `Ocp-Apim-Subscription-Key` header (learn.microsoft.com, "Web Search API
//!   v7 reference"): `webPages.value[]` with `name`, `url`, `snippet`,
//!   `datePublished` / `dateLastCrawled`.
//! - Tavily: `POST /search` with a JSON body `{query, max_results}` and
//!   `Authorization: Bearer` (docs.tavily.com, "Search"): `results[]` with
//!   `title`, `url`, `content`, `published_date`.
//! - Serper: `POST /search` with a JSON body `{q, num}` and the `X-API-KEY`
//!   header (serper.dev's API, `google.serper.dev/search`): `organic[]` with
//!   `title`, `link`, `snippet`, `date`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use url::Url;

/// Longest snippet kept, characters.
const MAX_SNIPPET: usize = 1000;

/// One search result, the same whatever the provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Hit {
    /// The page's title.
    pub title: String,
    /// The page's URL.
    pub url: String,
    /// What the provider says about the page (plain text).
    pub snippet: String,
    /// When the page was published, as the provider writes it, if it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Searxng,
    Brave,
    Bing,
    Tavily,
    Serper,
}

/// What to send to a provider.
#[derive(Debug, PartialEq)]
pub struct Ask {
    pub method: &'static str,
    pub url: Url,
    pub body: Option<Vec<u8>>,
}

impl Provider {
    pub const ALL: [Provider; 5] = [
        Provider::Searxng,
        Provider::Brave,
        Provider::Bing,
        Provider::Tavily,
        Provider::Serper,
    ];

    pub fn parse(name: &str) -> Result<Provider, String> {
        Provider::ALL
            .into_iter()
            .find(|p| p.name() == name.trim().to_ascii_lowercase())
            .ok_or_else(|| {
                format!(
                    "unknown search provider `{name}` in the manifest's [config] provider: \
                     searxng, brave, bing, tavily or serper"
                )
            })
    }

    pub fn name(self) -> &'static str {
        match self {
            Provider::Searxng => "searxng",
            Provider::Brave => "brave",
            Provider::Bing => "bing",
            Provider::Tavily => "tavily",
            Provider::Serper => "serper",
        }
    }

    /// The public endpoint; SearXNG has none (each operator runs one).
    pub fn default_endpoint(self) -> Option<&'static str> {
        match self {
            Provider::Searxng => None,
            Provider::Brave => Some("https://api.search.brave.com/res/v1/web/search"),
            Provider::Bing => Some("https://api.bing.microsoft.com/v7.0/search"),
            Provider::Tavily => Some("https://api.tavily.com/search"),
            Provider::Serper => Some("https://google.serper.dev/search"),
        }
    }

    /// The request for `query`, at most `count` results, to `endpoint`.
    pub fn ask(self, endpoint: &Url, query: &str, count: usize) -> Ask {
        let mut url = endpoint.clone();
        let get = |mut url: Url, pairs: &[(&str, &str)]| {
            url.query_pairs_mut().extend_pairs(pairs);
            Ask {
                method: "GET",
                url,
                body: None,
            }
        };
        let n = count.to_string();
        match self {
            Provider::Searxng => get(url, &[("q", query), ("format", "json")]),
            Provider::Brave => get(url, &[("q", query), ("count", &n)]),
            Provider::Bing => get(url, &[("q", query), ("count", &n), ("textFormat", "Raw")]),
            Provider::Tavily | Provider::Serper => {
                let body = if self == Provider::Tavily {
                    json!({"query": query, "max_results": count})
                } else {
                    json!({"q": query, "num": count})
                };
                url.set_fragment(None);
                Ask {
                    method: "POST",
                    url,
                    body: Some(body.to_string().into_bytes()),
                }
            }
        }
    }

    /// Where the results are in the answer, and the names of their fields:
    /// (path, title, url, snippet, published dates in order of preference).
    fn layout(
        self,
    ) -> (
        &'static [&'static str],
        &'static str,
        &'static str,
        &'static str,
        &'static [&'static str],
    ) {
        match self {
            Provider::Searxng => (&["results"], "title", "url", "content", &["publishedDate"]),
            Provider::Brave => (
                &["web", "results"],
                "title",
                "url",
                "description",
                &["page_age", "age"],
            ),
            Provider::Bing => (
                &["webPages", "value"],
                "name",
                "url",
                "snippet",
                &["datePublished", "dateLastCrawled"],
            ),
            Provider::Tavily => (&["results"], "title", "url", "content", &["published_date"]),
            Provider::Serper => (&["organic"], "title", "link", "snippet", &["date"]),
        }
    }

    /// The results of a 2xx answer `body`, at most `count`; an error says
    /// what is wrong with the answer.
    pub fn parse_answer(self, body: &[u8], count: usize) -> Result<Vec<Hit>, String> {
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            format!(
                "the answer is not JSON ({e}); it starts: {}",
                toolhost_sdk::http::excerpt(body, 120)
            )
        })?;
        let (path, title, url, snippet, dates) = self.layout();
        let Some(at) = path.iter().try_fold(&value, |v, key| v.get(key)) else {
            // Brave and Bing leave the web results out when there are none.
            let empty = match self {
                Provider::Brave => value.get("type") == Some(&json!("search")),
                Provider::Bing => value.get("_type") == Some(&json!("SearchResponse")),
                _ => false,
            };
            return if empty {
                Ok(Vec::new())
            } else {
                Err(format!("the answer has no `{}`", path.join(".")))
            };
        };
        let items = at
            .as_array()
            .ok_or_else(|| format!("`{}` in the answer is not a list", path.join(".")))?;
        let text = |item: &Value, key: &str| {
            item.get(key)
                .and_then(Value::as_str)
                .map(|s| clean(s, MAX_SNIPPET))
                .unwrap_or_default()
        };
        Ok(items
            .iter()
            .filter_map(|item| {
                let link = text(item, url);
                if link.is_empty() {
                    return None;
                }
                Some(Hit {
                    title: text(item, title),
                    url: link,
                    snippet: text(item, snippet),
                    published: dates.iter().map(|d| text(item, d)).find(|d| !d.is_empty()),
                })
            })
            .take(count)
            .collect())
    }
}

/// Whitespace collapsed, tags a provider leaves in (`<strong>`) removed, at
/// most `max` characters.
fn clean(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(lt) = rest.find('<') {
        out.push_str(&rest[..lt]);
        let tag = &rest[lt..];
        match tag.find('>') {
            Some(gt)
                if tag[1..gt]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '/') =>
            {
                rest = &tag[gt + 1..];
            }
            _ => {
                out.push('<');
                rest = &tag[1..];
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(max)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(p: Provider) -> Url {
        Url::parse(
            p.default_endpoint()
                .unwrap_or("http://127.0.0.1:8888/search"),
        )
        .unwrap()
    }

    #[test]
    fn requests_follow_each_providers_api() {
        let ask = Provider::Searxng.ask(&endpoint(Provider::Searxng), "rust & wasm", 5);
        assert_eq!(
            (ask.method, ask.url.as_str()),
            (
                "GET",
                "http://127.0.0.1:8888/search?q=rust+%26+wasm&format=json"
            )
        );
        let ask = Provider::Brave.ask(&endpoint(Provider::Brave), "q", 7);
        assert_eq!(
            ask.url.as_str(),
            "https://api.search.brave.com/res/v1/web/search?q=q&count=7"
        );
        let ask = Provider::Bing.ask(&endpoint(Provider::Bing), "q", 3);
        assert_eq!(
            ask.url.as_str(),
            "https://api.bing.microsoft.com/v7.0/search?q=q&count=3&textFormat=Raw"
        );
        let ask = Provider::Tavily.ask(&endpoint(Provider::Tavily), "q", 4);
        assert_eq!(
            (ask.method, ask.url.as_str()),
            ("POST", "https://api.tavily.com/search")
        );
        let body: Value = serde_json::from_slice(&ask.body.unwrap()).unwrap();
        assert_eq!(body, json!({"query": "q", "max_results": 4}));
        let ask = Provider::Serper.ask(&endpoint(Provider::Serper), "q", 2);
        let body: Value = serde_json::from_slice(&ask.body.unwrap()).unwrap();
        assert_eq!(body, json!({"q": "q", "num": 2}));
        assert!(Provider::parse("Brave").is_ok());
        assert!(
            Provider::parse("google")
                .unwrap_err()
                .contains("searxng, brave")
        );
    }

    #[test]
    fn every_answer_format_gives_the_same_shape() {
        let hit = |t: &str, u: &str, s: &str, p: Option<&str>| Hit {
            title: t.into(),
            url: u.into(),
            snippet: s.into(),
            published: p.map(Into::into),
        };
        let cases = [
            (
                Provider::Searxng,
                json!({"query": "q", "number_of_results": 0, "results": [
                    {"url": "https://a.example/", "title": "A", "content": "about  a", "engine": "x",
                     "publishedDate": "2024-01-02T00:00:00"},
                    {"title": "no url"}]}),
                vec![hit(
                    "A",
                    "https://a.example/",
                    "about a",
                    Some("2024-01-02T00:00:00"),
                )],
            ),
            (
                Provider::Brave,
                json!({"type": "search", "web": {"type": "search", "results": [
                    {"title": "B", "url": "https://b.example/", "description": "<strong>bold</strong> b",
                     "age": "2 days ago", "page_age": "2024-05-01T00:00:00"}]}}),
                vec![hit(
                    "B",
                    "https://b.example/",
                    "bold b",
                    Some("2024-05-01T00:00:00"),
                )],
            ),
            (
                Provider::Bing,
                json!({"_type": "SearchResponse", "webPages": {"value": [
                    {"name": "C", "url": "https://c.example/", "snippet": "c",
                     "dateLastCrawled": "2024-06-01T00:00:00.0000000Z"}]}}),
                vec![hit(
                    "C",
                    "https://c.example/",
                    "c",
                    Some("2024-06-01T00:00:00.0000000Z"),
                )],
            ),
            (
                Provider::Tavily,
                json!({"query": "q", "results": [
                    {"title": "D", "url": "https://d.example/", "content": "d", "score": 0.9}]}),
                vec![hit("D", "https://d.example/", "d", None)],
            ),
            (
                Provider::Serper,
                json!({"searchParameters": {"q": "q"}, "organic": [
                    {"title": "E", "link": "https://e.example/", "snippet": "e", "position": 1}]}),
                vec![hit("E", "https://e.example/", "e", None)],
            ),
        ];
        for (provider, answer, expected) in cases {
            let got = provider
                .parse_answer(answer.to_string().as_bytes(), 10)
                .unwrap();
            assert_eq!(got, expected, "{provider:?}");
        }
        // No web results at all: an empty list, not an error.
        assert_eq!(
            Provider::Brave.parse_answer(b"{\"type\":\"search\"}", 10),
            Ok(vec![])
        );
        assert_eq!(
            Provider::Bing.parse_answer(b"{\"_type\":\"SearchResponse\"}", 10),
            Ok(vec![])
        );
    }

    #[test]
    fn garbage_answers_are_clear_errors() {
        let err = Provider::Searxng
            .parse_answer(b"<html>oops</html>", 10)
            .unwrap_err();
        assert!(
            err.contains("not JSON") && err.contains("<html>oops"),
            "{err}"
        );
        let err = Provider::Serper
            .parse_answer(b"{\"organic\": 3}", 10)
            .unwrap_err();
        assert!(
            err.contains("`organic`") && err.contains("not a list"),
            "{err}"
        );
        let err = Provider::Tavily
            .parse_answer(b"{\"detail\": \"x\"}", 10)
            .unwrap_err();
        assert!(err.contains("no `results`"), "{err}");
        let err = Provider::Brave.parse_answer(b"[1,2]", 10).unwrap_err();
        assert!(err.contains("web.results"), "{err}");
        assert!(Provider::Searxng.parse_answer(b"", 10).is_err());
    }

    #[test]
    fn results_are_capped_and_cleaned() {
        let many: Vec<Value> = (0..30)
            .map(|i| json!({"title": format!("t{i}"), "url": format!("https://x/{i}"), "content": "<b>a</b> < b"}))
            .collect();
        let got = Provider::Searxng
            .parse_answer(json!({"results": many}).to_string().as_bytes(), 5)
            .unwrap();
        assert_eq!(got.len(), 5);
        assert_eq!(got[0].snippet, "a < b");
        assert_eq!(clean(&"x".repeat(2000), MAX_SNIPPET).len(), MAX_SNIPPET);
    }
}
