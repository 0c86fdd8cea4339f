//! The shipped `web` plugin (`web_search`, `web_extractor`) over the real
//! binary. No search provider can be reached from here: each adapter is
//! tested against a server on 127.0.0.1, started by the test, that answers in
//! that provider's documented format and records what it was asked (method,
//! path, headers, body). The keys are injected by the host (`[[http.auth]]`)
//! and must reach the fake provider while never showing in an answer, an
//! error or the server's log. Nothing but 127.0.0.1 is contacted.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_e2e::fake::{Answer, Fake, ok};
use toolhost_e2e::{PluginsDir, Server, component, kind};

/// A `web` plugin manifest: `config` lines, the allow-list and `auth` tables.
fn manifest(config: &str, allow: &[String], auth: &str) -> String {
    format!(
        "description = \"web\"\n[limits]\nfuel = 20_000_000_000\nmemory_mb = 256\ntimeout_ms = 20000\n\
         [workspace]\naccess = \"read-write\"\n[config]\n{config}\n[http]\nallow = {allow:?}\n\
         methods = [\"GET\", \"POST\"]\n{auth}\n"
    )
}

fn web_wasm() -> Vec<u8> {
    std::fs::read(component("web").0).unwrap()
}

fn allow(fake: &Fake) -> Vec<String> {
    vec![format!("127.0.0.1:{}", fake.port)]
}

/// The fake answer of each provider, in its documented format, with two
/// results: `alpha` (with a date) and `beta`.
fn provider_answer(provider: &str) -> Value {
    match provider {
        "searxng" => json!({"query": "q", "number_of_results": 2, "results": [
            {"title": "Alpha", "url": "https://alpha.example/", "content": "About alpha.", "engine": "e",
             "publishedDate": "2024-01-02T00:00:00"},
            {"title": "Beta", "url": "https://beta.example/", "content": "About beta.", "engine": "e"}],
            "answers": [], "suggestions": []}),
        "brave" => {
            json!({"type": "search", "query": {"original": "q"}, "web": {"type": "search", "results": [
            {"title": "Alpha", "url": "https://alpha.example/", "description": "About <strong>alpha</strong>.",
             "page_age": "2024-01-02T00:00:00"},
            {"title": "Beta", "url": "https://beta.example/", "description": "About beta."}]}})
        }
        "bing" => {
            json!({"_type": "SearchResponse", "queryContext": {"originalQuery": "q"}, "webPages": {
            "totalEstimatedMatches": 2, "value": [
            {"id": "1", "name": "Alpha", "url": "https://alpha.example/", "snippet": "About alpha.",
             "datePublished": "2024-01-02T00:00:00"},
            {"id": "2", "name": "Beta", "url": "https://beta.example/", "snippet": "About beta."}]}})
        }
        "tavily" => {
            json!({"query": "q", "answer": null, "images": [], "response_time": 0.5, "results": [
            {"title": "Alpha", "url": "https://alpha.example/", "content": "About alpha.", "score": 0.9,
             "published_date": "2024-01-02T00:00:00"},
            {"title": "Beta", "url": "https://beta.example/", "content": "About beta.", "score": 0.5}]})
        }
        "serper" => json!({"searchParameters": {"q": "q", "type": "search"}, "organic": [
            {"title": "Alpha", "link": "https://alpha.example/", "snippet": "About alpha.", "position": 1,
             "date": "2024-01-02T00:00:00"},
            {"title": "Beta", "link": "https://beta.example/", "snippet": "About beta.", "position": 2}]}),
        other => panic!("no fake for {other}"),
    }
}

