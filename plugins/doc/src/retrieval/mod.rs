//! Retrieval over the documents of a session's workspace (Qwen-Agent's
//! `retrieval`): documents are parsed and cut into chunks on first use, kept
//! under `.index/doc/` in the workspace, and only files whose size or time
//! changed are parsed again; while the host's workspace token
//! (`toolhost:workspace/changes`) is the one of the last look, the files are
//! not looked at at all. Keyword search is BM25 over a binary inverted
//! index; vector search uses embeddings from an OpenAI-compatible endpoint
//! when one is configured; hybrid fuses both rankings (reciprocal rank fusion).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolhost_sdk::ToolError;

use crate::tokens::Tokenizer;

mod chunks;
mod embedder;
mod postings;

use chunks::documents;
pub use chunks::{chunk_document, split};

pub use embedder::Embedder;
pub use postings::Postings;

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
    /// The host's token of the workspace when `files` was last compared
    /// with it (`toolhost:workspace/changes`): the same token now, nothing
    /// visible changed since, and the files are not looked at again.
    #[serde(default)]
    seen: Option<String>,
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
        // Asked before looking: a write while the files are looked at gives
        // the next call another token.
        let token = toolhost_sdk::host::workspace_token();
        let found = match (&token, &self.state.seen) {
            (Some(now), Some(seen)) if now == seen => self
                .state
                .files
                .iter()
                .map(|(path, f)| (path.clone(), (f.size, f.modified_ns)))
                .collect(),
            _ => documents(&self.root)?,
        };
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
        // Unchanged: the index as it is, unless it is missing or an
        // earlier version's.
        if !changed {
            self.table = Postings::open(&self.dir.join("keyword.bin"))?;
        }
        let rebuild = changed || self.table.is_none();
        if rebuild {
            self.rebuild()?;
        }
        if rebuild || self.state.seen != token {
            self.state.seen = token;
            write_json(&self.dir.join("state.json"), &self.state)?;
        }
        report.files = self.state.files.len();
        report.chunks = self.state.files.values().map(|f| f.chunks).sum();
        Ok(report)
    }

    fn load_chunks(&self, path: &str) -> Result<FileChunks, ToolError> {
        self.read_chunk_file(path, std::marker::PhantomData)
    }

    /// `path`'s chunk file, read by `seed` (all of it, or some chunks).
    fn read_chunk_file<T>(
        &self,
        path: &str,
        seed: impl for<'de> serde::de::DeserializeSeed<'de, Value = T>,
    ) -> Result<T, ToolError> {
        let bytes = std::fs::read(self.chunk_file(path)).map_err(io("read the index"))?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        seed.deserialize(&mut de)
            .and_then(|v| de.end().map(|()| v))
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
            self.table = Postings::open(&self.dir.join("keyword.bin"))?;
        }
        self.table
            .as_ref()
            .ok_or_else(|| ToolError::failed("cannot read the index: keyword.bin is missing"))
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
        p.bm25(&terms, |file| scope.covers(&p.files[file]), want)
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
        // Each file's chunk file read once, only its wanted chunks parsed.
        let mut by_file: BTreeMap<&str, std::collections::BTreeSet<usize>> = BTreeMap::new();
        for (file, idx, _) in &wanted {
            by_file.entry(file).or_default().insert(*idx);
        }
        let mut loaded: HashMap<(&str, usize), Chunk> = HashMap::new();
        for (file, indices) in by_file {
            for (idx, chunk) in self.load_some(file, &indices)? {
                loaded.insert((file, idx), chunk);
            }
        }
        let mut hits = Vec::new();
        for (file, idx, score) in &wanted {
            if let Some(chunk) = loaded.remove(&(file.as_str(), *idx)) {
                hits.push(Hit {
                    file: file.clone(),
                    page: chunk.page,
                    score: (score * 10_000.0).round() / 10_000.0,
                    text: chunk.text,
                });
            }
        }
        Ok(hits)
    }

    /// Chunks `wanted` of `path`'s chunk file; the rest (and its vectors)
    /// are skipped by the JSON reader, not decoded: a query's hits read a
    /// few passages out of files of tens of them.
    fn load_some(
        &self,
        path: &str,
        wanted: &std::collections::BTreeSet<usize>,
    ) -> Result<Vec<(usize, Chunk)>, ToolError> {
        self.read_chunk_file(path, SomeChunks(wanted))
    }
}

/// A chunk file read for some of its chunks (by index): [`Index::load_some`].
struct SomeChunks<'a>(&'a std::collections::BTreeSet<usize>);

impl<'de> serde::de::DeserializeSeed<'de> for SomeChunks<'_> {
    type Value = Vec<(usize, Chunk)>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for SomeChunks<'_> {
    type Value = Vec<(usize, Chunk)>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a chunk file (an object with `chunks`)")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "chunks" {
                found = Some(map.next_value_seed(ChunkList(self.0))?);
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        found.ok_or_else(|| serde::de::Error::missing_field("chunks"))
    }
}

/// The `chunks` array: the wanted ones decoded, the others skipped.
struct ChunkList<'a>(&'a std::collections::BTreeSet<usize>);

impl<'de> serde::de::DeserializeSeed<'de> for ChunkList<'_> {
    type Value = Vec<(usize, Chunk)>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ChunkList<'_> {
    type Value = Vec<(usize, Chunk)>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of chunks")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(self.0.len());
        for i in 0.. {
            if self.0.contains(&i) {
                match seq.next_element::<Chunk>()? {
                    Some(chunk) => out.push((i, chunk)),
                    None => break,
                }
            } else if seq.next_element::<serde::de::IgnoredAny>()?.is_none() {
                break;
            }
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
mod tests;
