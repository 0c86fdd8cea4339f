//! HTML to Markdown for reading, in one pass over the tags: headings, paragraphs,
//! lists, tables, preformatted blocks and quotes keep their structure;
//! scripts, styles and other invisible elements are dropped; `<title>` and
//! `<meta name=…>` become metadata. Not a browser: no CSS, no scripts.

use crate::model::{Metadata, markdown_table, tidy};

/// Elements whose content is never shown.
const HIDDEN: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "head", "iframe", "object", "canvas",
];
/// Elements that start a new block.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "nav",
    "aside",
    "form",
    "figure",
    "figcaption",
    "address",
    "dl",
    "dt",
    "dd",
    "ul",
    "ol",
    "hr",
    "details",
    "summary",
];

pub fn parse(html: &str) -> (Metadata, String) {
    let mut md = Markdown::default();
    let mut meta = Metadata::default();
    let bytes = html.as_bytes();
    let mut i = 0;
    let mut hidden: Option<String> = None;
    let mut in_title = false;
    let mut title = String::new();
    while i < bytes.len() {
        if bytes[i] != b'<' {
            let end = html[i..].find('<').map_or(html.len(), |p| i + p);
            let text = decode_entities(&html[i..end]);
            if in_title {
                title.push_str(&text);
            } else if hidden.is_none() {
                md.text(&text);
            }
            i = end;
            continue;
        }
        if html[i..].starts_with("<!--") {
            i = html[i..].find("-->").map_or(html.len(), |p| i + p + 3);
            continue;
        }
        let end = tag_end(bytes, i);
        let tag = &html[i + 1..end.saturating_sub(1).max(i + 1)];
        i = end;
        let closing = tag.starts_with('/');
        let body = tag.trim_start_matches('/');
        let name: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if name.is_empty() {
            continue; // <!doctype>, <?xml?>, stray `<`
        }
        if let Some(h) = &hidden {
            if closing && *h == name {
                hidden = None;
            }
            if name == "title" {
                in_title = !closing;
            }
            if name == "meta" && !closing {
                meta_tag(body, &mut meta);
            }
            if name == "html" && !closing {
                meta.language = attribute(body, "lang").or(meta.language.take());
            }
            continue;
        }
        if name == "html" && !closing {
            meta.language = attribute(body, "lang");
            continue;
        }
        if name == "title" {
            in_title = !closing;
            continue;
        }
        if name == "meta" {
            meta_tag(body, &mut meta);
            continue;
        }
        if !closing && HIDDEN.contains(&name.as_str()) && !body.trim_end().ends_with('/') {
            hidden = Some(name);
            continue;
        }
        md.tag(&name, closing);
    }
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    if !title.is_empty() {
        meta.title = Some(title);
    }
    (meta, tidy(&md.finish()))
}

/// Where a tag that starts at `i` ends (after its `>`), quotes respected.
fn tag_end(bytes: &[u8], i: usize) -> usize {
    let mut quote = None;
    for (j, &b) in bytes.iter().enumerate().skip(i + 1) {
        match (quote, b) {
            (None, b'"' | b'\'') => quote = Some(b),
            (Some(q), b) if b == q => quote = None,
            (None, b'>') => return j + 1,
            _ => {}
        }
    }
    bytes.len()
}

fn meta_tag(body: &str, meta: &mut Metadata) {
    let name = attribute(body, "name")
        .or_else(|| attribute(body, "property"))
        .map(|n| n.to_ascii_lowercase());
    let content = attribute(body, "content");
    let (Some(name), Some(content)) = (name, content) else {
        return;
    };
    let slot = match name.as_str() {
        "author" => &mut meta.author,
        "description" | "og:description" => &mut meta.subject,
        "keywords" => &mut meta.keywords,
        "generator" => &mut meta.creator,
        _ => return,
    };
    slot.get_or_insert(content);
}

/// An attribute's value from a tag's text (`a href="x"`), entities decoded.
fn attribute(tag: &str, key: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(p) = lower[from..].find(key) {
        let at = from + p;
        from = at + key.len();
        let before_ok = at > 0 && lower.as_bytes()[at - 1].is_ascii_whitespace();
        let rest = lower[from..].trim_start();
        if !before_ok || !rest.starts_with('=') {
            continue;
        }
        let value_at = tag.len() - rest.len() + 1;
        let value = tag[value_at..].trim_start();
        let v = match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or(""),
            _ => value
                .split(|c: char| c.is_whitespace() || c == '>')
                .next()
                .unwrap_or(""),
        };
        return Some(decode_entities(v));
    }
    None
}

/// The Markdown being written, with the state of lists, tables and `<pre>`.
#[derive(Default)]
struct Markdown {
    out: String,
    line: String,
    pre: bool,
    lists: Vec<Option<usize>>,
    tables: Vec<Vec<Vec<String>>>,
    cell: Option<String>,
}

impl Markdown {
    fn text(&mut self, text: &str) {
        if let Some(cell) = &mut self.cell {
            cell.push_str(text);
            return;
        }
        if self.pre {
            self.line.push_str(text);
            return;
        }
        let mut first = true;
        for word in text.split_whitespace() {
            let glue = if first {
                text.starts_with(char::is_whitespace)
            } else {
                true
            };
            if glue && !self.line.is_empty() && !self.line.ends_with(' ') {
                self.line.push(' ');
            }
            self.line.push_str(word);
            first = false;
        }
        if text.ends_with(char::is_whitespace) && !self.line.is_empty() && !first {
            self.line.push(' ');
        }
    }