/// Provider, the path its endpoint has, its `[[http.auth]]` (kind, header
/// name) and the header the fake must see with the key.
const PROVIDERS: [(&str, &str, &str, &str); 5] = [
    ("searxng", "/search", "", ""),
    (
        "brave",
        "/res/v1/web/search",
        "kind = \"header\"\nname = \"X-Subscription-Token\"",
        "x-subscription-token",
    ),
    (
        "bing",
        "/v7.0/search",
        "kind = \"header\"\nname = \"Ocp-Apim-Subscription-Key\"",
        "ocp-apim-subscription-key",
    ),
    ("tavily", "/search", "kind = \"bearer\"", "authorization"),
    (
        "serper",
        "/search",
        "kind = \"header\"\nname = \"X-API-KEY\"",
        "x-api-key",
    ),
];

fn secret(provider: &str) -> String {
    format!("sk-{provider}-0f9e8d7c6b5a-SECRET")
}

#[test]
fn each_provider_answers_in_one_shape_with_its_key_injected_by_the_host() {
    let mut dir = PluginsDir::new();
    let mut fakes = Vec::new();
    for (provider, path, auth, _) in PROVIDERS {
        let answer = provider_answer(provider).to_string();
        let fake = Fake::start(move |_| ok("application/json", answer.clone()));
        let auth = if auth.is_empty() {
            String::new()
        } else {
            format!(
                "[[http.auth]]\nhost = \"127.0.0.1:{}\"\n{auth}\nsecret = \"{}_KEY\"\n",
                fake.port,
                provider.to_uppercase()
            )
        };
        let config = format!(
            "provider = \"{provider}\"\nendpoint = \"{}\"\n",
            fake.url(path)
        );
        dir = dir.write(&format!("{provider}.wasm"), web_wasm()).write(
            &format!("{provider}.toml"),
            manifest(&config, &allow(&fake), &auth),
        );
        fakes.push(fake);
    }
    // Keys from the config's [secrets] and from the environment alike.
    let config = format!(
        "[secrets]\nBRAVE_KEY = \"{}\"\nBING_KEY = \"{}\"\n",
        secret("brave"),
        secret("bing")
    );
    let (tavily, serper) = (secret("tavily"), secret("serper"));
    let s = Server::start_env(
        dir,
        Some(&config),
        &[
            ("TOOLHOST_SECRET_TAVILY_KEY", &tavily),
            ("TOOLHOST_SECRET_SERPER_KEY", &serper),
        ],
    )
    .unwrap();

    let mut shapes = Vec::new();
    for ((provider, path, _, header), fake) in PROVIDERS.iter().zip(&fakes) {
        let (status, out) = s.invoke(
            &format!("{provider}_search"),
            json!({"query": "tidal mills & tides", "max_results": 5}),
        );
        assert_eq!(status, 200, "{provider}: {out}\n{}", s.log());
        let r = &out["result"];
        assert_eq!(r["provider"], *provider);
        assert_eq!(r["query"], "tidal mills & tides");
        assert_eq!(r["cached"], false);
        assert_eq!(
            r["results"],
            json!([
                {"title": "Alpha", "url": "https://alpha.example/", "snippet": "About alpha.",
                 "published": "2024-01-02T00:00:00"},
                {"title": "Beta", "url": "https://beta.example/", "snippet": "About beta."}
            ]),
            "{provider}"
        );
        let mut keys: Vec<String> = r.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        shapes.push(keys);

        // What the provider was asked, as its API documents it.
        let seen = fake.seen();
        assert_eq!(seen.len(), 1, "{provider}");
        let req = &seen[0];
        match *provider {
            "searxng" | "brave" | "bing" => {
                assert_eq!(req.method, "GET", "{provider}");
                assert!(
                    req.target
                        .starts_with(&format!("{path}?q=tidal+mills+%26+tides")),
                    "{req:?}"
                );
                if *provider == "searxng" {
                    assert!(req.target.contains("format=json"), "{req:?}");
                } else {
                    assert!(req.target.contains("count=5"), "{req:?}");
                }
            }
            _ => {
                assert_eq!((req.method.as_str(), req.target.as_str()), ("POST", *path));
                let body: Value = serde_json::from_slice(&req.body).unwrap();
                let (q, n) = if *provider == "tavily" {
                    ("query", "max_results")
                } else {
                    ("q", "num")
                };
                assert_eq!(body[q], "tidal mills & tides", "{body}");
                assert_eq!(body[n], 5, "{body}");
                assert_eq!(req.header("content-type"), Some("application/json"));
            }
        }
        // The key arrived, in the provider's header, put there by the host.
        if header.is_empty() {
            assert!(
                !req.headers.iter().any(|(_, v)| v.contains("SECRET")),
                "{req:?}"
            );
        } else {
            let expected = if *provider == "tavily" {
                format!("Bearer {}", secret(provider))
            } else {
                secret(provider)
            };
            assert_eq!(req.header(header), Some(expected.as_str()), "{provider}");
        }
        assert!(!out.to_string().contains("SECRET"), "{out}");
    }
    assert!(
        shapes.windows(2).all(|w| w[0] == w[1]),
        "one result shape: {shapes:?}"
    );

    // The agent cannot read the keys: not in the tools' descriptions, not in
    // an error, not in the log.
    let (_, tools) = s.get("/tools?include=all");
    let (_, plugins) = s.get("/plugins");
    let (_, out) = s.invoke("brave_search", json!({"query": ""}));
    assert_eq!(kind(&out), "invalid_input", "{out}");
    for text in [
        tools.to_string(),
        plugins.to_string(),
        out.to_string(),
        s.log(),
    ] {
        assert!(!text.contains("SECRET"), "a key leaked: {text}");
    }
}

