//! Loading the plugins directory: `<name>.wasm` with an optional `<name>.toml`
//! manifest beside it.

use std::path::{Path, PathBuf};

use super::{LoadError, LoadedPlugin, WasmBackend};

/// Hex SHA-256 of `bytes`: a component's version.
pub fn content_hash(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// One component file found in a plugins directory.
#[derive(Debug, Clone)]
pub struct PluginFile {
    pub name: String,
    pub wasm: PathBuf,
    pub manifest: Option<PathBuf>,
}

/// The `*.wasm` files of `dir`, sorted by name.
pub fn scan(dir: &Path) -> std::io::Result<Vec<PluginFile>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("wasm") || !path.is_file() {
            continue;
        }
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let manifest = path.with_extension("toml");
        files.push(PluginFile {
            name: name.to_owned(),
            manifest: manifest.is_file().then_some(manifest),
            wasm: path,
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
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
