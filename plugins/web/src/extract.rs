//! The main content of an HTML page, readability-style: boilerplate
//! (navigation, headers and footers, asides, scripts, forms, and blocks whose
//! class or id says "sidebar", "comments", "share" ...) is dropped; every
//! paragraph-like block scores its ancestors by its text length and commas;
//! each candidate's score is cut by its link density; the best one and
//! those of its siblings that score close to it are the article, rendered as
//! Markdown ([`crate::markdown`]).

use std::collections::{HashMap, HashSet};

use ego_tree::{NodeId, NodeRef};
use schemars::JsonSchema;
use scraper::{Html, Node};
use serde::Serialize;
use url::Url;

/// Most links and images returned.
pub const MAX_ITEMS: usize = 200;

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Link {
    /// The link's text.
    pub text: String,
    /// Its target, absolute when the page's URL is known.
    pub href: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Image {
    /// The image's address, absolute when the page's URL is known.
    pub src: String,
    /// Its alternative text.
    pub alt: String,
}

/// What [`extract`] finds.
#[derive(Debug, Default)]
pub struct Article {
    pub title: Option<String>,
    pub byline: Option<String>,
    pub lang: Option<String>,
    pub markdown: String,
    /// Links (one per target) and images of the main content, at most
    /// [`MAX_ITEMS`] each, and how many there were.
    pub links: Vec<Link>,
    pub links_total: usize,
    pub images: Vec<Image>,
    pub images_total: usize,
}

/// Elements that are never content.
const DROP: &[&str] = &[
    "script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "canvas", "nav",
    "footer", "aside", "form", "button", "input", "select", "textarea", "label", "dialog", "menu",
    "link", "meta", "head", "frameset", "frame",
];
/// Class or id parts that mark boilerplate...
const UNLIKELY: &[&str] = &[
    "comment",
    "sidebar",
    "footer",
    "social",
    "sponsor",
    "cookie",
    "banner",
    "popup",
    "modal",
    "subscribe",
    "newsletter",
    "breadcrumb",
    "pagination",
    "masthead",
    "disqus",
    "related",
    "promo",
    "advert",
    "share",
    "widget",
    "navbar",
    "menu",
    "signup",
    "outbrain",
    "taboola",
];
/// ...and whole tokens that do.
const UNLIKELY_TOKENS: &[&str] = &["ad", "ads", "nav", "tags", "skip", "header", "toolbar"];
/// Class or id parts of content.
const LIKELY: &[&str] = &[
    "article", "content", "entry", "main", "post", "text", "blog", "story", "body", "hentry",
];

fn element(n: NodeRef<'_, Node>) -> Option<&scraper::node::Element> {
    n.value().as_element()
}

fn class_and_id(el: &scraper::node::Element) -> String {
    let mut s = el.attr("class").unwrap_or_default().to_ascii_lowercase();
    s.push(' ');
    s.push_str(&el.attr("id").unwrap_or_default().to_ascii_lowercase());
    s
}

/// +25 for a content-like class or id, -25 for a boilerplate-like one.
fn class_weight(el: &scraper::node::Element) -> f64 {
    let names = class_and_id(el);
    let mut w = 0.0;
    if is_unlikely(&names) {
        w -= 25.0;
    }
    if LIKELY.iter().any(|p| names.contains(p)) {
        w += 25.0;
    }
    w
}

fn is_unlikely(names: &str) -> bool {
    UNLIKELY.iter().any(|p| names.contains(p))
        || names
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|t| UNLIKELY_TOKENS.contains(&t))
}

/// Whether `n` (not under a dropped element) is boilerplate.
fn dropped(n: NodeRef<'_, Node>, in_article: bool) -> bool {
    let Some(el) = element(n) else {
        return matches!(n.value(), Node::Comment(_) | Node::ProcessingInstruction(_));
    };
    let name = el.name();
    if DROP.contains(&name) || (name == "header" && !in_article) {
        return true;
    }
    if el.attr("hidden").is_some()
        || el.attr("aria-hidden") == Some("true")
        || el.attr("style").is_some_and(|s| {
            s.replace(' ', "")
                .to_ascii_lowercase()
                .contains("display:none")
        })
    {
        return true;
    }
    if matches!(
        name,
        "html" | "body" | "article" | "main" | "a" | "table" | "tbody" | "tr" | "td"
    ) {
        return false;
    }
    let names = class_and_id(el);
    is_unlikely(&names) && !LIKELY.iter().any(|p| names.contains(p))
}

