//! The keyword index as stored (`keyword.bin`): files, chunks and, for each
//! term, its postings; Okapi BM25 over it.

use std::collections::BTreeMap;

use toolhost_sdk::ToolError;

use super::{B, K1, MAX_FILES};

/// What `keyword.bin` starts with (the format: a dictionary of files, chunks
/// and terms, its length given first, then every term's postings).
const MAGIC: &[u8; 4] = b"THK2";

/// The inverted index: files, chunks (file, index, length in tokens) and for
/// each term (sorted) where its postings (chunk, term frequency) are. Only
/// the dictionary is read when opened; a query reads the postings of its
/// own terms (a 10,000-chunk index is ~5 MB, its dictionary ~190 KB).
pub struct Postings {
    /// The dictionary.
    bytes: Vec<u8>,
    /// Where the postings are read from.
    file: std::cell::RefCell<std::fs::File>,
    pub(super) files: Vec<String>,
    pub(super) chunks: Vec<(u32, u32, u32)>,
    /// Term → (its bytes in the dictionary, byte offset of its postings in
    /// the file, count), sorted by term.
    terms: Vec<(std::ops::Range<usize>, usize, usize)>,
    avg_len: f64,
}

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn damaged() -> ToolError {
    ToolError::failed("the keyword index is damaged; delete .index/doc to rebuild it")
}

impl Postings {
    pub(super) fn encode(
        files: &[String],
        chunks: &[(u32, u32, u32)],
        postings: &BTreeMap<String, Vec<(u32, u32)>>,
    ) -> Vec<u8> {
        let mut b = Vec::new();
        let put = |b: &mut Vec<u8>, v: u32| b.extend_from_slice(&v.to_le_bytes());
        b.extend_from_slice(MAGIC);
        put(&mut b, 0); // the dictionary's length, set below
        put(&mut b, files.len() as u32);
        for f in files {
            put(&mut b, f.len() as u32);
            b.extend_from_slice(f.as_bytes());
        }
        put(&mut b, chunks.len() as u32);
        for &(f, i, n) in chunks {
            put(&mut b, f);
            put(&mut b, i);
            put(&mut b, n);
        }
        put(&mut b, postings.len() as u32);
        let mut offset = 0u32;
        for (term, list) in postings {
            put(&mut b, term.len() as u32);
            b.extend_from_slice(term.as_bytes());
            put(&mut b, offset);
            put(&mut b, list.len() as u32);
            offset += list.len() as u32;
        }
        let head = (b.len() - 8) as u32;
        b[4..8].copy_from_slice(&head.to_le_bytes());
        for list in postings.values() {
            for &(c, n) in list {
                put(&mut b, c);
                put(&mut b, n);
            }
        }
        b
    }

