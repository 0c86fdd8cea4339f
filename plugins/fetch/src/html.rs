//! HTML to readable text and links, without a DOM: a single pass over the
//! tags that skips scripts, styles and comments, puts block elements on their
//! own lines, decodes the common entities and collects `<a href>` with their
//! text. Good enough for an agent to read a page; not a browser.

use schemars::JsonSchema;
use serde::Serialize;

/// Most links returned.
const MAX_LINKS: usize = 200;

#[derive(Debug, Serialize, JsonSchema, PartialEq)]
pub struct Link {
    /// The link's text.
    pub text: String,
    /// Its target, absolute.
    pub href: String,
}

#[derive(Debug, Default)]
pub struct Document {
    pub title: Option<String>,
    pub text: String,
    pub links: Vec<Link>,
}

const BLOCKS: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "tr",
    "table",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "pre",
    "blockquote",
    "hr",
    "dt",
    "dd",
    "main",
    "aside",
    "form",
];

/// Extract the readable parts of `html`, links resolved against `base`.
pub fn extract(html: &str, base: &url::Url) -> Document {
    let mut doc = Document::default();
    let mut text = String::new();
    let mut rest = html;
    // The link being read: its href and where its text starts in `text`.
    let mut open_link: Option<(String, usize)> = None;
    let mut in_title = false;
    let mut title = String::new();
    while let Some(lt) = rest.find('<') {
        push_text(&mut text, &rest[..lt], in_title.then_some(&mut title));
        rest = &rest[lt..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        let Some(gt) = rest.find('>') else {
            rest = "";
            break;
        };
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        match name.as_str() {
            "script" | "style" | "noscript" | "template" if !closing => {
                let end = format!("</{name}");
                rest = find_ci(rest, &end).map_or("", |i| &rest[i..]);
            }
            "title" => in_title = !closing,
            "a" if !closing => {
                open_link = attribute(tag, "href").map(|href| (href, text.len()));
            }
            "a" => {
                if let Some((href, start)) = open_link.take()
                    && doc.links.len() < MAX_LINKS
                    && let Ok(target) = base.join(&href)
                    && matches!(target.scheme(), "http" | "https")
                {
                    doc.links.push(Link {
                        text: collapse(&text[start..]),
                        href: target.to_string(),
                    });
                }
            }
            n if BLOCKS.contains(&n) && !text.is_empty() && !text.ends_with('\n') => {
                text.push('\n');
            }
            _ => {}
        }
    }
    push_text(&mut text, rest, None);
    let title = collapse(&title);
    doc.title = (!title.is_empty()).then_some(title);
    doc.text = text
        .lines()
        .map(collapse)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    doc
}

/// Append decoded `raw` text (also to the title while inside `<title>`).
fn push_text(out: &mut String, raw: &str, title: Option<&mut String>) {
    let decoded = decode_entities(raw);
    match title {
        Some(t) => t.push_str(&decoded),
        None => out.push_str(&decoded),
    }
}

/// Whitespace runs as one space, trimmed.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Case-insensitive find of an ASCII `needle`.
fn find_ci(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    (0..h.len().saturating_sub(n.len() - 1)).find(|&i| h[i..i + n.len()].eq_ignore_ascii_case(n))
}

/// The value of attribute `name` in a tag's text (quoted or not).
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(name) {
        let at = from + i;
        from = at + name.len();
        let before_ok = at == 0 || lower.as_bytes()[at - 1].is_ascii_whitespace();
        let rest = lower[from..].trim_start();
        if !before_ok || !rest.starts_with('=') {
            continue;
        }
        let value_at = tag.len() - rest.len() + 1;
        let value = tag[value_at..].trim_start();
        let v = match value.chars().next()? {
            q @ ('"' | '\'') => value[1..].split(q).next()?,
            _ => value
                .split(|c: char| c.is_whitespace() || c == '>')
                .next()?,
        };
        return Some(decode_entities(v));
    }
    None
}

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest[..rest.len().min(12)].find(';');
        let decoded = end.and_then(|e| {
            let entity = &rest[1..e];
            let c = match entity {
                "amp" => '&',
                "lt" => '<',
                "gt" => '>',
                "quot" => '"',
                "apos" | "#39" => '\'',
                "nbsp" => ' ',
                _ => {
                    let code = if let Some(hex) = entity.strip_prefix("#x") {
                        u32::from_str_radix(hex, 16).ok()?
                    } else {
                        entity.strip_prefix('#')?.parse().ok()?
                    };
                    char::from_u32(code)?
                }
            };
            Some((c, e + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_title_and_links() {
        let base = url::Url::parse("http://example.com/dir/page.html").unwrap();
        let doc = extract(
            "<html><head><title>The &amp; Title</title><style>p{color:red}</style>\
             <script>var x = '<p>no</p>';</script></head><body><h1>Heading</h1>\
             <!-- a <p>comment</p> --><p>One &lt;two&gt;&#33;  three</p>\
             <p><a href=\"next.html\">Next   page</a> and <A HREF='/abs'>abs</A> \
             <a href=\"javascript:alert(1)\">js</a></p></body></html>",
            &base,
        );
        assert_eq!(doc.title.as_deref(), Some("The & Title"));
        assert_eq!(doc.text, "Heading\nOne <two>! three\nNext page and abs js");
        assert_eq!(
            doc.links,
            vec![
                Link {
                    text: "Next page".into(),
                    href: "http://example.com/dir/next.html".into()
                },
                Link {
                    text: "abs".into(),
                    href: "http://example.com/abs".into()
                },
            ]
        );
    }

    #[test]
    fn broken_markup_does_not_panic() {
        let base = url::Url::parse("http://x/").unwrap();
        for html in [
            "<",
            "<a href=",
            "<script>",
            "&#xZZ;",
            "<!--",
            "a<b",
            "&",
            "<a href='x'>é",
        ] {
            extract(html, &base);
        }
    }
}
