//! PDF: text per page through `pdf-extract` (over `lopdf`), metadata from the
//! document's Info dictionary.

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
    for &n in numbers.keys() {
        let n = n as usize;
        if !pages.contains(n) {
            continue;
        }
        let mut out = Lines::default();
        let read = pdf_extract::output_doc_page(&doc, &mut out, n as u32);
        let text = match read {
            Ok(()) => tidy(&out.text),
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

/// Text of a page in content-stream order, with a space wherever glyphs are
/// apart by more than a fraction of the font size (PDFs often position words
/// without space characters) and a line break wherever the baseline moves.
#[derive(Default)]
struct Lines {
    text: String,
    height: f64,
    /// Where the last glyph ended, its baseline and size; none at a page start.
    last: Option<(f64, f64, f64)>,
}

impl pdf_extract::OutputDev for Lines {
    fn begin_page(
        &mut self,
        _page: u32,
        media_box: &pdf_extract::MediaBox,
        _art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), pdf_extract::OutputError> {
        self.height = media_box.ury - media_box.lly;
        self.last = None;
        Ok(())
    }

    fn end_page(&mut self) -> Result<(), pdf_extract::OutputError> {
        self.text.push('\n');
        Ok(())
    }

    fn output_character(
        &mut self,
        trm: &pdf_extract::Transform,
        width: f64,
        _spacing: f64,
        font_size: f64,
        glyph: &str,
    ) -> Result<(), pdf_extract::OutputError> {
        // The glyph's origin on the page (y downwards) and its size in page units.
        let (x, y) = (trm.m31, self.height - trm.m32);
        let vx = font_size * (trm.m11 + trm.m21);
        let vy = font_size * (trm.m12 + trm.m22);
        let size = (vx * vy).abs().sqrt().max(0.1);
        if let Some((end, base, last_size)) = self.last {
            let size_ref = size.max(last_size);
            if (y - base).abs() > size_ref * 0.6 {
                self.text.push('\n');
                if (y - base).abs() > size_ref * 2.2 {
                    self.text.push('\n');
                }
            } else if (x > end + size_ref * 0.15 || x < end - size_ref * 3.0)
                && !self.text.ends_with([' ', '\n'])
                && !glyph.starts_with(' ')
            {
                self.text.push(' ');
            }
        }
        // Ligature glyphs (ﬁ, ﬂ, …) are the letters they join.
        for c in glyph.chars() {
            match c {
                '\u{FB00}' => self.text.push_str("ff"),
                '\u{FB01}' => self.text.push_str("fi"),
                '\u{FB02}' => self.text.push_str("fl"),
                '\u{FB03}' => self.text.push_str("ffi"),
                '\u{FB04}' => self.text.push_str("ffl"),
                '\u{FB05}' | '\u{FB06}' => self.text.push_str("st"),
                c => self.text.push(c),
            }
        }
        self.last = Some((x + width * size, y, size));
        Ok(())
    }

    fn begin_word(&mut self) -> Result<(), pdf_extract::OutputError> {
        Ok(())
    }

    fn end_word(&mut self) -> Result<(), pdf_extract::OutputError> {
        Ok(())
    }

    fn end_line(&mut self) -> Result<(), pdf_extract::OutputError> {
        Ok(())
    }
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
mod tests {
    use super::*;

    #[test]
    fn pdf_dates_and_strings() {
        assert_eq!(date("D:20230102150405+01'00'"), "2023-01-02T15:04:05+01:00");
        assert_eq!(date("D:20230102"), "2023-01-02");
        assert_eq!(date("yesterday"), "yesterday");
        assert_eq!(text_string(&[0xFE, 0xFF, 0, b'h', 0x4E, 0x2D]), "h中");
        assert_eq!(text_string(b"caf\xe9"), "café");
    }

    #[test]
    fn a_cut_pdf_is_the_callers_error() {
        let e = parse(b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog", &Ranges::default()).unwrap_err();
        assert!(format!("{e:?}").contains("not a readable PDF"), "{e:?}");
    }
}