    fn flush(&mut self) {
        let line = std::mem::take(&mut self.line);
        let line = if self.pre {
            line
        } else {
            line.trim_end().to_owned()
        };
        if !line.is_empty() {
            self.out.push_str(&line);
            self.out.push_str("\n\n");
        }
    }

    fn tag(&mut self, name: &str, closing: bool) {
        if !self.tables.is_empty() && self.table_tag(name, closing) {
            return;
        }
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.flush();
                if !closing {
                    let level = name[1..].parse::<usize>().unwrap_or(1);
                    self.line = format!("{} ", "#".repeat(level));
                }
            }
            "br" => {
                if self.pre {
                    self.line.push('\n');
                } else {
                    self.flush();
                }
            }
            "pre" => {
                self.flush();
                self.pre = !closing;
                self.out.push_str("```\n");
                if closing {
                    self.out.push_str("\n\n");
                }
            }
            "blockquote" => {
                self.flush();
                if !closing {
                    self.line.push_str("> ");
                }
            }
            "ul" | "ol" => {
                self.flush();
                if closing {
                    self.lists.pop();
                } else {
                    self.lists.push((name == "ol").then_some(0));
                }
            }
            "li" => {
                self.flush();
                if !closing {
                    let depth = self.lists.len().saturating_sub(1);
                    let marker = match self.lists.last_mut() {
                        Some(Some(n)) => {
                            *n += 1;
                            format!("{n}.")
                        }
                        _ => "-".to_owned(),
                    };
                    self.line = format!("{}{marker} ", "  ".repeat(depth));
                }
            }
            "table" if !closing => {
                self.flush();
                self.tables.push(Vec::new());
            }
            _ if BLOCKS.contains(&name) => self.flush(),
            _ => {}
        }
    }

    /// Tags inside a table; true when handled.
    fn table_tag(&mut self, name: &str, closing: bool) -> bool {
        match (name, closing) {
            ("tr", false) => {
                self.end_cell();
                if let Some(t) = self.tables.last_mut() {
                    t.push(Vec::new());
                }
            }
            ("td" | "th", false) => {
                self.end_cell();
                self.cell = Some(String::new());
            }
            ("td" | "th" | "tr", true) => self.end_cell(),
            ("table", true) => {
                self.end_cell();
                let rows = self.tables.pop().unwrap_or_default();
                let rows: Vec<Vec<String>> = rows.into_iter().filter(|r| !r.is_empty()).collect();
                let table = markdown_table(&rows);
                match self.tables.last_mut().and_then(|t| t.last_mut()) {
                    // A nested table is flattened into its outer cell.
                    Some(_) => self.cell = Some(table.replace('\n', " ")),
                    None => {
                        self.out.push_str(&table);
                        self.out.push('\n');
                    }
                }
            }
            ("table", false) => {
                self.end_cell();
                self.tables.push(Vec::new());
            }
            ("br" | "p" | "div" | "li", _) => {
                if let Some(c) = &mut self.cell {
                    c.push(' ');
                }
            }
            _ => return false,
        }
        true
    }

    fn end_cell(&mut self) {
        if let Some(cell) = self.cell.take() {
            if self.tables.last().is_some_and(|t| t.is_empty())
                && let Some(t) = self.tables.last_mut()
            {
                t.push(Vec::new());
            }
            if let Some(row) = self.tables.last_mut().and_then(|t| t.last_mut()) {
                row.push(cell.trim().to_owned());
            }
        }
    }

    fn finish(mut self) -> String {
        while !self.tables.is_empty() {
            self.table_tag("table", true);
        }
        self.flush();
        self.out
    }
}

/// Decode character references: numeric ones and the common named ones.
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(p) = rest.find('&') {
        out.push_str(&rest[..p]);
        rest = &rest[p..];
        let end = rest[1..].find(';').map(|e| e + 1).filter(|&e| e <= 10);
        let decoded = end.and_then(|e| entity(&rest[1..e]));
        match (end, decoded) {
            (Some(e), Some(c)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            _ => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(code);
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "copy" => '©',
        "reg" => '®',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "laquo" => '«',
        "raquo" => '»',
        "ldquo" => '“',
        "rdquo" => '”',
        "lsquo" => '‘',
        "rsquo" => '’',
        "middot" => '·',
        "times" => '×',
        "euro" => '€',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structure_survives() {
        let html = r#"<!DOCTYPE html><html lang="en"><head><title> A &amp; B </title>
            <meta name="author" content="Ann"><style>p{}</style></head><body>
            <script>var x = "<p>no</p>";</script>
            <h1>Intro</h1><p>Hello <b>bold</b> world.</p>
            <ul><li>one</li><li>two<ol><li>inner</li></ol></li></ul>
            <table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1<br>2</td></tr></table>
            <pre>  keep
   this</pre><!-- gone --></body></html>"#;
        let (meta, md) = parse(html);
        assert_eq!(meta.title.as_deref(), Some("A & B"));
        assert_eq!(meta.author.as_deref(), Some("Ann"));
        assert_eq!(meta.language.as_deref(), Some("en"));
        assert!(
            !md.contains("no") && !md.contains("p{}") && !md.contains("gone"),
            "{md}"
        );
        assert!(md.contains("# Intro\n\nHello bold world."), "{md}");
        assert!(md.contains("- one\n\n- two\n\n  1. inner"), "{md}");
        assert!(md.contains("| k | v |\n| --- | --- |\n| a | 1 2 |"), "{md}");
        assert!(md.contains("```\n  keep\n   this"), "{md}");
    }

    #[test]
    fn entities() {
        assert_eq!(
            decode_entities("a &lt;b&gt; &#20013;&#x6587; &bogus; &"),
            "a <b> 中文 &bogus; &"
        );
    }
}