#[test]
fn a_missing_secret_or_a_bad_auth_table_keeps_the_plugin_from_loading() {
    let fake = Fake::start(|_| ok("application/json", "{}"));
    let auth = |body: &str| {
        format!(
            "[[http.auth]]\nhost = \"127.0.0.1:{}\"\n{body}\n",
            fake.port
        )
    };
    let config = format!(
        "provider = \"brave\"\nendpoint = \"{}\"",
        fake.url("/res/v1/web/search")
    );
    let dir = PluginsDir::new()
        .write("nokey.wasm", web_wasm())
        .write(
            "nokey.toml",
            manifest(
                &config,
                &allow(&fake),
                &auth("kind = \"header\"\nname = \"X-Subscription-Token\"\nsecret = \"NOT_SET_ANYWHERE_E2E\""),
            ),
        )
        .write("badkind.wasm", web_wasm())
        .write(
            "badkind.toml",
            manifest(&config, &allow(&fake), &auth("kind = \"cookie\"\nsecret = \"K\"")),
        )
        .write("noname.wasm", web_wasm())
        .write(
            "noname.toml",
            manifest(&config, &allow(&fake), &auth("kind = \"header\"\nsecret = \"K\"")),
        );
    let s = Server::start(dir);
    for (plugin, expected) in [
        ("nokey", "TOOLHOST_SECRET_NOT_SET_ANYWHERE_E2E"),
        ("badkind", "cookie"),
        ("noname", "name"),
    ] {
        let status = s.plugin(plugin).unwrap();
        assert_eq!(status["state"], "failed", "{status}");
        assert!(
            status["error"]
                .as_str()
                .is_some_and(|e| e.contains(expected)),
            "{plugin}: {status}"
        );
    }
    assert!(!s.tool_ids().iter().any(|t| t.ends_with("_search")));
    assert_eq!(fake.hits(), 0);
}

