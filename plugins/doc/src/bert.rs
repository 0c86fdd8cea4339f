//! BERT's encoder as sentence embedders use it: one sequence at a time, no
//! padding (so no attention mask), absolute positions, exact (erf) GELU, on
//! candle's tensors and layers. What all-MiniLM-L6-v2 needs and no more: a
//! crate of every model family (candle-transformers) was ~115 s of a fresh
//! guests build for this one (docs/benchmarks.md#build-time).
//! `tests/fixtures/embeddings/reference.json` holds vectors the earlier
//! implementation made; the e2e test compares.

use candle_core::{D, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, Module, VarBuilder};
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

struct Embeddings {
    words: Embedding,
    positions: Embedding,
    token_types: Embedding,
    norm: LayerNorm,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    out: Linear,
    out_norm: LayerNorm,
}

pub struct Bert {
    embeddings: Embeddings,
    layers: Vec<Layer>,
    heads: usize,
    head_size: usize,
}

impl Bert {
    /// The encoder from `vars` (names as Hugging Face's BertModel saves
    /// them, with or without a `bert.` prefix).
    pub fn load(vars: VarBuilder, config: &Config) -> Result<Bert> {
        if config.hidden_act != "gelu" || config.position_embedding_type != "absolute" {
            candle_core::bail!(
                "unsupported model: hidden_act {:?}, position_embedding_type {:?} (gelu and absolute only)",
                config.hidden_act,
                config.position_embedding_type
            );
        }
        if config.num_attention_heads == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
        {
            candle_core::bail!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                config.hidden_size,
                config.num_attention_heads
            );
        }
        let vars = if vars.contains_tensor("embeddings.word_embeddings.weight") {
            vars
        } else {
            vars.pp("bert")
        };
        let hidden = config.hidden_size;
        let eps = config.layer_norm_eps;
        let e = vars.pp("embeddings");
        let embeddings = Embeddings {
            words: candle_nn::embedding(config.vocab_size, hidden, e.pp("word_embeddings"))?,
            positions: candle_nn::embedding(
                config.max_position_embeddings,
                hidden,
                e.pp("position_embeddings"),
            )?,
            token_types: candle_nn::embedding(
                config.type_vocab_size,
                hidden,
                e.pp("token_type_embeddings"),
            )?,
            norm: candle_nn::layer_norm(hidden, eps, e.pp("LayerNorm"))?,
        };
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let l = vars.pp(format!("encoder.layer.{i}"));
                let (a, s) = (l.pp("attention"), l.pp("attention.self"));
                let inner = config.intermediate_size;
                Ok(Layer {
                    query: candle_nn::linear(hidden, hidden, s.pp("query"))?,
                    key: candle_nn::linear(hidden, hidden, s.pp("key"))?,
                    value: candle_nn::linear(hidden, hidden, s.pp("value"))?,
                    attention_out: candle_nn::linear(hidden, hidden, a.pp("output.dense"))?,
                    attention_norm: candle_nn::layer_norm(hidden, eps, a.pp("output.LayerNorm"))?,
                    intermediate: candle_nn::linear(hidden, inner, l.pp("intermediate.dense"))?,
                    out: candle_nn::linear(inner, hidden, l.pp("output.dense"))?,
                    out_norm: candle_nn::layer_norm(hidden, eps, l.pp("output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Bert {
            embeddings,
            layers,
            heads: config.num_attention_heads,
            head_size: hidden / config.num_attention_heads,
        })
    }

    /// The last hidden states, `(1, tokens, hidden)`, of one sequence of
    /// token ids `(1, tokens)` (token type 0 throughout).
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let (_, tokens) = ids.dims2()?;
        let e = &self.embeddings;
        let positions = Tensor::arange(0u32, tokens as u32, ids.device())?;
        let mut xs = (e.words.forward(ids)? + e.token_types.forward(&ids.zeros_like()?)?)?
            .broadcast_add(&e.positions.forward(&positions)?)?;
        xs = e.norm.forward(&xs)?;
        for layer in &self.layers {
            xs = self.layer(layer, &xs)?;
        }
        Ok(xs)
    }

    fn layer(&self, l: &Layer, xs: &Tensor) -> Result<Tensor> {
        let (batch, tokens, hidden) = xs.dims3()?;
        // (batch, heads, tokens, head size)
        let split = |t: Tensor| -> Result<Tensor> {
            t.reshape((batch, tokens, self.heads, self.head_size))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(l.query.forward(xs)?)?;
        let k = split(l.key.forward(xs)?)?;
        let v = split(l.value.forward(xs)?)?;
        let scores = (q.matmul(&k.t()?)? / (self.head_size as f64).sqrt())?;
        let probs = candle_nn::ops::softmax(&scores, D::Minus1)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .flatten_from(D::Minus2)?;
        debug_assert_eq!(context.dim(D::Minus1)?, hidden);
        let attended = l
            .attention_norm
            .forward(&(l.attention_out.forward(&context)? + xs)?)?;
        let inner = l.intermediate.forward(&attended)?.gelu_erf()?;
        l.out_norm.forward(&(l.out.forward(&inner)? + attended)?)
    }
}
