//! Tool names of an OpenAPI toolkit: from operationIds (or `method_path`),
//! fitted into the room a tool id has, unique within the toolkit and the
//! same on every load.

use std::collections::HashSet;

/// A tool name from an operationId or `method_path`: lowercase letters,
/// digits and single `_`.
pub fn tool_name(raw: &str) -> String {
    let mut out = String::new();
    for c in raw.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_owned();
    if out.is_empty() { "call".into() } else { out }
}

/// `name` fitted into `room` characters ([`shorten`]) and made unique
/// among `taken` (a second operation with the same name gets `_2`, ...).
pub fn unique(name: &str, room: usize, taken: &mut HashSet<String>) -> String {
    let room = room.max(16);
    let name = shorten(name, room);
    let mut candidate = name.clone();
    let mut n = 2;
    while taken.contains(&candidate) {
        let suffix = format!("_{n}");
        let base: String = name.chars().take(room - suffix.len()).collect();
        let base = base.trim_end_matches('_');
        candidate = format!("{base}{suffix}");
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// `name` (ASCII words joined by `_`) in at most `room` characters: as it
/// is when it fits; else its first word, as many of its last words as fit,
/// and 6 hex digits of its SHA-256. Operation ids tell operations apart at
/// their ends (`..._for_repo` / `..._for_org`) and in their middles: the
/// ends are kept and the hash tells the middles apart, the same way on every
/// load.
pub fn shorten(name: &str, room: usize) -> String {
    if name.len() <= room {
        return name.to_owned();
    }
    let digest = crate::backend::content_hash(name.as_bytes());
    let hash = &digest[..6];
    let budget = room.saturating_sub(hash.len() + 1);
    let words: Vec<&str> = name.split('_').filter(|w| !w.is_empty()).collect();
    let head: String = words[0].chars().take(budget).collect();
    let mut tail: Vec<&str> = Vec::new();
    let mut used = head.len();
    for w in words[1..].iter().rev() {
        if used + 1 + w.len() > budget {
            break;
        }
        used += 1 + w.len();
        tail.push(w);
    }
    tail.reverse();
    let mut out = head;
    for w in tail {
        out.push('_');
        out.push_str(w);
    }
    out.push('_');
    out.push_str(hash);
    out
}