#[test]
fn repeated_queries_come_from_the_sessions_cache_until_the_ttl() {
    let answer = provider_answer("searxng").to_string();
    let fake = Fake::start(move |_| ok("application/json", answer.clone()));
    let config = format!(
        "provider = \"searxng\"\nendpoint = \"{}\"\ncache_ttl_s = \"2\"",
        fake.url("/search")
    );
    let s = Server::start(
        PluginsDir::new()
            .write("web.wasm", web_wasm())
            .write("web.toml", manifest(&config, &allow(&fake), "")),
    );
    let search = |session: &str, query: &str| {
        let (status, out) = s.invoke_in(session, "web_search", json!({"query": query}));
        assert_eq!(status, 200, "{out}\n{}", s.log());
        out["result"].clone()
    };
    let first = search("one", "mills");
    assert_eq!((first["cached"].clone(), fake.hits()), (json!(false), 1));
    let again = search("one", "mills");
    assert_eq!(again["cached"], true, "{again}");
    assert_eq!(again["results"], first["results"]);
    assert_eq!(again["fetched_at"], first["fetched_at"]);
    assert_eq!(fake.hits(), 1, "the provider was asked once");
    // Another query, another session: their own entries.
    assert_eq!(search("one", "tides")["cached"], false);
    assert_eq!(search("two", "mills")["cached"], false);
    assert_eq!(fake.hits(), 3);
    // Past the TTL the query goes to the provider again.
    std::thread::sleep(Duration::from_millis(2100));
    let later = search("one", "mills");
    assert_eq!(later["cached"], false, "{later}");
    assert_eq!(fake.hits(), 4);
    assert_eq!(search("one", "mills")["cached"], true);
    assert_eq!(fake.hits(), 4);
}

const ARTICLE: &str = include_str!("../../../plugins/web/testdata/article.html");

/// A page server: the article, a large article, a binary, redirects.
fn pages(outside: u16) -> Fake {
    Fake::start(move |req| match req.target.as_str() {
        "/article" => ok("text/html; charset=utf-8", ARTICLE),
        "/big" => {
            // A realistic page of ~4 MiB: the article's body many times over.
            let body = ARTICLE.split("<div class=\"story-body\">").nth(1).unwrap();
            let body = body.split("</div>").next().unwrap();
            let page = ARTICLE.replace(body, &body.repeat(1600));
            ok("text/html", page)
        }
        "/huge" => Answer::Stream {
            total: 50 << 20,
            declare: false,
        },
        "/huge-declared" => Answer::Stream {
            total: 50 << 20,
            declare: true,
        },
        "/report.pdf" => ok("application/pdf", b"%PDF-1.7\n%binary\x00\x01".to_vec()),
        "/untyped" => Answer::Full {
            status: 200,
            content_type: "application/octet-stream",
            body: b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec(),
        },
        "/moved" => Answer::Redirect("/article".into()),
        "/away" => Answer::Redirect(format!("http://127.0.0.1:{outside}/article")),
        "/gone" => Answer::Full {
            status: 404,
            content_type: "text/html",
            body: b"<p>not here</p>".to_vec(),
        },
        _ => ok("text/plain", "plain words"),
    })
}

