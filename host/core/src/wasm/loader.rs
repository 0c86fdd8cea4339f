//! Loading plugin files: `<name>.wasm` with an optional `<name>.toml`
//! manifest beside it (the plugins directory itself is watched and loaded by
//! [`crate::plugins`]; `toolhost call` and `inspect` load one file).

use std::path::{Path, PathBuf};

use super::{LoadError, LoadedPlugin, WasmBackend};

/// Hex SHA-256 of `bytes`: a component's version.
pub use crate::backend::content_hash;

/// One component file and its manifest, if any.
#[derive(Debug, Clone)]
pub struct PluginFile {
    pub name: String,
    pub wasm: PathBuf,
    pub manifest: Option<PathBuf>,
}

/// The manifest at `path` as text, none when there is no such file.
pub fn read_manifest(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Why a plugin file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// Read and load one plugin file.
pub async fn load_file(
    backend: &WasmBackend,
    file: &PluginFile,
) -> Result<LoadedPlugin, FileError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| FileError::Read {
            path: path.to_owned(),
            source,
        })
    };
    let bytes = read(&file.wasm)?;
    let manifest = match &file.manifest {
        Some(path) => Some(String::from_utf8_lossy(&read(path)?).into_owned()),
        None => None,
    };
    Ok(backend.load(&file.name, bytes, manifest.as_deref()).await?)
}
