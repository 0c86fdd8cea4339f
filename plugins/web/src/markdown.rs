//! Elements to Markdown: headings, paragraphs, lists, links, images,
//! emphasis, code (inline and fenced), block quotes and tables; dropped
//! nodes ([`crate::extract::analyse`]) and link lists inside the content
//! (more than half of their text in links) are left out.

use ego_tree::NodeRef;
use scraper::Node;
use url::Url;

use crate::extract::{Analysis, Image, Link, text_of};

/// Deeper elements are read as plain text (no recursion without bound).
const MAX_DEPTH: usize = 256;

pub struct Writer<'a> {
    out: String,
    /// A space is owed before the next word.
    space: bool,
    base: Option<&'a Url>,
    analysis: &'a Analysis,
    links: Vec<Link>,
    images: Vec<Image>,
    depth: usize,
}

impl<'a> Writer<'a> {
    pub fn new(base: Option<&'a Url>, analysis: &'a Analysis) -> Self {
        Writer {
            out: String::new(),
            space: false,
            base,
            analysis,
            links: Vec::new(),
            images: Vec::new(),
            depth: 0,
        }
    }

    /// The Markdown, and the links and images met.
    pub fn finish(self) -> (String, Vec<Link>, Vec<Image>) {
        let mut out = String::with_capacity(self.out.len());
        let mut blank = 0;
        for line in self.out.lines() {
            let line = line.trim_end();
            if line.is_empty() {
                blank += 1;
                continue;
            }
            if !out.is_empty() {
                out.push_str(if blank > 0 { "\n\n" } else { "\n" });
            }
            blank = 0;
            out.push_str(line);
        }
        (out, self.links, self.images)
    }

    fn block(&mut self) {
        let trimmed = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(trimmed);
        if !self.out.is_empty() && !self.out.ends_with("\n\n") {
            self.out.push_str(if self.out.ends_with('\n') {
                "\n"
            } else {
                "\n\n"
            });
        }
        self.space = false;
    }

    /// Text, whitespace collapsed.
    fn text(&mut self, s: &str) {
        for (i, word) in s.split_whitespace().enumerate() {
            if i > 0 || s.starts_with(char::is_whitespace) {
                self.space = true;
            }
            self.word(word);
        }
        if s.ends_with(char::is_whitespace) {
            self.space = true;
        }
    }

    /// Something inline that is already Markdown.
    fn word(&mut self, w: &str) {
        if self.space && !self.out.is_empty() && !self.out.ends_with([' ', '\n']) {
            self.out.push(' ');
        }
        self.space = false;
        self.out.push_str(w);
    }

