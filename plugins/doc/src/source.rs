//! Where a document comes from (a workspace file, a URL, base64) and what
//! format its bytes are.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolhost_sdk::{ToolError, http};

/// Largest document read, bytes (manifest `[config] max_document_mb`).
pub fn max_bytes() -> usize {
    toolhost_sdk::host::config("max_document_mb")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(32)
        << 20
}

/// The formats read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Pdf,
    Docx,
    Pptx,
    Xlsx,
    Html,
    Markdown,
    Text,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Pdf => "pdf",
            Format::Docx => "docx",
            Format::Pptx => "pptx",
            Format::Xlsx => "xlsx",
            Format::Html => "html",
            Format::Markdown => "markdown",
            Format::Text => "text",
        }
    }
}

/// A document's bytes and what is known of their name and type.
pub struct Source {
    pub bytes: Vec<u8>,
    /// The workspace path or URL.
    pub name: String,
    pub content_type: Option<String>,
}

/// A path inside the workspace `root`: relative, no `..`.
pub fn workspace_path(root: &Path, rel: &str) -> Result<PathBuf, ToolError> {
    let p = Path::new(rel);
    if rel.is_empty()
        || p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(ToolError::invalid_input(format!(
            "`{rel}` is not a path inside the workspace (relative, without `..`)"
        )));
    }
    Ok(root.join(p))
}

/// Read a workspace file, refusing one larger than `max` before reading it.
pub fn read_file(root: &Path, rel: &str, max: usize) -> Result<Source, ToolError> {
    let path = workspace_path(root, rel)?;
    let file = std::fs::File::open(&path)
        .map_err(|e| ToolError::invalid_input(format!("cannot open `{rel}`: {e}")))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > max as u64 {
        return Err(too_large(rel, len, max));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::invalid_input(format!("cannot read `{rel}`: {e}")))?;
    if bytes.len() > max {
        return Err(too_large(rel, bytes.len() as u64, max));
    }
    Ok(Source {
        bytes,
        name: rel.to_owned(),
        content_type: None,
    })
}

fn too_large(what: &str, len: u64, max: usize) -> ToolError {
    ToolError::invalid_input(format!(
        "`{what}` is {:.1} MB; documents up to {} MB are read (the plugin's \
         [config] max_document_mb)",
        len as f64 / 1e6,
        max >> 20
    ))
}

/// Download `url` (the plugin's allow-list applies), at most `max` bytes.
pub fn download(url: &str, max: usize) -> Result<Source, ToolError> {
    let url = http::parse_url(url)?;
    toolhost_sdk::host::progress(&format!("GET {url}"), None, None);
    let response = http::get(&url, "toolhost-doc/0.1", max, "doc")?;
    if response.cut {
        return Err(too_large(url.as_str(), response.body.len() as u64 + 1, max));
    }
    if !(200..300).contains(&response.status) {
        return Err(ToolError::failed(format!(
            "{url} answered HTTP {}",
            response.status
        )));
    }
    Ok(Source {
        bytes: response.body,
        name: url.to_string(),
        content_type: response.content_type,
    })
}

/// Decode base64 content (standard alphabet, padding optional, whitespace
/// ignored).
pub fn decode(data: &str, name: Option<&str>, max: usize) -> Result<Source, ToolError> {
    let clean: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    if clean.len() / 4 * 3 > max + 3 {
        return Err(too_large("base64", (clean.len() / 4 * 3) as u64, max));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(clean.trim_end_matches('='))
        .or_else(|_| {
            base64::engine::general_purpose::STANDARD_NO_PAD.decode(clean.trim_end_matches('='))
        })
        .map_err(|e| ToolError::invalid_input(format!("`base64` is not base64: {e}")))?;
    Ok(Source {
        bytes,
        name: name.unwrap_or("base64").to_owned(),
        content_type: None,
    })
}

/// The format of `source`: `given` if the caller said, else from the bytes
/// (magic numbers, the ZIP's parts), the name's extension and the content type.
pub fn detect(source: &Source, given: Option<Format>) -> Result<Format, ToolError> {
    if let Some(f) = given {
        return Ok(f);
    }
    let b = &source.bytes;
    let head = &b[..b.len().min(1024)];
    if find(head, b"%PDF-").is_some() {
        return Ok(Format::Pdf);
    }
    if b.starts_with(b"PK\x03\x04") {
        return zip_kind(b);
    }
    if b.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) {
        return Err(ToolError::invalid_input(
            "this is a legacy binary Office file (.doc, .xls, .ppt): save it as .docx, \
             .xlsx or .pptx",
        ));
    }
    let ext = extension(&source.name);
    if matches!(ext.as_str(), "pdf" | "docx" | "pptx" | "xlsx") {
        return Err(ToolError::invalid_input(format!(
            "`{}` is named .{ext} but its bytes are not a {ext} document (damaged or \
             mis-named)",
            source.name
        )));
    }
    let ctype = source.content_type.as_deref().unwrap_or("");
    if matches!(ext.as_str(), "html" | "htm" | "xhtml") || ctype.contains("html") {
        return Ok(Format::Html);
    }
    if matches!(ext.as_str(), "md" | "markdown") || ctype.contains("markdown") {
        return Ok(Format::Markdown);
    }
    let text = String::from_utf8_lossy(&head[..head.len().min(512)]).to_ascii_lowercase();
    let text = text.trim_start_matches('\u{feff}').trim_start();
    if text.starts_with("<!doctype html") || text.starts_with("<html") {
        return Ok(Format::Html);
    }
    if looks_textual(head) {
        return Ok(Format::Text);
    }
    Err(ToolError::invalid_input(format!(
        "`{}` is not a format this tool reads (PDF, DOCX, PPTX, XLSX, HTML, Markdown, text)",
        source.name
    )))
}

