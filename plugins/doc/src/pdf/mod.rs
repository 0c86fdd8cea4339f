//! PDF: text per page (`page`: the content stream's text operators, over
//! `lopdf`'s parser; `fonts`: what codes stand for, read once per document),
//! metadata from the document's Info dictionary.

mod cmap;
mod core14;
mod fonts;
mod page;

use lopdf::{Document, Object};
use toolhost_sdk::ToolError;

use crate::model::{Doc, Kind, Metadata, Ranges, Section, tidy};

pub fn parse(bytes: &[u8], pages: &Ranges) -> Result<Doc, ToolError> {
    let mut doc = Document::load_mem(bytes)
        .map_err(|e| ToolError::invalid_input(format!("not a readable PDF: {e}")))?;
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return Err(ToolError::invalid_input(
            "this PDF is encrypted with a password; it cannot be read",
        ));
    }
    let numbers = doc.get_pages();
    let count = numbers.len();
    if !pages.any_of(count) {
        return Err(ToolError::invalid_input(format!(
            "`pages` asks for none of this PDF's {count} pages"
        )));
    }
    let mut sections = Vec::new();
    let mut reader = page::Reader::new(&doc);
    for (&n, &id) in &numbers {
        let n = n as usize;
        if !pages.contains(n) {
            continue;
        }
        let text = match reader.page(id) {
            Ok(text) => tidy(&text),
            Err(e) => format!("[page {n} could not be read: {e}]"),
        };
        if count > 1 {
            toolhost_sdk::host::progress(
                &format!("page {n} of {count}"),
                Some(n as f64),
                Some(count as f64),
            );
        }
        sections.push(Section {
            kind: Kind::Page,
            number: n,
            title: None,
            text,
        });
    }
    Ok(Doc {
        metadata: metadata(&doc),
        sections,
        count,
    })
}

fn metadata(doc: &Document) -> Metadata {
    let info = doc
        .trailer
        .get(b"Info")
        .ok()
        .and_then(|o| match o {
            Object::Reference(id) => doc.get_object(*id).ok(),
            other => Some(other),
        })
        .and_then(|o| o.as_dict().ok());
    let Some(info) = info else {
        return Metadata::default();
    };
    let field = |key: &[u8]| {
        info.get(key)
            .ok()
            .and_then(|o| match o {
                Object::Reference(id) => doc.get_object(*id).ok(),
                other => Some(other),
            })
            .and_then(|o| o.as_str().ok())
            .map(text_string)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    Metadata {
        title: field(b"Title"),
        author: field(b"Author"),
        subject: field(b"Subject"),
        keywords: field(b"Keywords"),
        creator: field(b"Creator"),
        producer: field(b"Producer"),
        created: field(b"CreationDate").map(|d| date(&d)),
        modified: field(b"ModDate").map(|d| date(&d)),
        language: None,
    }
}

/// A PDF text string: UTF-16BE with a byte-order mark, else PDFDocEncoding
/// (Latin-1 for the printable range).
fn text_string(bytes: &[u8]) -> String {
    if let Some(rest) = bytes.strip_prefix(&[0xFE, 0xFF]) {
        let units: Vec<u16> = rest
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        return String::from_utf16_lossy(&units);
    }
    if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        return String::from_utf8_lossy(rest).into_owned();
    }
    bytes.iter().map(|&b| b as char).collect()
}

/// `D:20230102150405+01'00'` → `2023-01-02T15:04:05+01:00`; other text as is.
fn date(d: &str) -> String {
    let s = d.strip_prefix("D:").unwrap_or(d);
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    if digits.len() < 8 {
        return d.to_owned();
    }
    let part = |a: usize, b: usize| digits.get(a..b).unwrap_or("00");
    let mut out = format!("{}-{}-{}", part(0, 4), part(4, 6), part(6, 8));
    if digits.len() >= 12 {
        out += &format!("T{}:{}:{}", part(8, 10), part(10, 12), part(12, 14));
        let zone = &s[digits.len()..];
        match zone.chars().next() {
            Some('Z') => out.push('Z'),
            Some(sign @ ('+' | '-')) => {
                let z: String = zone[1..].chars().filter(char::is_ascii_digit).collect();
                if z.len() >= 4 {
                    out += &format!("{sign}{}:{}", &z[..2], &z[2..4]);
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