/// Text statistics of a subtree, dropped parts left out.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub chars: usize,
    pub link_chars: usize,
    pub commas: usize,
}

impl Stats {
    pub fn link_density(&self) -> f64 {
        if self.chars == 0 {
            0.0
        } else {
            self.link_chars as f64 / self.chars as f64
        }
    }
}

/// The parsed page with what the scoring found: dropped nodes and the
/// statistics of the rest.
pub struct Analysis {
    pub dropped: HashSet<NodeId>,
    pub stats: HashMap<NodeId, Stats>,
}

pub fn analyse(doc: &Html) -> Analysis {
    let mut drop = HashSet::new();
    let mut article_depth: HashSet<NodeId> = HashSet::new();
    let order: Vec<NodeRef<'_, Node>> = doc.tree.root().descendants().collect();
    for &n in &order {
        let parent = n.parent().map(|p| p.id());
        let parent_dropped = parent.is_some_and(|p| drop.contains(&p));
        let in_article = parent.is_some_and(|p| article_depth.contains(&p));
        if element(n).is_some_and(|e| e.name() == "article") || in_article {
            article_depth.insert(n.id());
        }
        if parent_dropped || dropped(n, in_article) {
            drop.insert(n.id());
        }
    }
    let mut stats: HashMap<NodeId, Stats> = HashMap::new();
    for &n in order.iter().rev() {
        if drop.contains(&n.id()) {
            continue;
        }
        let mut s = Stats::default();
        match n.value() {
            Node::Text(t) => {
                s.chars = t.split_whitespace().map(|w| w.chars().count() + 1).sum();
                s.commas = t.matches([',', '，', '、']).count();
            }
            _ => {
                for c in n.children() {
                    if let Some(cs) = stats.get(&c.id()) {
                        s.chars += cs.chars;
                        s.link_chars += cs.link_chars;
                        s.commas += cs.commas;
                    }
                }
                if element(n).is_some_and(|e| e.name() == "a") {
                    s.link_chars = s.chars;
                }
            }
        }
        stats.insert(n.id(), s);
    }
    Analysis {
        dropped: drop,
        stats,
    }
}

const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "dl",
    "div",
    "fieldset",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "ul",
];

/// The elements that make up the main content, in document order.
pub fn main_content<'a>(doc: &'a Html, a: &Analysis) -> Vec<NodeRef<'a, Node>> {
    let mut scores: HashMap<NodeId, f64> = HashMap::new();
    let stat = |n: NodeRef<'_, Node>| a.stats.get(&n.id()).copied().unwrap_or_default();
    for n in doc.tree.root().descendants() {
        let Some(el) = element(n) else { continue };
        if a.dropped.contains(&n.id()) {
            continue;
        }
        let paragraph = match el.name() {
            "p" | "pre" | "td" | "blockquote" | "dd" => true,
            "div" | "section" => !n
                .children()
                .any(|c| element(c).is_some_and(|e| BLOCKS.contains(&e.name()))),
            _ => false,
        };
        let s = stat(n);
        if !paragraph || s.chars < 25 {
            continue;
        }
        let content = 1.0 + s.commas as f64 + (s.chars as f64 / 100.0).floor().min(3.0);
        for (level, ancestor) in n.ancestors().take(3).enumerate() {
            let Some(ael) = element(ancestor) else { break };
            let score = scores.entry(ancestor.id()).or_insert_with(|| {
                let tag = match ael.name() {
                    "div" | "article" | "main" => 5.0,
                    "pre" | "td" | "blockquote" | "section" => 3.0,
                    "address" | "ol" | "ul" | "dl" | "dd" | "dt" | "li" | "form" => -3.0,
                    "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "th" => -5.0,
                    _ => 0.0,
                };
                tag + class_weight(ael)
            });
            *score += match level {
                0 => content,
                1 => content / 2.0,
                _ => content / (level as f64 * 3.0),
            };
        }
    }
    let finals: HashMap<NodeId, f64> = scores
        .iter()
        .map(|(&id, &score)| {
            let density = a.stats.get(&id).map_or(0.0, Stats::link_density);
            (id, score * (1.0 - density))
        })
        .collect();
    let top = doc
        .tree
        .root()
        .descendants()
        .filter_map(|n| finals.get(&n.id()).map(|&s| (n, s)))
        .fold(
            None::<(NodeRef<'_, Node>, f64)>,
            |best, (n, s)| match best {
                Some((_, b)) if b >= s => best,
                _ => Some((n, s)),
            },
        );
    let Some((top, top_score)) = top else {
        // No paragraph anywhere: the article, main or body as a whole.
        let whole = ["article", "main", "body"].iter().find_map(|name| {
            doc.tree
                .root()
                .descendants()
                .find(|n| element(*n).is_some_and(|e| e.name() == *name))
        });
        return whole.into_iter().collect();
    };
    // Inside an `<article>`: the article whole (its heading and figures
    // too; its boilerplate is dropped already).
    if let Some(article) = top
        .ancestors()
        .take(4)
        .find(|n| element(*n).is_some_and(|e| e.name() == "article"))
        && stat(article).link_density() < 0.5
    {
        return vec![article];
    }
    let Some(parent) = top.parent().filter(|p| element(*p).is_some()) else {
        return vec![top];
    };
    let threshold = (top_score * 0.2).max(10.0);
    let top_class = element(top).and_then(|e| e.attr("class"));
    parent
        .children()
        .filter(|&sib| {
            if sib.id() == top.id() {
                return true;
            }
            let Some(el) = element(sib) else { return false };
            if a.dropped.contains(&sib.id()) {
                return false;
            }
            let mut score = finals.get(&sib.id()).copied().unwrap_or(0.0);
            if top_class.is_some() && el.attr("class") == top_class {
                score += top_score * 0.2;
            }
            if score >= threshold {
                return true;
            }
            let s = stat(sib);
            el.name() == "figure"
                || el.name() == "p"
                    && ((s.chars > 80 && s.link_density() < 0.25)
                        || (s.chars > 0 && s.link_density() == 0.0 && has_sentence(sib)))
        })
        .collect()
}