/// Which Office Open XML document a ZIP holds, by its main part.
fn zip_kind(bytes: &[u8]) -> Result<Format, ToolError> {
    let archive = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| ToolError::invalid_input(format!("a damaged ZIP archive: {e}")))?;
    let has = |name: &str| archive.index_for_name(name).is_some();
    if has("word/document.xml") {
        Ok(Format::Docx)
    } else if has("ppt/presentation.xml") {
        Ok(Format::Pptx)
    } else if has("xl/workbook.xml") {
        Ok(Format::Xlsx)
    } else {
        Err(ToolError::invalid_input(
            "a ZIP archive that is not a DOCX, PPTX or XLSX document (OpenDocument files: \
             save them as Office Open XML)",
        ))
    }
}

fn extension(name: &str) -> String {
    let name = name.split(['?', '#']).next().unwrap_or(name);
    Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

/// Mostly printable UTF-8 (or UTF-16 with a BOM)?
fn looks_textual(head: &[u8]) -> bool {
    if head.starts_with(&[0xFF, 0xFE]) || head.starts_with(&[0xFE, 0xFF]) {
        return true;
    }
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        // A multi-byte character cut at the end of the window.
        Err(e) if e.valid_up_to() + 4 >= head.len() => {
            std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return false,
    };
    let control = text
        .chars()
        .filter(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t' | '\x0c'))
        .count();
    control * 100 <= text.chars().count().max(1)
}

/// Text of a document read as text: UTF-8 (a BOM dropped), or UTF-16 with a BOM.
pub fn text_of(bytes: &[u8]) -> String {
    let utf16 = |le: bool| {
        let units: Vec<u16> = bytes[2..]
            .chunks_exact(2)
            .map(|c| {
                if le {
                    u16::from_le_bytes([c[0], c[1]])
                } else {
                    u16::from_be_bytes([c[0], c[1]])
                }
            })
            .collect();
        String::from_utf16_lossy(&units)
    };
    if bytes.starts_with(&[0xFF, 0xFE]) {
        utf16(true)
    } else if bytes.starts_with(&[0xFE, 0xFF]) {
        utf16(false)
    } else {
        let text = String::from_utf8_lossy(bytes);
        text.strip_prefix('\u{feff}')
            .map(str::to_owned)
            .unwrap_or_else(|| text.into_owned())
    }
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(bytes: &[u8], name: &str) -> Source {
        Source {
            bytes: bytes.to_vec(),
            name: name.to_owned(),
            content_type: None,
        }
    }

    #[test]
    fn formats_are_told_by_their_bytes_first() {
        assert_eq!(
            detect(&src(b"%PDF-1.7\n...", "x.txt"), None).unwrap(),
            Format::Pdf
        );
        assert_eq!(
            detect(&src(b"<!DOCTYPE html><p>x", "page"), None).unwrap(),
            Format::Html
        );
        assert_eq!(
            detect(&src(b"# Title\n\ntext", "notes.md"), None).unwrap(),
            Format::Markdown
        );
        assert_eq!(
            detect(&src("plain 文字".as_bytes(), "a"), None).unwrap(),
            Format::Text
        );
        let e = detect(&src(&[0xD0, 0xCF, 0x11, 0xE0, 0, 0], "old.doc"), None).unwrap_err();
        assert!(format!("{e:?}").contains("legacy binary Office"), "{e:?}");
        let e = detect(&src(&[0, 1, 2, 3, 0xff, 0xfe, 0, 0, 9], "x.pdf"), None).unwrap_err();
        assert!(format!("{e:?}").contains("not a pdf document"), "{e:?}");
        let e = detect(&src(b"PK\x03\x04garbage", "x.docx"), None).unwrap_err();
        assert!(format!("{e:?}").contains("damaged ZIP"), "{e:?}");
    }

    #[test]
    fn paths_stay_inside_the_workspace() {
        let root = Path::new("/w");
        assert!(workspace_path(root, "a/b.pdf").is_ok());
        for bad in ["", "../x", "/etc/passwd", "a/../../x"] {
            assert!(workspace_path(root, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn text_decodes_boms() {
        assert_eq!(text_of("\u{feff}hi".as_bytes()), "hi");
        assert_eq!(text_of(&[0xFF, 0xFE, b'h', 0, b'i', 0]), "hi");
    }
}
