//! A parsed document: metadata and sections (pages, slides, sheets) of
//! Markdown text, and the pieces every format shares (tables, page ranges).

use schemars::JsonSchema;
use serde::Serialize;
use toolhost_sdk::ToolError;

/// What a document says about itself; fields it does not have are absent.
#[derive(Debug, Default, Clone, Serialize, JsonSchema)]
pub struct Metadata {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keywords: Option<String>,
    /// The program that made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub creator: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub producer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

/// What a section is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A PDF page.
    Page,
    /// A PowerPoint slide.
    Slide,
    /// A spreadsheet's sheet.
    Sheet,
    /// The whole of a document without pages (Word, HTML, Markdown, text).
    Document,
}

/// A page, slide, sheet or whole document as Markdown.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Section {
    pub kind: Kind,
    /// 1-based number among the document's sections of its kind.
    pub number: usize,
    /// A slide's title or a sheet's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Markdown: headings as `#`, tables as Markdown tables, lists as `-`.
    pub text: String,
}

#[derive(Debug, Default)]
pub struct Doc {
    pub metadata: Metadata,
    pub sections: Vec<Section>,
    /// How many pages/slides/sheets the document has (sections may be fewer
    /// when a range was asked for).
    pub count: usize,
}

/// A Markdown table of `rows` (the first is the header). Cells lose their
/// line breaks and pipes are escaped; short rows are padded.
pub fn markdown_table(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    if width == 0 {
        return String::new();
    }
    let cell = |s: &str| {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        s.replace('|', "\\|")
    };
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        out.push('|');
        for c in 0..width {
            out.push(' ');
            out.push_str(&cell(row.get(c).map(String::as_str).unwrap_or("")));
            out.push_str(" |");
        }
        out.push('\n');
        if i == 0 {
            out.push('|');
            out.push_str(&" --- |".repeat(width));
            out.push('\n');
        }
    }
    out
}

/// A set of 1-based numbers from `"1-3,7,10-"`; `None` means all.
#[derive(Debug, Clone, Default)]
pub struct Ranges(Option<Vec<(usize, usize)>>);

impl Ranges {
    pub fn parse(spec: Option<&str>) -> Result<Ranges, ToolError> {
        let Some(spec) = spec.map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(Ranges(None));
        };
        let bad = || {
            ToolError::invalid_input(format!(
                "`pages` must be numbers and ranges from 1, e.g. \"1-3,7,10-\", not `{spec}`"
            ))
        };
        let mut out = Vec::new();
        for part in spec.split(',') {
            let part = part.trim();
            let num = |s: &str| s.trim().parse::<usize>().ok().filter(|&n| n >= 1);
            let range = match part.split_once('-') {
                Some((a, "")) => (num(a).ok_or_else(bad)?, usize::MAX),
                Some((a, b)) => (num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?),
                None => {
                    let n = num(part).ok_or_else(bad)?;
                    (n, n)
                }
            };
            if range.0 > range.1 {
                return Err(bad());
            }
            out.push(range);
        }
        Ok(Ranges(Some(out)))
    }

    pub fn contains(&self, n: usize) -> bool {
        self.0
            .as_ref()
            .is_none_or(|r| r.iter().any(|&(a, b)| a <= n && n <= b))
    }

    /// Whether the ranges ask for anything among `1..=count`.
    pub fn any_of(&self, count: usize) -> bool {
        (1..=count.min(100_000)).any(|n| self.contains(n))
    }

    pub fn is_all(&self) -> bool {
        self.0.is_none()
    }
}

/// Collapse runs of blank lines to one and trim trailing spaces.
pub fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
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
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_become_markdown() {
        let rows = vec![
            vec!["a".to_owned(), "b|c".to_owned()],
            vec!["1\n2".to_owned()],
        ];
        assert_eq!(
            markdown_table(&rows),
            "| a | b\\|c |\n| --- | --- |\n| 1 2 |  |\n"
        );
    }

    #[test]
    fn page_ranges() {
        let r = Ranges::parse(Some("1-3, 7,10-")).unwrap();
        assert!(r.contains(2) && r.contains(7) && r.contains(12));
        assert!(!r.contains(4) && !r.contains(9));
        assert!(Ranges::parse(None).unwrap().contains(99));
        for bad in ["0", "3-1", "a", "1-x", "-3"] {
            assert!(Ranges::parse(Some(bad)).is_err(), "{bad}");
        }
        assert!(!Ranges::parse(Some("5-")).unwrap().any_of(4));
    }

    #[test]
    fn tidy_collapses_blank_runs() {
        assert_eq!(tidy("a  \n\n\n\nb\nc\n\n"), "a\n\nb\nc");
    }
}