fn has_sentence(n: NodeRef<'_, Node>) -> bool {
    n.descendants()
        .filter_map(|d| d.value().as_text())
        .any(|t| t.contains(". ") || t.trim_end().ends_with('.'))
}

/// Text of a subtree, whitespace collapsed.
pub fn text_of(n: NodeRef<'_, Node>) -> String {
    let mut out = String::new();
    for t in n.descendants().filter_map(|d| d.value().as_text()) {
        for w in t.split_whitespace() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(w);
        }
    }
    out
}

/// The title, byline and language of the page.
fn metadata(doc: &Html) -> (Option<String>, Option<String>, Option<String>) {
    let root = doc.tree.root();
    let find = |pred: &dyn Fn(&scraper::node::Element) -> bool| {
        root.descendants().find(|n| element(*n).is_some_and(pred))
    };
    let meta = |attr: &str, value: &str| {
        find(&|e| e.name() == "meta" && e.attr(attr).is_some_and(|v| v.eq_ignore_ascii_case(value)))
            .and_then(|n| {
                element(n)?
                    .attr("content")
                    .map(str::trim)
                    .map(str::to_owned)
            })
            .filter(|s| !s.is_empty())
    };
    let title_tag = find(&|e| e.name() == "title")
        .map(text_of)
        .filter(|s| !s.is_empty());
    let h1 = find(&|e| e.name() == "h1")
        .map(text_of)
        .filter(|s| !s.is_empty());
    let title = match (meta("property", "og:title"), title_tag, h1) {
        (Some(og), _, _) => Some(og),
        // "Headline | Site": the page's own h1 when the title holds it.
        (None, Some(t), Some(h)) if t.contains(&h) => Some(h),
        (None, t, h) => t.or(h),
    };
    let byline = meta("name", "author").or_else(|| {
        find(&|e| {
            e.attr("rel") == Some("author")
                || e.attr("itemprop") == Some("author")
                || class_and_id(e).contains("byline")
        })
        .map(text_of)
        .filter(|s| !s.is_empty() && s.chars().count() < 100)
    });
    let lang = find(&|e| e.name() == "html")
        .and_then(|n| element(n)?.attr("lang").map(str::to_owned))
        .filter(|s| !s.is_empty());
    (title, byline, lang)
}

