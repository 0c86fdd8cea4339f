//! Where vectors come from (an OpenAI-compatible endpoint or the local model),
//! and the index's vectors: made a few per call, searched by cosine similarity.

use base64::Engine;
use serde::Deserialize;
use toolhost_sdk::ToolError;

use super::postings::u32_at;
use super::{Failure, Index, IndexReport, Scope, io, message, write_json};

/// Where vectors come from: an OpenAI-compatible embeddings endpoint
/// (`[config] embeddings_url`, `embeddings_model`; its key, if any, added by
/// the host through `[[http.auth]]`), else the model mounted at `/assets`
/// (`[assets] dir`, run here by the plugin's own encoder), else none.
pub struct Embedder {
    source: Source,
    /// Names the vectors: a different model makes every vector stale.
    pub(super) model: String,
    /// Most chunks embedded in one call (`[config] embed_chunks_per_call`).
    pub(super) per_call: usize,
}

enum Source {
    Endpoint(url::Url),
    Local(std::cell::OnceCell<Box<crate::embed::Local>>),
}

impl Embedder {
    pub(super) fn configured() -> Option<Embedder> {
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

    pub(super) fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ToolError> {
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

/// The index's vectors: made a few per call, searched by cosine similarity.
impl Index {
    /// Embed the chunks that have no vector yet, at most the embedder's
    /// budget for one call (a local model is slow in the sandbox: the rest
    /// waits for the next calls, found by keyword meanwhile). Whether any
    /// vector was added. An embedding failure is this call's (listed in
    /// `failed`); the chunks are tried again on the next call.
    pub(super) fn embed_some(
        &mut self,
        e: &Embedder,
        report: &mut IndexReport,
    ) -> Result<bool, ToolError> {
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

    /// Cosine similarity with the query's embedding, best first.
    pub(super) fn vector(
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
}