    /// The children of `n` rendered alone, on one line.
    fn inline(&mut self, n: NodeRef<'_, Node>) -> String {
        let (out, space) = (std::mem::take(&mut self.out), self.space);
        self.space = false;
        self.children(n);
        let inner = std::mem::replace(&mut self.out, out);
        self.space = space;
        inner.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// The children of `n` rendered alone, as blocks.
    fn blocks(&mut self, n: NodeRef<'_, Node>) -> String {
        let (out, space) = (std::mem::take(&mut self.out), self.space);
        self.space = false;
        self.children(n);
        let inner = std::mem::replace(&mut self.out, out);
        self.space = space;
        inner.trim().to_owned()
    }

    fn children(&mut self, n: NodeRef<'_, Node>) {
        for c in n.children() {
            self.render(c);
        }
    }

    fn url(&self, raw: &str) -> Option<String> {
        let raw = raw.trim();
        if raw.is_empty() || raw.starts_with('#') {
            return None;
        }
        let url = match self.base {
            Some(base) => base.join(raw).ok()?,
            None => match Url::parse(raw) {
                Ok(u) => u,
                Err(_) => return Some(raw.to_owned()),
            },
        };
        matches!(url.scheme(), "http" | "https" | "mailto" | "ftp").then(|| url.to_string())
    }

    /// Render `n` (and what is under it).
    pub fn render(&mut self, n: NodeRef<'_, Node>) {
        if self.analysis.dropped.contains(&n.id()) {
            return;
        }
        let el = match n.value() {
            Node::Text(t) => return self.text(t),
            Node::Element(el) => el,
            Node::Document | Node::Fragment => return self.children(n),
            _ => return,
        };
        if self.depth >= MAX_DEPTH {
            let text = text_of(n);
            return self.text(&format!(" {text} "));
        }
        self.depth += 1;
        self.element(n, el.name());
        self.depth -= 1;
    }

    fn element(&mut self, n: NodeRef<'_, Node>, name: &str) {
        let attr = |a: &str| n.value().as_element().and_then(|e| e.attr(a));
        let stats = self
            .analysis
            .stats
            .get(&n.id())
            .copied()
            .unwrap_or_default();
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let text = self.inline(n);
                if !text.is_empty() {
                    self.block();
                    let level = usize::from(name.as_bytes()[1] - b'0');
                    self.out.push_str(&format!("{} {text}", "#".repeat(level)));
                    self.block();
                }
            }
            "ul" | "ol" | "table" | "div" | "section"
                if self.depth > 1 && stats.chars > 0 && stats.link_density() > 0.5 =>
            {
                // A list of links inside the content: navigation, "related".
            }
            "ul" | "ol" => self.list(n, name == "ol"),
            "pre" => self.pre(n),
            "code" | "kbd" | "samp" | "tt" => {
                let text = text_of(n);
                if !text.is_empty() {
                    let tick = if text.contains('`') { "``" } else { "`" };
                    self.word(&format!("{tick}{text}{tick}"));
                }
            }
            "strong" | "b" | "em" | "i" | "del" | "s" => {
                let mark = match name {
                    "strong" | "b" => "**",
                    "del" | "s" => "~~",
                    _ => "*",
                };
                let lead = n
                    .first_child()
                    .and_then(|c| c.value().as_text())
                    .is_some_and(|t| t.starts_with(char::is_whitespace));
                let text = self.inline(n);
                if !text.is_empty() {
                    self.space |= lead;
                    self.word(&format!("{mark}{text}{mark}"));
                }
            }
            "a" => {
                let text = self.inline(n);
                match attr("href").and_then(|h| self.url(h)) {
                    Some(href) if !text.is_empty() => {
                        if !self.links.iter().any(|l| l.href == href) {
                            self.links.push(Link {
                                text: text.clone(),
                                href: href.clone(),
                            });
                        }
                        let href = if href.contains([' ', ')']) {
                            format!("<{href}>")
                        } else {
                            href
                        };
                        self.word(&format!("[{text}]({href})"));
                    }
                    _ => self.word(&text),
                }
            }
            "img" => {
                let alt = attr("alt").unwrap_or_default().trim().to_owned();
                let src = attr("src")
                    .filter(|s| !s.trim_start().starts_with("data:"))
                    .or_else(|| attr("data-src"))
                    .and_then(|s| self.url(s));
                if let Some(src) = src {
                    if !self.images.iter().any(|i| i.src == src) {
                        self.images.push(Image {
                            src: src.clone(),
                            alt: alt.clone(),
                        });
                    }
                    self.word(&format!("![{alt}]({src})"));
                } else if !alt.is_empty() {
                    self.word(&alt);
                }
            }
            "br" => {
                self.out.push('\n');
                self.space = false;
            }
            "hr" => {
                self.block();
                self.out.push_str("---");
                self.block();
            }
            "blockquote" => {
                let inner = self.blocks(n);
                if !inner.is_empty() {
                    self.block();
                    let quoted: Vec<String> = inner
                        .lines()
                        .map(|l| {
                            if l.is_empty() {
                                ">".into()
                            } else {
                                format!("> {l}")
                            }
                        })
                        .collect();
                    self.out.push_str(&quoted.join("\n"));
                    self.block();
                }
            }
            "table" => self.table(n),
            "figcaption" => {
                let text = self.inline(n);
                if !text.is_empty() {
                    self.block();
                    self.out.push_str(&format!("*{text}*"));
                    self.block();
                }
            }
            "dt" => {
                let text = self.inline(n);
                self.block();
                self.out.push_str(&format!("**{text}**"));
                self.block();
            }
            "p" | "div" | "section" | "article" | "main" | "header" | "address" | "figure"
            | "dl" | "dd" | "details" | "summary" | "center" | "fieldset" | "li" | "tr" | "td"
            | "th" | "tbody" | "thead" | "tfoot" | "body" | "html" => {
                self.block();
                self.children(n);
                self.block();
            }
            _ => self.children(n),
        }
    }

    fn list(&mut self, n: NodeRef<'_, Node>, ordered: bool) {
        self.block();
        let mut number = 0;
        for item in n.children() {
            if self.analysis.dropped.contains(&item.id()) {
                continue;
            }
            let is_item = item.value().as_element().is_some_and(|e| e.name() == "li");
            let body = if is_item {
                self.blocks(item)
            } else {
                self.blocks_of(item)
            };
            if body.is_empty() {
                continue;
            }
            number += 1;
            let marker = if ordered {
                format!("{number}. ")
            } else {
                "- ".to_owned()
            };
            let pad = " ".repeat(marker.len());
            for (i, line) in body.lines().filter(|l| !l.trim().is_empty()).enumerate() {
                if i == 0 {
                    self.out.push_str(&marker);
                } else {
                    self.out.push_str(&pad);
                }
                self.out.push_str(line);
                self.out.push('\n');
            }
        }
        self.block();
    }

    /// `n` itself rendered alone (a stray child of a list).
    fn blocks_of(&mut self, n: NodeRef<'_, Node>) -> String {
        let (out, space) = (std::mem::take(&mut self.out), self.space);
        self.render(n);
        let inner = std::mem::replace(&mut self.out, out);
        self.space = space;
        inner.trim().to_owned()
    }

    fn pre(&mut self, n: NodeRef<'_, Node>) {
        let mut code = String::new();
        for t in n.descendants().filter_map(|d| d.value().as_text()) {
            code.push_str(t);
        }
        let code = code.trim_matches('\n').trim_end();
        if code.trim().is_empty() {
            return;
        }
        let lang = n
            .descendants()
            .filter_map(|d| d.value().as_element())
            .filter_map(|e| e.attr("class"))
            .flat_map(str::split_whitespace)
            .find_map(|c| {
                c.strip_prefix("language-")
                    .or_else(|| c.strip_prefix("lang-"))
            })
            .unwrap_or_default()
            .to_owned();
        let fence = if code.contains("```") { "~~~~" } else { "```" };
        self.block();
        self.out
            .push_str(&format!("{fence}{lang}\n{code}\n{fence}"));
        self.block();
    }

    fn table(&mut self, n: NodeRef<'_, Node>) {
        let rows: Vec<NodeRef<'_, Node>> = n
            .descendants()
            .filter(|d| d.value().as_element().is_some_and(|e| e.name() == "tr"))
            .collect();
        let nested = n
            .descendants()
            .skip(1)
            .any(|d| d.value().as_element().is_some_and(|e| e.name() == "table"));
        fn cells<'n>(row: &NodeRef<'n, Node>) -> Vec<NodeRef<'n, Node>> {
            row.children()
                .filter(|c| {
                    c.value()
                        .as_element()
                        .is_some_and(|e| matches!(e.name(), "td" | "th"))
                })
                .collect()
        }
        let width = rows.iter().map(|r| cells(r).len()).max().unwrap_or(0);
        // A table used for layout: its cells as blocks.
        if nested || width < 2 {
            self.block();
            self.children(n);
            self.block();
            return;
        }
        let mut lines = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let mut texts: Vec<String> = cells(row)
                .into_iter()
                .map(|c| self.inline(c).replace('|', "\\|"))
                .collect();
            texts.resize(width, String::new());
            lines.push(format!("| {} |", texts.join(" | ")));
            if i == 0 {
                lines.push(format!("|{}", " --- |".repeat(width)));
            }
        }
        self.block();
        self.out.push_str(&lines.join("\n"));
        self.block();
    }
}
