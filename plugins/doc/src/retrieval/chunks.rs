//! What is indexed: the workspace's documents, and their text cut into chunks.

use std::collections::BTreeMap;
use std::path::Path;

use toolhost_sdk::ToolError;

use super::{CHUNK, Chunk, EXTENSIONS, MAX_FILES, OVERLAP};
use crate::model::{Kind, Ranges};
use crate::source;

/// The workspace's documents: path → (size, modified time in ns). Hidden
/// entries (`.index`, `.storage`, …) are skipped.
pub(super) fn documents(root: &Path) -> Result<BTreeMap<String, (u64, u128)>, ToolError> {
    let mut found = BTreeMap::new();
    let mut stack = vec![(root.to_owned(), String::new(), 0)];
    while let Some((dir, rel, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            // The entry's type comes with the listing; only documents are
            // asked for their size and time (a call in the sandbox each).
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && depth < 12 {
                stack.push((entry.path(), path, depth + 1));
            } else if kind.is_file() {
                let ext = Path::new(&name)
                    .extension()
                    .map(|e| e.to_string_lossy().to_ascii_lowercase())
                    .unwrap_or_default();
                if EXTENSIONS.contains(&ext.as_str()) {
                    let Ok(meta) = entry.metadata() else { continue };
                    let modified = meta
                        .modified()
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map_or(0, |d| d.as_nanos());
                    found.insert(path, (meta.len(), modified));
                    if found.len() > MAX_FILES {
                        return Err(ToolError::invalid_input(format!(
                            "the workspace holds more than {MAX_FILES} documents; pass `files` \
                             to search some of them"
                        )));
                    }
                }
            }
        }
    }
    Ok(found)
}

/// Parse a workspace document and cut its sections into chunks.
pub fn chunk_document(root: &Path, path: &str) -> Result<Vec<Chunk>, ToolError> {
    let src = source::read_file(root, path, source::max_bytes())?;
    let (_, doc) = crate::parse_source(&src, None, &Ranges::default())?;
    let mut out = Vec::new();
    for s in doc.sections {
        let page = (s.kind != Kind::Document).then_some(s.number);
        for text in split(&s.text) {
            out.push(Chunk { page, text });
        }
    }
    Ok(out)
}

/// Cut text into chunks of about [`CHUNK`] characters at paragraph (else line,
/// else word) breaks, each starting [`OVERLAP`] characters before the last ended.
pub fn split(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut start = 0;
    while start < chars.len() {
        let mut end = (start + CHUNK).min(chars.len());
        if end < chars.len() {
            let floor = start + CHUNK / 2;
            let find = |pat: &dyn Fn(usize) -> bool| (floor..end).rev().find(|&i| pat(i));
            if let Some(p) = find(&|i| chars[i] == '\n' && i > 0 && chars[i - 1] == '\n')
                .or_else(|| find(&|i| chars[i] == '\n'))
                .or_else(|| find(&|i| chars[i] == ' '))
            {
                end = p + 1;
            }
        }
        let piece: String = chars[start..end].iter().collect();
        let piece = piece.trim();
        if !piece.is_empty() {
            out.push(piece.to_owned());
        }
        if end >= chars.len() {
            break;
        }
        // Overlap, from a word start.
        let mut next = end.saturating_sub(OVERLAP).max(start + 1);
        while next < end && !chars[next - 1].is_whitespace() {
            next += 1;
        }
        start = next;
    }
    out
}