#[test]
fn bad_providers_and_bad_pages_are_each_one_calls_clear_error() {
    let outside = Fake::start(|_| ok("text/html", "<p>outside</p>"));
    let site = pages(outside.port);
    let down = Fake::start(|_| Answer::Full {
        status: 500,
        content_type: "text/html",
        body: b"<h1>Internal Server Error</h1>".to_vec(),
    });
    let junk = Fake::start(|_| ok("application/json", "\u{1}\u{2}garbage{{{ not json"));
    let wrong = Fake::start(|_| ok("application/json", "{\"organic\": \"nope\"}"));
    let search_plugin = |fake: &Fake, provider: &str| {
        manifest(
            &format!(
                "provider = \"{provider}\"\nendpoint = \"{}\"",
                fake.url("/search")
            ),
            &allow(fake),
            "",
        )
    };
    let dir = PluginsDir::new()
        .write("down.wasm", web_wasm())
        .write("down.toml", search_plugin(&down, "searxng"))
        .write("junk.wasm", web_wasm())
        .write("junk.toml", search_plugin(&junk, "brave"))
        .write("wrong.wasm", web_wasm())
        .write("wrong.toml", search_plugin(&wrong, "serper"))
        .write("web.wasm", web_wasm())
        .write(
            "web.toml",
            manifest("max_page_kb = \"5120\"", &allow(&site), ""),
        )
        .write("small.wasm", web_wasm())
        .write(
            "small.toml",
            manifest("max_page_kb = \"64\"", &allow(&site), ""),
        );
    let mut s = Server::start(dir);

    // Good calls run alongside the bad ones, all of them fine.
    let base = s.base.clone();
    let good = std::thread::spawn(move || {
        let client = reqwest::blocking::Client::new();
        (0..10)
            .map(|i| {
                let r = client
                    .post(format!("{base}/tools/web_extractor/invoke"))
                    .json(&json!({"params": {"html": format!("<article><p>Good call number {i}, with enough text to be content.</p></article>")}}))
                    .send()
                    .unwrap();
                r.status().as_u16()
            })
            .collect::<Vec<_>>()
    });

    let error = |tool: &str, params: Value, expected_kind: &str, needles: &[&str]| {
        let started = Instant::now();
        let (status, out) = s.invoke(tool, params.clone());
        let message = out["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(kind(&out), expected_kind, "{tool} {params}: {status} {out}");
        for n in needles {
            assert!(message.contains(n), "{tool} {params}: {message}");
        }
        println!(
            "{tool} {params} -> {status} {message} ({:?})",
            started.elapsed()
        );
    };
    error(
        "down_search",
        json!({"query": "x"}),
        "tool_error",
        &["searxng", "HTTP 500", "Internal Server Error"],
    );
    error(
        "junk_search",
        json!({"query": "x"}),
        "tool_error",
        &["brave", "not JSON", "garbage"],
    );
    error(
        "wrong_search",
        json!({"query": "x"}),
        "tool_error",
        &["serper", "`organic`", "not a list"],
    );
    // A 50 MB page, with and without a declared length: refused at the cap.
    error(
        "web_extractor",
        json!({"url": site.url("/huge")}),
        "invalid_input",
        &["larger than 5120 KiB", "nothing was extracted"],
    );
    error(
        "web_extractor",
        json!({"url": site.url("/huge-declared")}),
        "invalid_input",
        &["larger than 5120 KiB", "52428800 bytes"],
    );
    // Binaries, by their type or by their bytes.
    error(
        "web_extractor",
        json!({"url": site.url("/report.pdf")}),
        "invalid_input",
        &["application/pdf", "not a web page"],
    );
    error(
        "web_extractor",
        json!({"url": site.url("/untyped")}),
        "invalid_input",
        &["image/png", "not a web page"],
    );
    // Outside the allow-list: refused before any connection, redirects too.
    error(
        "web_extractor",
        json!({"url": outside.url("/article")}),
        "tool_error",
        &["HTTP request denied", "allow-list"],
    );
    error(
        "web_extractor",
        json!({"url": site.url("/away")}),
        "tool_error",
        &["HTTP request denied"],
    );
    error(
        "web_extractor",
        json!({"url": "https://example.com/"}),
        "tool_error",
        &["HTTP request denied"],
    );
    assert_eq!(outside.hits(), 0, "a host off the list is never contacted");
    // Other bad input.
    error(
        "web_extractor",
        json!({"url": site.url("/gone")}),
        "tool_error",
        &["HTTP 404"],
    );
    error(
        "web_extractor",
        json!({"url": "file:///etc/passwd"}),
        "invalid_input",
        &["http(s) URL"],
    );
    error(
        "web_extractor",
        json!({}),
        "invalid_input",
        &["`url` or `html`"],
    );
    error(
        "web_extractor",
        json!({"url": site.url("/article"), "html": "<p>x</p>"}),
        "invalid_input",
        &["not both"],
    );
    error(
        "small_extractor",
        json!({"html": "x".repeat(65 << 10)}),
        "invalid_input",
        &["66560 bytes", "limit is 65536"],
    );
    error(
        "small_extractor",
        json!({"url": site.url("/big")}),
        "invalid_input",
        &["larger than 64 KiB"],
    );

    assert_eq!(good.join().unwrap(), vec![200; 10]);
    // The server lives on and serves a good call of the same plugins.
    assert!(s.is_alive());
    let (status, out) = s.invoke("web_extractor", json!({"url": site.url("/moved")}));
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["result"]["url"], site.url("/article"));
    assert_eq!(out["result"]["title"], "How Tidal Mills Kept Turning");
}

