//! `doc`: documents as text an agent can read — PDF, Word, PowerPoint, Excel,
//! HTML, Markdown and plain text (Qwen-Agent's `doc_parser`) — and retrieval
//! over the documents of a session's workspace (Qwen-Agent's `retrieval`).
//!
//! Every byte of a document is parsed here, inside the sandbox, under the
//! plugin's fuel, memory and time limits: a malformed file or a ZIP bomb ends
//! one call with an error, never the host.

#[cfg(any(target_arch = "wasm32", test))]
mod bert;
mod embed;
mod html;
pub mod model;
mod office;
mod pdf;
pub mod retrieval;
pub mod source;
mod tokens;
mod xml;
mod zipped;

use std::path::Path;

use serde::Serialize;
use toolhost_sdk::{Deserialize, Json, JsonSchema, ToolError};

pub use model::{Doc, Kind, Metadata, Section};
pub use source::Format;
use source::Source;

/// Where the host mounts the session workspace inside the sandbox.
pub const WORKSPACE: &str = "/workspace";
/// Characters returned by default, and at most.
const DEFAULT_CHARS: usize = 20_000;
const MAX_CHARS: usize = 200_000;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParseInput {
    /// A file of the session workspace, e.g. `reports/q3.pdf`.
    pub path: Option<String>,
    /// An http(s) URL; only hosts in the plugin's allow-list are reached.
    pub url: Option<String>,
    /// The document's bytes, base64-encoded.
    pub base64: Option<String>,
    /// The format, when neither the bytes nor the name tell it.
    pub format: Option<Format>,
    /// Pages (PDF), slides (PPTX) or sheets (XLSX) to read, 1-based: "1-3,7,10-".
    pub pages: Option<String>,
    /// Where to start in the document's text, in characters: the `next_offset`
    /// of an earlier call. Default 0.
    pub offset: Option<usize>,
    /// Most characters of text returned (default 20000, at most 200000).
    #[schemars(range(min = 100, max = 200000))]
    pub max_chars: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
pub struct Parsed {
    /// The workspace path or URL read.
    pub source: String,
    pub format: Format,
    pub metadata: Metadata,
    /// How many pages, slides or sheets the document has (1 for the others).
    pub count: usize,
    /// The sections (pages, slides, sheets; or the whole document) whose text
    /// falls in this window, each cut to it.
    pub sections: Vec<Section>,
    /// Where this window starts and how long the whole text is, in characters.
    pub offset: usize,
    pub total_chars: usize,
    /// Pass as `offset` to read on; absent when this window reaches the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

/// Read the document named by exactly one of `path`, `url`, `base64`.
pub fn load(
    root: &Path,
    path: Option<&str>,
    url: Option<&str>,
    base64: Option<&str>,
) -> Result<Source, ToolError> {
    let max = source::max_bytes();
    match (path, url, base64) {
        (Some(p), None, None) => source::read_file(root, p, max),
        (None, Some(u), None) => source::download(u, max),
        (None, None, Some(b)) => source::decode(b, None, max),
        _ => Err(ToolError::invalid_input(
            "give the document as exactly one of `path`, `url` or `base64`",
        )),
    }
}

/// Parse `source` (of `format`, else detected) into sections.
pub fn parse_source(
    source: &Source,
    format: Option<Format>,
    pages: &model::Ranges,
) -> Result<(Format, Doc), ToolError> {
    let format = source::detect(source, format)?;
    let paged = matches!(format, Format::Pdf | Format::Pptx | Format::Xlsx);
    if !paged && !pages.is_all() {
        return Err(ToolError::invalid_input(format!(
            "`pages` applies to PDF, PPTX and XLSX documents; this one is {}",
            format.as_str()
        )));
    }
    let doc = match format {
        Format::Pdf => pdf::parse(&source.bytes, pages)?,
        Format::Docx => office::docx(&source.bytes)?,
        Format::Pptx => office::pptx(&source.bytes, pages)?,
        Format::Xlsx => office::xlsx(&source.bytes, pages)?,
        Format::Html => {
            let (metadata, text) = html::parse(&source::text_of(&source.bytes));
            whole(metadata, text)
        }
        Format::Markdown | Format::Text => {
            let text = source::text_of(&source.bytes);
            let title = (format == Format::Markdown)
                .then(|| {
                    text.lines()
                        .find_map(|l| l.strip_prefix("# ").map(|t| t.trim().to_owned()))
                })
                .flatten();
            let metadata = Metadata {
                title,
                ..Metadata::default()
            };
            whole(metadata, text.trim_end().to_owned())
        }
    };
    Ok((format, doc))
}

fn whole(metadata: Metadata, text: String) -> Doc {
    Doc {
        metadata,
        sections: vec![Section {
            kind: Kind::Document,
            number: 1,
            title: None,
            text,
        }],
        count: 1,
    }
}

/// The sections' text in `[offset, offset + max)` characters, the cut moved
/// back to a line break or space near the window's end.
fn window(
    sections: Vec<Section>,
    offset: usize,
    max: usize,
) -> (Vec<Section>, usize, Option<usize>) {
    let total: usize = sections.iter().map(|s| s.text.chars().count()).sum();
    let mut end = (offset + max).min(total);
    if end < total {
        // Find a break in the last fifth of the window (only that fifth is
        // collected, not the whole document).
        let floor = end - max / 5;
        let tail: Vec<char> = sections
            .iter()
            .flat_map(|s| s.text.chars())
            .skip(floor)
            .take(end - floor)
            .collect();
        if let Some(p) = tail.iter().rposition(|&c| c == '\n') {
            end = floor + p + 1;
        } else if let Some(p) = tail.iter().rposition(|&c| c == ' ') {
            end = floor + p + 1;
        }
    }
    let mut out = Vec::new();
    let mut at = 0;
    for mut s in sections {
        let len = s.text.chars().count();
        let (from, to) = (offset.max(at), end.min(at + len));
        if from < to || (len == 0 && (offset..end.max(offset + 1)).contains(&at)) {
            s.text = s
                .text
                .chars()
                .skip(from - at)
                .take(to.saturating_sub(from))
                .collect();
            out.push(s);
        }
        at += len;
    }
    (out, total, (end < total).then_some(end))
}

fn parser(input: ParseInput) -> Result<Json<Parsed>, ToolError> {
    let max = input
        .max_chars
        .unwrap_or(DEFAULT_CHARS)
        .clamp(100, MAX_CHARS);
    let pages = model::Ranges::parse(input.pages.as_deref())?;
    let source = load(
        Path::new(WORKSPACE),
        input.path.as_deref(),
        input.url.as_deref(),
        input.base64.as_deref(),
    )?;
    let (format, doc) = parse_source(&source, input.format, &pages)?;
    let offset = input.offset.unwrap_or(0);
    let (sections, total_chars, next_offset) = window(doc.sections, offset, max);
    if offset > total_chars {
        return Err(ToolError::invalid_input(format!(
            "`offset` {offset} is past the end of the text ({total_chars} characters)"
        )));
    }
    Ok(Json(Parsed {
        source: source.name,
        format,
        metadata: doc.metadata,
        count: doc.count,
        sections,
        offset,
        total_chars,
        next_offset,
    }))
}

fn retrieval(input: retrieval::SearchInput) -> Result<Json<retrieval::SearchOutput>, ToolError> {
    retrieval::search(Path::new(WORKSPACE), input).map(Json)
}

toolhost_sdk::toolkit! {
    parser: "Read a document as Markdown text with its structure: PDF (by page), Word, \
        PowerPoint (by slide), Excel (each sheet a table), HTML, Markdown or plain text, \
        from a workspace file (`path`), a URL or base64. Answers metadata (title, author, \
        dates), the pages/slides/sheets with headings and tables as Markdown, and pages \
        long text: pass `next_offset` back as `offset` to read on. `pages` selects \
        pages, slides or sheets, e.g. \"1-3,7\".",
    retrieval: "Search the documents of the session workspace (PDF, Word, PowerPoint, \
        Excel, HTML, Markdown, text) for passages relevant to a query. Indexes them into \
        chunks on first use and re-indexes only changed files. `mode`: keyword (BM25, \
        Latin and CJK), vector (embeddings, when configured) or hybrid (both, fused). \
        Answers passages with their file, page and score.",
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sec(text: &str, n: usize) -> Section {
        Section {
            kind: Kind::Page,
            number: n,
            title: None,
            text: text.to_owned(),
        }
    }

    #[test]
    fn windows_page_across_sections_without_losing_text() {
        let sections = vec![
            sec("alpha beta gamma\n", 1),
            sec("delta epsilon zeta eta", 2),
        ];
        let mut offset = 0;
        let mut seen = String::new();
        loop {
            let (out, total, next) = window(sections.clone(), offset, 10);
            assert_eq!(total, 39);
            seen += &out.iter().map(|s| s.text.as_str()).collect::<String>();
            match next {
                Some(n) => {
                    assert!(n > offset && n - offset <= 10);
                    offset = n;
                }
                None => break,
            }
        }
        assert_eq!(seen, "alpha beta gamma\ndelta epsilon zeta eta");
    }
}
