//! BERT's encoder as sentence embedders use it: one sequence at a time, no
//! padding (so no attention mask), absolute positions, exact (erf) GELU,
//! mean pooling. What all-MiniLM-L6-v2 needs and no more, on the plugin's
//! own matrix products ([`matmul`]) and element-wise steps ([`ops`]), no
//! tensor library: candle's crates were a third of a fresh guests build's
//! compiler time, and this encoder is 1.07-1.13× quicker with the same vectors
//! (docs/benchmarks.md). `tests/fixtures/embeddings/reference.json` holds
//! vectors the earlier (candle) implementation made; the e2e test compares.

mod matmul;
mod ops;
mod safetensors;
#[cfg(test)]
mod tests;

use matmul::{Packed, matmul};
use serde::Deserialize;

/// The fields of the model's `config.json` this encoder reads.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    #[serde(default = "absolute")]
    pub position_embedding_type: String,
}

fn absolute() -> String {
    "absolute".to_owned()
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

impl Norm {
    fn apply(&self, x: &mut [f32], width: usize, eps: f32) {
        ops::layer_norm(x, width, &self.weight, &self.bias, eps);
    }
}

/// A linear layer: its weight packed for [`matmul`], and its bias.
struct Linear {
    weight: Packed,
    bias: Vec<f32>,
}

impl Linear {
    /// `out = x · Wᵀ + b` for `rows` rows of `x`, each as wide as the
    /// layer's inputs; `out`'s rows as wide as its outputs.
    fn forward(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        let (inputs, outputs) = (self.weight.k(), self.weight.n());
        matmul(
            x,
            inputs,
            rows,
            &self.weight,
            Some(&self.bias),
            out,
            outputs,
        );
    }

    fn outputs(&self) -> usize {
        self.weight.n()
    }
}

struct Layer {
    /// Query, key and value in one product (`3 × hidden` outputs).
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    out: Linear,
    out_norm: Norm,
}

pub struct Bert {
    hidden: usize,
    heads: usize,
    eps: f32,
    words: Vec<f32>,
    positions: Vec<f32>,
    /// Token type 0's row (every token here is of type 0).
    token_type: Vec<f32>,
    embeddings_norm: Norm,
    layers: Vec<Layer>,
}

impl Bert {
    /// The encoder from a `.safetensors` file's bytes (names as Hugging
    /// Face's BertModel saves them, with or without a `bert.` prefix).
    pub fn load(weights: &[u8], config: &Config) -> Result<Bert, String> {
        if config.hidden_act != "gelu" || config.position_embedding_type != "absolute" {
            return Err(format!(
                "unsupported model: hidden_act {:?}, position_embedding_type {:?} (gelu and absolute only)",
                config.hidden_act, config.position_embedding_type
            ));
        }
        let (hidden, inner) = (config.hidden_size, config.intermediate_size);
        if config.num_attention_heads == 0 || !hidden.is_multiple_of(config.num_attention_heads) {
            return Err(format!(
                "hidden_size {hidden} is not a multiple of num_attention_heads {}",
                config.num_attention_heads
            ));
        }
        let t = safetensors::Tensors::parse(weights)?;
        let prefix = if t.contains("embeddings.word_embeddings.weight") {
            ""
        } else {
            "bert."
        };
        let get = |name: &str, shape: &[usize]| t.get(&format!("{prefix}{name}"), shape);
        let norm = |name: &str| -> Result<Norm, String> {
            Ok(Norm {
                weight: get(&format!("{name}.weight"), &[hidden])?,
                bias: get(&format!("{name}.bias"), &[hidden])?,
            })
        };
        let linear = |name: &str, inputs: usize, outputs: usize| -> Result<Linear, String> {
            let w = get(&format!("{name}.weight"), &[outputs, inputs])?;
            Ok(Linear {
                weight: Packed::transposed(&w, outputs, inputs),
                bias: get(&format!("{name}.bias"), &[outputs])?,
            })
        };
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let l = format!("encoder.layer.{i}");
                let s = format!("{l}.attention.self");
                // Query, key and value stacked as one weight of 3 × hidden rows.
                let (mut w, mut bias) = (Vec::with_capacity(3 * hidden * hidden), Vec::new());
                for part in ["query", "key", "value"] {
                    w.extend(get(&format!("{s}.{part}.weight"), &[hidden, hidden])?);
                    bias.extend(get(&format!("{s}.{part}.bias"), &[hidden])?);
                }
                Ok(Layer {
                    qkv: Linear {
                        weight: Packed::transposed(&w, 3 * hidden, hidden),
                        bias,
                    },
                    attention_out: linear(&format!("{l}.attention.output.dense"), hidden, hidden)?,
                    attention_norm: norm(&format!("{l}.attention.output.LayerNorm"))?,
                    intermediate: linear(&format!("{l}.intermediate.dense"), hidden, inner)?,
                    out: linear(&format!("{l}.output.dense"), inner, hidden)?,
                    out_norm: norm(&format!("{l}.output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let token_types = get(
            "embeddings.token_type_embeddings.weight",
            &[config.type_vocab_size, hidden],
        )?;
        Ok(Bert {
            hidden,
            heads: config.num_attention_heads,
            eps: config.layer_norm_eps as f32,
            words: get(
                "embeddings.word_embeddings.weight",
                &[config.vocab_size, hidden],
            )?,
            positions: get(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, hidden],
            )?,
            token_type: token_types.get(..hidden).ok_or("no token type 0")?.to_vec(),
            embeddings_norm: norm("embeddings.LayerNorm")?,
            layers,
        })
    }

    /// The sentence vector of one sequence of token ids (token type 0
    /// throughout): the mean of the last hidden states over its tokens,
    /// L2-normalised.
    pub fn embed(&self, ids: &[u32]) -> Result<Vec<f32>, String> {
        let hidden = self.hidden;
        let tokens = ids.len();
        if tokens == 0 {
            return Err("no tokens".into());
        }
        if tokens > self.positions.len() / hidden {
            return Err(format!(
                "{tokens} tokens: the model has {} positions",
                self.positions.len() / hidden
            ));
        }
        let mut x = vec![0f32; tokens * hidden];
        for (t, (&id, row)) in ids.iter().zip(x.chunks_exact_mut(hidden)).enumerate() {
            let word = self
                .words
                .get(id as usize * hidden..(id as usize + 1) * hidden)
                .ok_or_else(|| format!("token id {id} is outside the vocabulary"))?;
            let position = &self.positions[t * hidden..(t + 1) * hidden];
            for (((v, w), p), k) in row.iter_mut().zip(word).zip(position).zip(&self.token_type) {
                *v = w + k + p;
            }
        }
        self.embeddings_norm.apply(&mut x, hidden, self.eps);
        let mut work = Work::default();
        for layer in &self.layers {
            self.layer(layer, &mut x, tokens, &mut work);
        }
        let mut mean = vec![0f32; hidden];
        for row in x.chunks_exact(hidden) {
            ops::add(&mut mean, row);
        }
        mean.iter_mut().for_each(|v| *v /= tokens as f32);
        let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt();
        Ok(mean.iter().map(|v| v / norm).collect())
    }

    fn layer(&self, l: &Layer, x: &mut [f32], tokens: usize, w: &mut Work) {
        let hidden = self.hidden;
        let head = hidden / self.heads;
        let width = l.qkv.outputs();
        w.qkv.resize(tokens * width, 0.0);
        l.qkv.forward(x, tokens, &mut w.qkv);
        w.scores.resize(tokens * tokens, 0.0);
        w.context.resize(tokens * hidden, 0.0);
        let scale = 1.0 / (head as f32).sqrt();
        for h in 0..self.heads {
            let (q, k, v) = (h * head, hidden + h * head, 2 * hidden + h * head);
            let qkv = &w.qkv;
            // scores = Q · Kᵀ (tokens × tokens), then softmax by row.
            w.packed.fill(head, tokens, |d, t| qkv[t * width + k + d]);
            let scores = &mut w.scores;
            matmul(&qkv[q..], width, tokens, &w.packed, None, scores, tokens);
            ops::softmax_rows(scores, tokens, scale);
            // context = probabilities · V, into this head's columns.
            w.packed.fill(tokens, head, |t, d| qkv[t * width + v + d]);
            let context = &mut w.context[h * head..];
            matmul(scores, tokens, tokens, &w.packed, None, context, hidden);
        }
        // attended = norm(context · Wo + b + x)
        w.attended.resize(tokens * hidden, 0.0);
        l.attention_out.forward(&w.context, tokens, &mut w.attended);
        ops::add(&mut w.attended, x);
        l.attention_norm.apply(&mut w.attended, hidden, self.eps);
        // x = norm(gelu(attended · Wi + b) · Wout + b + attended)
        w.inner.resize(tokens * l.intermediate.outputs(), 0.0);
        l.intermediate.forward(&w.attended, tokens, &mut w.inner);
        ops::gelu(&mut w.inner);
        l.out.forward(&w.inner, tokens, x);
        ops::add(x, &w.attended);
        l.out_norm.apply(x, hidden, self.eps);
    }
}

/// Buffers a forward pass reuses from layer to layer.
#[derive(Default)]
struct Work {
    qkv: Vec<f32>,
    scores: Vec<f32>,
    packed: Packed,
    context: Vec<f32>,
    attended: Vec<f32>,
    inner: Vec<f32>,
}