#[test]
fn the_main_content_of_an_article_comes_back_as_markdown() {
    let site = pages(1);
    let s = Server::start(
        PluginsDir::new()
            .write("web.wasm", web_wasm())
            .write("web.toml", manifest("", &allow(&site), "")),
    );
    let (status, out) = s.invoke("web_extractor", json!({"url": site.url("/article")}));
    assert_eq!(status, 200, "{out}\n{}", s.log());
    let r = &out["result"];
    let md = r["markdown"].as_str().unwrap();
    for kept in [
        "# How Tidal Mills Kept Turning",
        "For eight hundred years, millers on the estuary ground their grain",
        "## What the ledgers say",
        "| 1921 | 4,050 | 9 |",
        "```python",
        "paid his rent in eels and wheat.",
    ] {
        assert!(md.contains(kept), "missing {kept:?}:\n{md}");
    }
    for gone in [
        "cookies",
        "Most read",
        "Related stories",
        "Comments (42)",
        "All rights reserved",
        "Subscribe",
    ] {
        assert!(!md.contains(gone), "boilerplate {gone:?} kept:\n{md}");
    }
    assert_eq!(r["title"], "How Tidal Mills Kept Turning");
    assert_eq!(r["byline"], "Morwenna Pascoe");
    assert_eq!(r["lang"], "en-GB");
    assert_eq!(r["content_type"], "text/html");
    assert_eq!(r["truncated"], false);
    let image = site.url("/images/mill-pond.jpg");
    assert_eq!(r["images"][0]["src"], image.as_str());
    assert!(
        r["links"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["href"] == "https://mills.example.org/restoration")
    );

    // Paging: the same Markdown in parts, each saying where the next starts.
    let total = r["total_chars"].as_u64().unwrap() as usize;
    let mut whole = String::new();
    let mut offset = Some(0);
    while let Some(at) = offset {
        let (_, out) = s.invoke(
            "web_extractor",
            json!({"url": site.url("/article"), "offset": at, "max_chars": 1000}),
        );
        let r = &out["result"];
        whole.push_str(r["markdown"].as_str().unwrap());
        offset = r["next_offset"].as_u64().map(|n| n as usize);
        assert_eq!(r["truncated"], offset.is_some());
    }
    assert_eq!((whole.as_str(), whole.chars().count()), (md, total));

    // HTML given inline, links resolved against base_url.
    let (status, out) = s.invoke(
        "web_extractor",
        json!({"html": ARTICLE, "base_url": "https://gazette.example/x/y"}),
    );
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        out["result"]["images"][0]["src"],
        "https://gazette.example/images/mill-pond.jpg"
    );

    // A large realistic page (~4 MiB): what extracting it costs.
    let started = Instant::now();
    let (status, out) = s.invoke(
        "web_extractor",
        json!({"url": site.url("/big"), "max_chars": 2000}),
    );
    assert_eq!(status, 200, "{}", s.log());
    let r = &out["result"];
    assert!(r["total_chars"].as_u64().unwrap() > 3_000_000, "{r}");
    assert_eq!(r["truncated"], true);
    println!(
        "large page: {} chars of Markdown, fuel {}, server {} ms, wall {:?}",
        r["total_chars"],
        out["fuel"],
        out["elapsed_ms"],
        started.elapsed()
    );
    let (_, tool) = s.get("/tools/web_extractor");
    println!("usage: {}", tool["stats"]);
}