    /// The index of `path`: its dictionary read, its postings left in the
    /// file for [`Postings::bm25`] to read term by term. None when there is
    /// no index in this format (none yet, or an earlier version's: rebuilt
    /// from the chunks); an error when it is damaged.
    pub fn open(path: &std::path::Path) -> Result<Option<Postings>, ToolError> {
        use std::io::Read;
        let io = |e: std::io::Error| ToolError::failed(format!("cannot read the index: {e}"));
        let mut magic = [0u8; 4];
        let Ok(mut file) =
            std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic).map(|()| f))
        else {
            return Ok(None);
        };
        if &magic != MAGIC {
            return Ok(None);
        }
        let size = file.metadata().map_err(io)?.len() as usize;
        let mut length = [0u8; 4];
        file.read_exact(&mut length).map_err(|_| damaged())?;
        let head = u32_at(&length, 0) as usize;
        if head > size - 8 {
            return Err(damaged());
        }
        let mut bytes = [&magic[..], &length[..]].concat();
        bytes.resize(8 + head, 0);
        file.read_exact(&mut bytes[8..]).map_err(io)?;
        Postings::dictionary(bytes, size, file).map(Some)
    }

    /// Parse the dictionary `bytes` of `file` (`size` bytes), checking that
    /// every term's postings lie within the file.
    fn dictionary(bytes: Vec<u8>, size: usize, file: std::fs::File) -> Result<Postings, ToolError> {
        let base = 8 + u32_at(&bytes, 4) as usize;
        if bytes.len() < base {
            return Err(damaged());
        }
        let mut at = 8;
        let next = |at: &mut usize| {
            let v = u32_at(&bytes[..base], *at) as usize;
            *at += 4;
            v
        };
        let n_files = next(&mut at);
        let mut files = Vec::with_capacity(n_files.min(MAX_FILES));
        for _ in 0..n_files {
            let len = next(&mut at);
            let name = at
                .checked_add(len)
                .and_then(|end| bytes.get(at..end))
                .ok_or_else(damaged)?;
            files.push(String::from_utf8_lossy(name).into_owned());
            at += len;
        }
        let n_chunks = next(&mut at);
        if n_chunks
            .checked_mul(12)
            .and_then(|n| n.checked_add(at))
            .is_none_or(|end| end > base)
        {
            return Err(damaged());
        }
        let mut chunks = Vec::with_capacity(n_chunks);
        let mut total_len = 0u64;
        for _ in 0..n_chunks {
            let c = (
                next(&mut at) as u32,
                next(&mut at) as u32,
                next(&mut at) as u32,
            );
            if c.0 as usize >= files.len() {
                return Err(damaged());
            }
            total_len += u64::from(c.2);
            chunks.push(c);
        }
        let n_terms = next(&mut at);
        let mut terms = Vec::with_capacity(n_terms.min(base / 12));
        for _ in 0..n_terms {
            let len = next(&mut at);
            let end = at
                .checked_add(len)
                .filter(|&e| e <= base)
                .ok_or_else(damaged)?;
            let range = at..end;
            at = end;
            let (off, count) = (next(&mut at), next(&mut at));
            // Where its postings are, within the file (a damaged index must
            // not make this overflow or read past the end).
            let start = off.checked_mul(8).and_then(|o| o.checked_add(base));
            let stop = count
                .checked_mul(8)
                .zip(start)
                .and_then(|(n, s)| s.checked_add(n));
            match (start, stop) {
                (Some(start), Some(stop)) if stop <= size => terms.push((range, start, count)),
                _ => return Err(damaged()),
            }
        }
        if at > base {
            return Err(damaged());
        }
        Ok(Postings {
            bytes,
            file: std::cell::RefCell::new(file),
            files,
            avg_len: total_len as f64 / n_chunks.max(1) as f64,
            chunks,
            terms,
        })
    }

    /// The postings of the term at `at` (byte offset), `count` of them:
    /// (chunk, term frequency) pairs, 8 bytes each.
    fn read(&self, at: usize, count: usize) -> Result<Vec<u8>, ToolError> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = self.file.borrow_mut();
        let mut out = vec![0u8; count * 8];
        file.seek(SeekFrom::Start(at as u64))
            .and_then(|_| file.read_exact(&mut out))
            .map_err(|_| damaged())?;
        Ok(out)
    }

    fn term(&self, t: &str) -> Option<(usize, usize)> {
        self.terms
            .binary_search_by(|(r, _, _)| self.bytes[r.clone()].cmp(t.as_bytes()))
            .ok()
            .map(|i| (self.terms[i].1, self.terms[i].2))
    }

    /// Okapi BM25 of `terms` over chunks whose file passes `keep`: the best
    /// `want`, best first (equal scores by chunk id).
    pub fn bm25(
        &self,
        terms: &[String],
        keep: impl Fn(usize) -> bool,
        want: usize,
    ) -> Result<Vec<(usize, f64)>, ToolError> {
        let n = self.chunks.len() as f64;
        // Scores by chunk id, and the chunks scored: a query's whole cost
        // is small enough that hashing each posting showed (a tenth of it).
        let mut scores = vec![0f64; self.chunks.len()];
        let mut scored = vec![false; self.chunks.len()];
        let mut touched = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for t in terms {
            if !seen.insert(t) {
                continue;
            }
            let Some((at, count)) = self.term(t) else {
                continue;
            };
            let idf = ((n - count as f64 + 0.5) / (count as f64 + 0.5) + 1.0).ln();
            let list = self.read(at, count)?;
            for pair in list.chunks_exact(8) {
                let chunk = u32_at(pair, 0) as usize;
                let tf = f64::from(u32_at(pair, 4));
                let Some(&(_, _, len)) = self.chunks.get(chunk) else {
                    return Err(damaged());
                };
                let len = f64::from(len);
                let s = idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / self.avg_len));
                if !scored[chunk] {
                    scored[chunk] = true;
                    touched.push(chunk);
                }
                scores[chunk] += s;
            }
        }
        let mut ranked: Vec<(usize, f64)> = touched
            .into_iter()
            .filter(|&c| keep(self.chunks[c].0 as usize))
            .map(|c| (c, scores[c]))
            .collect();
        let order = |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        // Only the best `want` are put in order (a common word scores
        // thousands of chunks).
        if want == 0 {
            return Ok(Vec::new());
        }
        if ranked.len() > want {
            ranked.select_nth_unstable_by(want - 1, order);
            ranked.truncate(want);
        }
        ranked.sort_unstable_by(order);
        Ok(ranked)
    }
}