/// The main content of `html` as Markdown, with its title, links and images
/// (resolved against `base` when given).
pub fn extract(html: &str, base: Option<&Url>) -> Article {
    let doc = Html::parse_document(html);
    let analysis = analyse(&doc);
    let (title, byline, lang) = metadata(&doc);
    let nodes = main_content(&doc, &analysis);
    let mut md = crate::markdown::Writer::new(base, &analysis);
    for n in nodes {
        md.render(n);
    }
    let (markdown, mut links, mut images) = md.finish();
    let (links_total, images_total) = (links.len(), images.len());
    links.truncate(MAX_ITEMS);
    images.truncate(MAX_ITEMS);
    Article {
        title,
        byline,
        lang,
        markdown,
        links,
        links_total,
        images,
        images_total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARTICLE: &str = include_str!("../testdata/article.html");

    fn article() -> Article {
        let base = Url::parse("https://gazette.example/history/tidal-mills").unwrap();
        extract(ARTICLE, Some(&base))
    }

    #[test]
    fn the_article_is_kept_and_the_boilerplate_goes() {
        let a = article();
        let md = &a.markdown;
        println!("{md}");
        for kept in [
            "# How Tidal Mills Kept Turning\n\nBy [Morwenna Pascoe]",
            "For eight hundred years, millers on the estuary",
            "## The pond, the gate and the wheel",
            "the **sluice gate** is the one",
            "- The *pond*, held back by an earth dam",
            "> “We ground when the sea said so",
            "| Year | Bushels ground | Days stopped |\n| --- | --- | --- |\n| 1891 | 4,210 | 12 |",
            "```python\ndef working_hours(high_water):\n    # the gate opens",
            "[trust's own account](https://mills.example.org/restoration)",
            "![The mill pond at low tide](https://gazette.example/images/mill-pond.jpg)",
            "*The mill pond at low tide, when the sluice gates open.*",
            "paid his rent in eels and wheat.",
        ] {
            assert!(md.contains(kept), "missing {kept:?} in:\n{md}");
        }
        for gone in [
            "cookies",
            "Subscribe",
            "Search the Gazette",
            "Share on Social",
            "Related stories",
            "windmills",
            "Comments",
            "grandfather",
            "Most read",
            "Holiday cottages",
            "inbox every morning",
            "All rights reserved",
            "dataLayer",
            "font-family",
            "Home",
        ] {
            assert!(!md.contains(gone), "{gone:?} is boilerplate, yet in:\n{md}");
        }
        assert_eq!(a.title.as_deref(), Some("How Tidal Mills Kept Turning"));
        assert_eq!(a.byline.as_deref(), Some("Morwenna Pascoe"));
        assert_eq!(a.lang.as_deref(), Some("en-GB"));
        assert_eq!(
            a.links,
            vec![
                Link {
                    text: "Morwenna Pascoe".into(),
                    href: "https://gazette.example/authors/morwenna-pascoe".into()
                },
                Link {
                    text: "trust's own account".into(),
                    href: "https://mills.example.org/restoration".into()
                }
            ]
        );
        assert_eq!(
            a.images,
            vec![Image {
                src: "https://gazette.example/images/mill-pond.jpg".into(),
                alt: "The mill pond at low tide".into()
            }]
        );
    }

    #[test]
    fn pages_without_paragraphs_and_hostile_markup_still_extract() {
        let a = extract(
            "<html><body><h1>Only a heading</h1><div>short</div></body></html>",
            None,
        );
        assert!(a.markdown.contains("# Only a heading"), "{}", a.markdown);
        assert!(extract("", None).markdown.is_empty());
        assert!(
            extract("not html at all", None)
                .markdown
                .contains("not html at all")
        );
        // Nesting far beyond the renderer's depth: text, no stack overflow.
        let deep = "<div>".repeat(20_000)
            + "deep text, with commas, enough to count as content"
            + &"</div>".repeat(20_000);
        assert!(extract(&deep, None).markdown.contains("deep text"));
        // Unclosed tags, stray end tags, entities.
        let a = extract(
            "<p>Fish &amp; chips, salt &lt;and&gt; vinegar, on the quay at dusk<p>x</b></i>",
            None,
        );
        assert!(
            a.markdown.contains("Fish & chips, salt <and> vinegar"),
            "{}",
            a.markdown
        );
    }

    #[test]
    fn links_are_resolved_or_left_out() {
        let html = r##"<article><p>One <a href="/a">rel</a>, two <a href="#top">anchor</a>,
            three <a href="javascript:alert(1)">script</a>, four <a href="http://x.example/b c">spaced</a>,
            and a long enough sentence around them all.</p></article>"##;
        let base = Url::parse("https://site.example/dir/page").unwrap();
        let a = extract(html, Some(&base));
        let hrefs: Vec<&str> = a.links.iter().map(|l| l.href.as_str()).collect();
        assert_eq!(hrefs, ["https://site.example/a", "http://x.example/b%20c"]);
        assert!(
            a.markdown.contains("two anchor, three script"),
            "{}",
            a.markdown
        );
        let a = extract(html, None);
        assert_eq!(a.links[0].href, "/a");
    }
}
