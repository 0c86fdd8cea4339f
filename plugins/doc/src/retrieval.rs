//! Retrieval over the documents of a session's workspace (Qwen-Agent's
//! `retrieval`): documents are parsed and cut into chunks on first use, kept
//! under `.index/doc/` in the workspace, and only files whose size or time
//! changed are parsed again. Keyword search is BM25 over a binary inverted
//! index; vector search uses embeddings from an OpenAI-compatible endpoint
//! when one is configured; hybrid fuses both rankings (reciprocal rank fusion).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolhost_sdk::ToolError;

use crate::model::{Kind, Ranges};
use crate::source;
use crate::tokens::Tokenizer;

/// The index's folder in the workspace.
pub const INDEX_DIR: &str = ".index/doc";
/// Extensions of the files indexed.
const EXTENSIONS: &[&str] = &[
    "pdf", "docx", "pptx", "xlsx", "html", "htm", "md", "markdown", "txt",
];
/// Most files indexed in one workspace.
const MAX_FILES: usize = 2000;
/// Chunk size and overlap, characters.
const CHUNK: usize = 1000;
const OVERLAP: usize = 150;
/// Reciprocal rank fusion's constant.
const RRF_K: f64 = 60.0;
/// BM25 parameters.
const K1: f64 = 1.2;
const B: f64 = 0.75;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Keyword,
    Vector,
    Hybrid,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    /// What to look for, in words (any language).
    pub query: String,
    /// Files or folders of the workspace to search (default: every document in it).
    pub files: Option<Vec<String>>,
    /// keyword (BM25), vector (embeddings) or hybrid (both fused). Default:
    /// hybrid when embeddings are configured, else keyword.
    pub mode: Option<Mode>,
    /// How many passages to answer (default 5, at most 50).
    #[schemars(range(min = 1, max = 50))]
    pub top_k: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchOutput {
    pub query: String,
    /// The mode used (keyword when no embeddings are configured).
    pub mode: Mode,
    /// Why the mode used is not the one asked for, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub results: Vec<Hit>,
    pub index: IndexReport,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Hit {
    /// The workspace file.
    pub file: String,
    /// Its page, slide or sheet (1-based), for documents that have them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<usize>,
    /// BM25 score (keyword), cosine similarity (vector), or fused score (hybrid).
    pub score: f64,
    /// The passage.
    pub text: String,
}

#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct IndexReport {
    /// Documents and chunks in the index.
    pub files: usize,
    pub chunks: usize,
    /// Files parsed again by this call (new or changed), and files forgotten.
    pub updated: Vec<String>,
    pub removed: Vec<String>,
    /// Files that could not be read (or embedded, this call), with the reason.
    pub failed: Vec<Failure>,
    /// Chunks still without a vector (embedded a few per call); keyword
    /// search finds them meanwhile.
    pub pending_vectors: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Failure {
    pub file: String,
    pub error: String,
}

/// What the index knows of each file.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    version: u32,
    /// The embedding model the vectors were made with, if any.
    model: Option<String>,
    files: BTreeMap<String, FileEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct FileEntry {
    size: u64,
    modified_ns: u128,
    chunks: usize,
    /// How many of its chunks (the first ones) have vectors.
    #[serde(default)]
    embedded: usize,
    error: Option<String>,
}

/// One file's chunks, `chunks/<hex of path>.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct FileChunks {
    path: String,
    chunks: Vec<Chunk>,
    /// Little-endian f32 vectors, `dims` each, base64.
    #[serde(default)]
    vectors: Option<String>,
    #[serde(default)]
    dims: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Chunk {
    /// Page, slide or sheet number; none for documents without pages.
    pub page: Option<usize>,
    pub text: String,
}

const STATE_VERSION: u32 = 2;

pub fn search(root: &Path, input: SearchInput) -> Result<SearchOutput, ToolError> {
    let query = input.query.trim().to_owned();
    if query.is_empty() || query.chars().count() > 2000 {
        return Err(ToolError::invalid_input(
            "`query` must be 1 to 2000 characters",
        ));
    }
    let top_k = input.top_k.unwrap_or(5).clamp(1, 50);
    let embedder = Embedder::configured();
    let mut index = Index::open(root)?;
    // Keyword searches never wait for embeddings.
    let embed_now = input.mode != Some(Mode::Keyword);
    let report = index.sync(embedder.as_ref(), embed_now)?;
    let scope = Scope::new(input.files.as_deref());

    let (mode, note) = match (input.mode, &embedder) {
        (Some(Mode::Keyword), _) => (Mode::Keyword, None),
        (Some(m), Some(_)) => (m, None),
        (None, Some(_)) => (Mode::Hybrid, None),
        (asked, None) => (
            Mode::Keyword,
            asked.map(|_| {
                "no embedding model is configured (the plugin's [config] embeddings_url): \
                 keyword search only"
                    .to_owned()
            }),
        ),
    };
    let want = top_k * 4;
    let (mut mode, mut note) = (mode, note);
    // Fused with a partial vector ranking, the chunks embedded first would
    // crowd out the rest: hybrid waits until every chunk has its vector.
    if mode == Mode::Hybrid && report.pending_vectors > 0 {
        mode = Mode::Keyword;
        note = Some(format!(
            "hybrid search waits for every chunk's vector ({} of {} pending, {} \
             embedded per call): keyword results",
            report.pending_vectors,
            report.chunks,
            embedder.as_ref().map_or(0, |e| e.per_call)
        ));
    }
    let vectors = match (mode, &embedder) {
        (Mode::Vector | Mode::Hybrid, Some(e)) => match index.vector(e, &query, &scope, want) {
            Ok(v) => Some(v),
            // The endpoint failing is no reason to answer nothing.
            Err(err) => {
                note = Some(format!(
                    "vector search failed ({}): keyword results",
                    message(&err)
                ));
                mode = Mode::Keyword;
                None
            }
        },
        _ => None,
    };
    let ranked: Vec<(usize, f64)> = match (mode, vectors) {
        (Mode::Vector, Some(v)) => v,
        (Mode::Hybrid, Some(v)) => fuse(&[index.keyword(&query, &scope, want)?, v]),
        _ => index.keyword(&query, &scope, want)?,
    };
    if mode != Mode::Keyword && report.pending_vectors > 0 {
        let pending = format!(
            "{} of {} chunks have no vector yet ({} are embedded per call): keyword \
             search finds them meanwhile",
            report.pending_vectors,
            report.chunks,
            embedder.as_ref().map_or(0, |e| e.per_call)
        );
        note = Some(match note {
            Some(n) => format!("{n}; {pending}"),
            None => pending,
        });
    }
    let results = index.hits(&ranked[..ranked.len().min(top_k)])?;
    Ok(SearchOutput {
        query,
        mode,
        note,
        results,
        index: report,
    })
}

/// Reciprocal rank fusion of rankings of chunk ids.
fn fuse(rankings: &[Vec<(usize, f64)>]) -> Vec<(usize, f64)> {
    let mut score: HashMap<usize, f64> = HashMap::new();
    for ranking in rankings {
        for (rank, (id, _)) in ranking.iter().enumerate() {
            *score.entry(*id).or_default() += 1.0 / (RRF_K + rank as f64 + 1.0);
        }
    }
    let mut fused: Vec<(usize, f64)> = score.into_iter().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused
}

/// Which files a search covers: paths or folder prefixes.
pub struct Scope(Option<Vec<String>>);

impl Scope {
    pub fn new(files: Option<&[String]>) -> Scope {
        Scope(files.map(|f| {
            f.iter()
                .map(|p| p.trim_start_matches("./").trim_end_matches('/').to_owned())
                .collect()
        }))
    }

    fn covers(&self, file: &str) -> bool {
        self.0.as_ref().is_none_or(|list| {
            list.iter().any(|p| {
                p.is_empty() || p == "." || file == p || file.starts_with(&format!("{p}/"))
            })
        })
    }
}

/// The index of one workspace.
pub struct Index {
    root: PathBuf,
    dir: PathBuf,
    state: State,
    /// Chunk ids → (file, chunk index within it), in `keyword.bin`'s order.
    table: Option<Postings>,
}

impl Index {
    pub fn open(root: &Path) -> Result<Index, ToolError> {
        let dir = root.join(INDEX_DIR);
        let state = std::fs::read(dir.join("state.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<State>(&b).ok())
            .filter(|s| s.version == STATE_VERSION)
            .unwrap_or(State {
                version: STATE_VERSION,
                ..State::default()
            });
        Ok(Index {
            root: root.to_owned(),
            dir,
            state,
            table: None,
        })
    }

    fn chunk_file(&self, path: &str) -> PathBuf {
        let hex: String = path.bytes().map(|b| format!("{b:02x}")).collect();
        // Long paths: a hash keeps the name short and still one per path.
        let name = if hex.len() > 200 {
            format!("{:016x}", fnv(path.as_bytes()))
        } else {
            hex
        };
        self.dir.join("chunks").join(name + ".json")
    }

    /// Bring the index up to date with the workspace: parse new and changed
    /// documents, forget deleted ones, rebuild the search structures if
    /// anything changed.
    /// With `embed_now`, chunks without vectors are embedded (a budget per
    /// call).
    pub fn sync(
        &mut self,
        embedder: Option<&Embedder>,
        embed_now: bool,
    ) -> Result<IndexReport, ToolError> {
        let mut report = IndexReport::default();
        let found = documents(&self.root)?;
        let model = embedder.map(|e| e.model.clone());
        // A different embedding model makes every vector stale.
        let mut changed = self.state.model != model;
        if changed {
            self.state.files.clear();
            self.state.model = model;
        }
        std::fs::create_dir_all(self.dir.join("chunks")).map_err(io("create the index folder"))?;
        let gone: Vec<String> = self
            .state
            .files
            .keys()
            .filter(|p| !found.contains_key(*p))
            .cloned()
            .collect();
        for path in gone {
            self.state.files.remove(&path);
            let _ = std::fs::remove_file(self.chunk_file(&path));
            report.removed.push(path);
            changed = true;
        }
        let total = found.len();
        for (n, (path, (size, modified_ns))) in found.iter().enumerate() {
            let known = self.state.files.get(path);
            if known.is_some_and(|k| k.size == *size && k.modified_ns == *modified_ns) {
                if let Some(error) = known.and_then(|k| k.error.clone()) {
                    report.failed.push(Failure {
                        file: path.clone(),
                        error,
                    });
                }
                continue;
            }
            changed = true;
            toolhost_sdk::host::progress(
                &format!("indexing {path}"),
                Some(n as f64),
                Some(total as f64),
            );
            let (chunks, error) = match chunk_document(&self.root, path) {
                Ok(chunks) => (chunks, None),
                Err(e) => (Vec::new(), Some(message(&e))),
            };
            if let Some(error) = &error {
                report.failed.push(Failure {
                    file: path.clone(),
                    error: error.clone(),
                });
            }
            let record = FileChunks {
                path: path.clone(),
                chunks,
                ..FileChunks::default()
            };
            write_json(&self.chunk_file(path), &record)?;
            self.state.files.insert(
                path.clone(),
                FileEntry {
                    size: *size,
                    modified_ns: *modified_ns,
                    chunks: record.chunks.len(),
                    embedded: 0,
                    error,
                },
            );
            report.updated.push(path.clone());
        }
        if let Some(e) = embedder.filter(|_| embed_now) {
            changed |= self.embed_some(e, &mut report)?;
        }
        report.pending_vectors = match embedder {
            Some(_) => self
                .state
                .files
                .values()
                .map(|f| f.chunks - f.embedded.min(f.chunks))
                .sum(),
            None => 0,
        };
        if changed || !self.dir.join("keyword.bin").exists() {
            self.rebuild()?;
            write_json(&self.dir.join("state.json"), &self.state)?;
        }
        report.files = self.state.files.len();
        report.chunks = self.state.files.values().map(|f| f.chunks).sum();
        Ok(report)
    }

    /// Embed the chunks that have no vector yet, at most the embedder's
    /// budget for one call (a local model is slow in the sandbox: the rest
    /// waits for the next calls, found by keyword meanwhile). Whether any
    /// vector was added. An embedding failure is this call's (listed in
    /// `failed`); the chunks are tried again on the next call.
    fn embed_some(&mut self, e: &Embedder, report: &mut IndexReport) -> Result<bool, ToolError> {
        let mut budget = e.per_call;
        let mut added = false;
        let waiting: Vec<String> = self
            .state
            .files
            .iter()
            .filter(|(_, f)| f.error.is_none() && f.embedded < f.chunks)
            .map(|(p, _)| p.clone())
            .collect();
        for path in waiting {
            if budget == 0 {
                break;
            }
            let mut record = self.load_chunks(&path)?;
            let entry = self.state.files.get_mut(&path).expect("listed above");
            let from = entry.embedded.min(record.chunks.len());
            let to = (from + budget).min(record.chunks.len());
            let texts: Vec<&str> = record.chunks[from..to]
                .iter()
                .map(|c| c.text.as_str())
                .collect();
            toolhost_sdk::host::progress(&format!("embedding {path} ({from}..{to})"), None, None);
            let vectors = match e.embed(&texts) {
                Ok(v) => v,
                Err(err) => {
                    report.failed.push(Failure {
                        file: path.clone(),
                        error: format!("embeddings: {}", message(&err)),
                    });
                    break;
                }
            };
            let dims = vectors.first().map_or(0, Vec::len);
            let mut bytes = record
                .vectors
                .as_deref()
                .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
                .filter(|b| record.dims == dims && b.len() == from * dims * 4)
                .unwrap_or_default();
            if bytes.is_empty() && from > 0 {
                // Stale or damaged: start this file again.
                entry.embedded = 0;
                continue;
            }
            bytes.extend(vectors.iter().flatten().flat_map(|f| f.to_le_bytes()));
            record.dims = dims;
            record.vectors = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
            write_json(&self.chunk_file(&path), &record)?;
            let entry = self.state.files.get_mut(&path).expect("listed above");
            entry.embedded = to;
            budget -= to - from;
            added = true;
        }
        Ok(added)
    }

    fn load_chunks(&self, path: &str) -> Result<FileChunks, ToolError> {
        let bytes = std::fs::read(self.chunk_file(path)).map_err(io("read the index"))?;
        serde_json::from_slice(&bytes)
            .map_err(|e| ToolError::failed(format!("the index of `{path}` is damaged: {e}")))
    }

    /// Write `keyword.bin` (and `vectors.bin`) from every file's chunks.
    fn rebuild(&mut self) -> Result<(), ToolError> {
        let tokenizer = Tokenizer::default();
        let mut files = Vec::new();
        let mut chunk_table = Vec::new();
        let mut postings: BTreeMap<String, Vec<(u32, u32)>> = BTreeMap::new();
        let mut vectors: Vec<u8> = Vec::new();
        let mut dims = 0usize;
        let paths: Vec<String> = self.state.files.keys().cloned().collect();
        for path in paths {
            let record = self.load_chunks(&path)?;
            let file_id = files.len() as u32;
            files.push(path.clone());
            let vecs = record
                .vectors
                .as_deref()
                .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok());
            for (i, chunk) in record.chunks.iter().enumerate() {
                let id = chunk_table.len() as u32;
                let tokens = tokenizer.tokens(&chunk.text);
                let mut tf: HashMap<&str, u32> = HashMap::new();
                for t in &tokens {
                    *tf.entry(t.as_str()).or_default() += 1;
                }
                for (t, n) in tf {
                    postings.entry(t.to_owned()).or_default().push((id, n));
                }
                chunk_table.push((file_id, i as u32, tokens.len() as u32));
                if record.dims > 0 {
                    dims = record.dims;
                }
                match &vecs {
                    Some(v) if record.dims == dims && v.len() >= (i + 1) * dims * 4 => {
                        vectors.extend_from_slice(&v[i * dims * 4..(i + 1) * dims * 4]);
                    }
                    _ => vectors.extend(std::iter::repeat_n(0u8, dims * 4)),
                }
            }
        }
        let bin = Postings::encode(&files, &chunk_table, &postings);
        write_file(&self.dir.join("keyword.bin"), &bin)?;
        let mut vbin = Vec::with_capacity(vectors.len() + 12);
        vbin.extend_from_slice(b"THVE");
        vbin.extend_from_slice(&(chunk_table.len() as u32).to_le_bytes());
        vbin.extend_from_slice(&(dims as u32).to_le_bytes());
        vbin.extend_from_slice(&vectors);
        write_file(&self.dir.join("vectors.bin"), &vbin)?;
        self.table = None;
        Ok(())
    }

    fn postings(&mut self) -> Result<&Postings, ToolError> {
        if self.table.is_none() {
            let bytes =
                std::fs::read(self.dir.join("keyword.bin")).map_err(io("read the index"))?;
            self.table = Some(Postings::decode(bytes)?);
        }
        Ok(self.table.as_ref().expect("just loaded"))
    }

    /// BM25 over the query's tokens: chunk ids with scores, best first.
    pub fn keyword(
        &mut self,
        query: &str,
        scope: &Scope,
        want: usize,
    ) -> Result<Vec<(usize, f64)>, ToolError> {
        let terms = Tokenizer::default().tokens(query);
        let p = self.postings()?;
        Ok(p.bm25(&terms, |file| scope.covers(&p.files[file]), want))
    }

    /// Cosine similarity with the query's embedding, best first.
    fn vector(
        &mut self,
        e: &Embedder,
        query: &str,
        scope: &Scope,
        want: usize,
    ) -> Result<Vec<(usize, f64)>, ToolError> {
        let q = e.embed(&[query])?.pop().unwrap_or_default();
        let bytes = std::fs::read(self.dir.join("vectors.bin")).map_err(io("read the index"))?;
        let n = u32_at(&bytes, 4) as usize;
        let dims = u32_at(&bytes, 8) as usize;
        if dims == 0 || dims != q.len() || bytes.len() < 12 + n * dims * 4 {
            return Ok(Vec::new());
        }
        let p = self.postings()?;
        let mut scored: Vec<(usize, f64)> = (0..n)
            .filter(|&i| scope.covers(&p.files[p.chunks[i].0 as usize]))
            .map(|i| {
                let v = &bytes[12 + i * dims * 4..12 + (i + 1) * dims * 4];
                let mut dot = 0f32;
                let mut norm = 0f32;
                for (k, x) in v.chunks_exact(4).enumerate() {
                    let x = f32::from_le_bytes([x[0], x[1], x[2], x[3]]);
                    dot += x * q[k];
                    norm += x * x;
                }
                let qn: f32 = q.iter().map(|x| x * x).sum();
                let denom = (norm * qn).sqrt();
                (i, (denom > 0.0).then(|| f64::from(dot / denom)))
            })
            // Chunks not embedded yet have no vector: keyword finds them.
            .filter_map(|(i, score)| Some((i, score?)))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(want);
        Ok(scored)
    }

    /// The passages of ranked chunk ids.
    fn hits(&mut self, ranked: &[(usize, f64)]) -> Result<Vec<Hit>, ToolError> {
        let p = self.postings()?;
        let wanted: Vec<(String, usize, f64)> = ranked
            .iter()
            .map(|&(id, score)| {
                let (file, idx, _) = p.chunks[id];
                (p.files[file as usize].clone(), idx as usize, score)
            })
            .collect();
        let mut loaded: HashMap<String, FileChunks> = HashMap::new();
        let mut hits = Vec::new();
        for (file, idx, score) in wanted {
            if !loaded.contains_key(&file) {
                let record = self.load_chunks(&file)?;
                loaded.insert(file.clone(), record);
            }
            if let Some(chunk) = loaded[&file].chunks.get(idx) {
                hits.push(Hit {
                    file,
                    page: chunk.page,
                    score: (score * 10_000.0).round() / 10_000.0,
                    text: chunk.text.clone(),
                });
            }
        }
        Ok(hits)
    }
}

/// The inverted index as stored: files, chunks (file, index, length in
/// tokens) and for each term (sorted) its postings (chunk, term frequency).
pub struct Postings {
    bytes: Vec<u8>,
    files: Vec<String>,
    chunks: Vec<(u32, u32, u32)>,
    /// Term → (offset of its postings, count), sorted by term.
    terms: Vec<(std::ops::Range<usize>, usize, usize)>,
    avg_len: f64,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

impl Postings {
    fn encode(
        files: &[String],
        chunks: &[(u32, u32, u32)],
        postings: &BTreeMap<String, Vec<(u32, u32)>>,
    ) -> Vec<u8> {
        let mut b = Vec::new();
        let put = |b: &mut Vec<u8>, v: u32| b.extend_from_slice(&v.to_le_bytes());
        b.extend_from_slice(b"THKW");
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
        for list in postings.values() {
            for &(c, n) in list {
                put(&mut b, c);
                put(&mut b, n);
            }
        }
        b
    }

    pub fn decode(bytes: Vec<u8>) -> Result<Postings, ToolError> {
        let damaged =
            || ToolError::failed("the keyword index is damaged; delete .index/doc to rebuild it");
        if !bytes.starts_with(b"THKW") {
            return Err(damaged());
        }
        let mut at = 4;
        let next = |at: &mut usize| {
            let v = u32_at(&bytes, *at) as usize;
            *at += 4;
            v
        };
        let n_files = next(&mut at);
        let mut files = Vec::with_capacity(n_files.min(MAX_FILES));
        for _ in 0..n_files {
            let len = next(&mut at);
            let name = bytes.get(at..at + len).ok_or_else(damaged)?;
            files.push(String::from_utf8_lossy(name).into_owned());
            at += len;
        }
        let n_chunks = next(&mut at);
        if bytes.len() < at + n_chunks * 12 {
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
        let mut terms = Vec::with_capacity(n_terms.min(bytes.len() / 12));
        for _ in 0..n_terms {
            let len = next(&mut at);
            let range = at..at + len;
            at += len;
            let (off, count) = (next(&mut at), next(&mut at));
            terms.push((range, off, count));
        }
        let base = at;
        let last = terms.last().map_or(0, |t| t.1 + t.2);
        if bytes.len() < base + last * 8 {
            return Err(damaged());
        }
        // Postings offsets become byte offsets.
        for t in &mut terms {
            t.1 = base + t.1 * 8;
        }
        Ok(Postings {
            bytes,
            files,
            avg_len: total_len as f64 / n_chunks.max(1) as f64,
            chunks,
            terms,
        })
    }

    fn term(&self, t: &str) -> Option<(usize, usize)> {
        self.terms
            .binary_search_by(|(r, _, _)| self.bytes[r.clone()].cmp(t.as_bytes()))
            .ok()
            .map(|i| (self.terms[i].1, self.terms[i].2))
    }

    /// Okapi BM25 of `terms` over chunks whose file passes `keep`.
    pub fn bm25(
        &self,
        terms: &[String],
        keep: impl Fn(usize) -> bool,
        want: usize,
    ) -> Vec<(usize, f64)> {
        let n = self.chunks.len() as f64;
        let mut scores: HashMap<usize, f64> = HashMap::new();
        let mut seen = std::collections::HashSet::new();
        for t in terms {
            if !seen.insert(t) {
                continue;
            }
            let Some((at, count)) = self.term(t) else {
                continue;
            };
            let idf = ((n - count as f64 + 0.5) / (count as f64 + 0.5) + 1.0).ln();
            for k in 0..count {
                let p = at + k * 8;
                let chunk = u32_at(&self.bytes, p) as usize;
                let tf = f64::from(u32_at(&self.bytes, p + 4));
                let len = f64::from(self.chunks[chunk].2);
                let s = idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / self.avg_len));
                *scores.entry(chunk).or_default() += s;
            }
        }
        let mut ranked: Vec<(usize, f64)> = scores
            .into_iter()
            .filter(|&(c, _)| keep(self.chunks[c].0 as usize))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(want);
        ranked
    }
}

/// The workspace's documents: path → (size, modified time in ns). Hidden
/// entries (`.index`, `.storage`, …) are skipped.
fn documents(root: &Path) -> Result<BTreeMap<String, (u64, u128)>, ToolError> {
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
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() && depth < 12 {
                stack.push((entry.path(), path, depth + 1));
            } else if meta.is_file() {
                let ext = Path::new(&name)
                    .extension()
                    .map(|e| e.to_string_lossy().to_ascii_lowercase())
                    .unwrap_or_default();
                if EXTENSIONS.contains(&ext.as_str()) {
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

/// Where vectors come from: an OpenAI-compatible embeddings endpoint
/// (`[config] embeddings_url`, `embeddings_model`; its key, if any, added by
/// the host through `[[http.auth]]`), else the model mounted at `/assets`
/// (`[assets] dir`, run here by candle), else none.
pub struct Embedder {
    source: Source,
    /// Names the vectors: a different model makes every vector stale.
    model: String,
    /// Most chunks embedded in one call (`[config] embed_chunks_per_call`).
    per_call: usize,
}

enum Source {
    Endpoint(url::Url),
    Local(std::cell::OnceCell<Box<crate::embed::Local>>),
}

impl Embedder {
    fn configured() -> Option<Embedder> {
        let per_call = |default: usize| {
            toolhost_sdk::host::config("embed_chunks_per_call")
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
                .max(1)
        };
        if let Some(url) = toolhost_sdk::host::config("embeddings_url") {
            let url = url::Url::parse(&url).ok()?;
            let model = toolhost_sdk::host::config("embeddings_model")
                .unwrap_or_else(|| "default".to_owned());
            return Some(Embedder {
                source: Source::Endpoint(url),
                model,
                per_call: per_call(4096),
            });
        }
        crate::embed::Local::available().then(|| Embedder {
            source: Source::Local(std::cell::OnceCell::new()),
            model: crate::embed::MODEL.to_owned(),
            per_call: per_call(16),
        })
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ToolError> {
        match &self.source {
            Source::Endpoint(url) => self.remote(url, texts),
            Source::Local(cell) => {
                if cell.get().is_none() {
                    let model = Box::new(crate::embed::Local::load()?);
                    let _ = cell.set(model);
                }
                let model = cell.get().expect("just set");
                texts.iter().map(|t| model.embed(t)).collect()
            }
        }
    }

    fn remote(&self, url: &url::Url, texts: &[&str]) -> Result<Vec<Vec<f32>>, ToolError> {
        #[derive(Deserialize)]
        struct Answer {
            data: Vec<Item>,
        }
        #[derive(Deserialize)]
        struct Item {
            embedding: Vec<f32>,
            #[serde(default)]
            index: Option<usize>,
        }
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(64) {
            let body = serde_json::json!({"model": self.model, "input": batch});
            let body = serde_json::to_vec(&body).unwrap_or_default();
            let response = toolhost_sdk::http::post(
                url,
                &body,
                &[
                    ("content-type", "application/json".to_owned()),
                    ("user-agent", "toolhost-doc/0.1".to_owned()),
                ],
                64 << 20,
                "doc",
            )?;
            if !(200..300).contains(&response.status) {
                return Err(ToolError::failed(format!(
                    "the embeddings endpoint answered HTTP {}",
                    response.status
                )));
            }
            let mut answer: Answer = serde_json::from_slice(&response.body).map_err(|e| {
                ToolError::failed(format!(
                    "the embeddings endpoint's answer is not OpenAI's shape: {e}"
                ))
            })?;
            if answer.data.len() != batch.len() {
                return Err(ToolError::failed(format!(
                    "the embeddings endpoint answered {} vectors for {} texts",
                    answer.data.len(),
                    batch.len()
                )));
            }
            answer.data.sort_by_key(|i| i.index.unwrap_or(0));
            out.extend(answer.data.into_iter().map(|i| i.embedding));
        }
        Ok(out)
    }
}

fn message(e: &ToolError) -> String {
    match e {
        ToolError::InvalidInput(m) | ToolError::Failed(m) => m.clone(),
    }
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> ToolError {
    move |e| ToolError::failed(format!("cannot {what}: {e}"))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(io("write the index"))?;
    std::fs::rename(&tmp, path).map_err(io("write the index"))
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), ToolError> {
    let bytes = serde_json::to_vec(value).map_err(|e| ToolError::failed(e.to_string()))?;
    write_file(path, &bytes)
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_overlap_and_cover_the_text() {
        let para = "word ".repeat(150);
        let text = format!("{para}\n\n{para}\n\n{para}");
        let chunks = split(&text);
        assert!(chunks.len() >= 3, "{}", chunks.len());
        assert!(chunks.iter().all(|c| c.chars().count() <= CHUNK));
        assert_eq!(split("short"), ["short"]);
        assert!(split("").is_empty());
    }

    #[test]
    fn index_is_incremental_and_ranks_by_bm25() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(
            root.join("cats.md"),
            "# Cats\n\nCats purr and sleep all day.",
        )
        .unwrap();
        std::fs::write(
            root.join("dogs.txt"),
            "Dogs bark at the mailman. Dogs fetch.",
        )
        .unwrap();
        std::fs::write(root.join("zh.txt"), "机器学习是人工智能的一个分支。").unwrap();
        std::fs::write(root.join("bad.pdf"), "not a pdf at all").unwrap();
        let mut index = Index::open(root).unwrap();
        let r = index.sync(None, false).unwrap();
        assert_eq!(r.updated.len(), 4, "{r:?}");
        assert_eq!(r.failed.len(), 1, "{r:?}");
        assert_eq!(r.failed[0].file, "bad.pdf");
        let hits = index.keyword("barking dog", &Scope::new(None), 5).unwrap();
        let top = index.hits(&hits).unwrap();
        assert_eq!(top[0].file, "dogs.txt", "{top:?}");
        let zh = index.keyword("人工智能", &Scope::new(None), 5).unwrap();
        assert_eq!(index.hits(&zh).unwrap()[0].file, "zh.txt");
        // Only the changed file is parsed again; a deleted one is forgotten.
        let mut index = Index::open(root).unwrap();
        let r = index.sync(None, false).unwrap();
        assert!(r.updated.is_empty(), "{r:?}");
        std::fs::write(
            root.join("cats.md"),
            "# Cats\n\nCats bark sometimes, dogs never purr.",
        )
        .unwrap();
        std::fs::remove_file(root.join("zh.txt")).unwrap();
        let r = index.sync(None, false).unwrap();
        assert_eq!(
            (r.updated.as_slice(), r.removed.as_slice()),
            (&["cats.md".to_owned()][..], &["zh.txt".to_owned()][..])
        );
        let only = index
            .keyword("bark", &Scope::new(Some(&["cats.md".to_owned()])), 5)
            .unwrap();
        assert_eq!(index.hits(&only).unwrap().len(), 1);
    }

    #[test]
    fn fusion_rewards_agreement() {
        let fused = fuse(&[vec![(1, 9.0), (2, 5.0)], vec![(2, 0.9), (3, 0.8)]]);
        assert_eq!(fused[0].0, 2);
    }

    #[test]
    fn damaged_index_is_a_clear_error() {
        assert!(Postings::decode(b"junk".to_vec()).is_err());
        let mut b = Postings::encode(
            &["a".into()],
            &[(0, 0, 3)],
            &BTreeMap::from([("x".into(), vec![(0, 1)])]),
        );
        b.truncate(b.len() - 3);
        assert!(Postings::decode(b).is_err());
    }
}
