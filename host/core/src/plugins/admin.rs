//! Changes the admin API makes to the plugins directory: a wasm component
//! uploaded (loaded first, written only when it loads) or deleted. They go
//! through the same backend and the same swap as the watcher's.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use super::{Key, PluginManager, PluginStatus, identity, short, stamps};
use crate::backend::{Backend, EntryFile};
use crate::tool;

/// The backend whose entries the admin API uploads.
const UPLOADS: &str = "wasm";

/// Why an admin change was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error(
        "invalid plugin name `{0}`: use lowercase letters, digits and `-`, starting with a letter (no path separators)"
    )]
    InvalidName(String),
    #[error("no plugin `{0}`")]
    NotFound(String),
    #[error("the manifest is not UTF-8 text")]
    ManifestNotText,
    #[error("plugin `{name}` was not loaded: {message}")]
    Load { name: String, message: String },
    #[error("plugin `{name}` was not registered: {message}")]
    Register { name: String, message: String },
    #[error("cannot write the plugins directory: {0}")]
    Io(#[from] std::io::Error),
}

impl PluginManager {
    fn uploads(&self) -> Result<Arc<dyn Backend>, ChangeError> {
        self.backend(UPLOADS).cloned().ok_or_else(|| {
            ChangeError::Io(std::io::Error::other("this server has no wasm backend"))
        })
    }

    /// Load component `wasm` with `manifest` as plugin `name` would load,
    /// without installing it or touching the catalog (a build's test).
    pub async fn trial_load(
        &self,
        name: &str,
        wasm: Vec<u8>,
        manifest: Vec<u8>,
    ) -> Result<crate::backend::Loaded, String> {
        let backend = self.uploads().map_err(|e| e.to_string())?;
        let files = vec![
            EntryFile::new(self.dir.join(format!("{name}.wasm")), wasm),
            EntryFile::new(self.dir.join(format!("{name}.toml")), manifest),
        ];
        backend.load(name, files, &|_| {}).await
    }

    /// Install an uploaded component (and manifest) as plugin `name`: load
    /// it first, and only when it loads write the files into the directory
    /// and swap it in. Without a manifest, the plugin's current manifest
    /// file (if any) stays.
    pub async fn upload(
        &self,
        name: &str,
        wasm: Vec<u8>,
        manifest: Option<Vec<u8>>,
    ) -> Result<PluginStatus, ChangeError> {
        self.upload_signed(name, wasm, manifest, Proofs::default())
            .await
    }

    /// [`Self::upload`] with what vouches for the component (judged by the
    /// trust policy as the load's first step). Proofs of the version it
    /// replaces, and a registry lock, are removed: they are of other bytes.
    pub async fn upload_signed(
        &self,
        name: &str,
        wasm: Vec<u8>,
        manifest: Option<Vec<u8>>,
        proofs: Proofs,
    ) -> Result<PluginStatus, ChangeError> {
        if !tool::is_valid_plugin_name(name) {
            return Err(ChangeError::InvalidName(name.to_owned()));
        }
        if let Some(bytes) = &manifest {
            std::str::from_utf8(bytes).map_err(|_| ChangeError::ManifestNotText)?;
        }
        let backend = self.uploads()?;
        let key: Key = (name.to_owned(), UPLOADS);
        let lock = self.entry_lock(&key);
        let _guard = lock.lock().await;
        let wasm_path = self.dir.join(format!("{name}.wasm"));
        let toml_path = self.dir.join(format!("{name}.toml"));
        let manifest = match manifest {
            Some(bytes) => Some(bytes),
            None => match tokio::fs::read(&toml_path).await {
                Ok(bytes) => Some(bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(e.into()),
            },
        };
        if let Some(source) = manifest
            .as_deref()
            .and_then(|m| crate::wasm::provenance::manifest_source(&String::from_utf8_lossy(m)))
        {
            return Err(ChangeError::Load {
                name: name.to_owned(),
                message: format!(
                    "its manifest names `source = \"{source}\"`: the component comes from \
                     there (push it), or upload a manifest without `source`"
                ),
            });
        }
        let mut files = vec![EntryFile::new(wasm_path.clone(), wasm)];
        if let Some(bytes) = manifest {
            files.push(EntryFile::new(toml_path.clone(), bytes));
        }
        let signature_path = crate::wasm::provenance::signature_file(&self.dir, name);
        let bundle_path = crate::wasm::provenance::bundle_file(&self.dir, name);
        let mut stale = vec![crate::wasm::provenance::lock_file(&self.dir, name)];
        for (path, bytes) in [
            (signature_path, proofs.signature),
            (bundle_path, proofs.bundle),
        ] {
            match bytes {
                Some(bytes) => files.push(EntryFile::new(path, bytes)),
                None => stale.push(path),
            }
        }
        let old = self.get_key(&key).and_then(|s| s.version);
        let common = super::manifest_common(name, &files);
        let loaded = backend
            .load(name, copies(&files), &|_| {})
            .await
            .map_err(|message| ChangeError::Load {
                name: name.to_owned(),
                message,
            })?;
        // Written (manifest first, component last: the watcher sees a
        // complete pair) and hashed on a blocking thread.
        let (identity, stamps) = tokio::task::spawn_blocking(move || {
            for path in &stale {
                match std::fs::remove_file(path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            for file in files.iter().rev() {
                write_atomic(&file.path, &file.bytes)?;
            }
            let paths: Vec<_> = files.iter().map(|f| f.path.clone()).collect();
            Ok::<_, std::io::Error>((identity(&files), stamps(&paths)))
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))?;
        let status = self.register(&key, &backend, loaded, common)?;
        self.update(&key, |s| {
            s.files = Some(identity);
            s.stamps = Some(stamps);
        });
        tracing::info!(
            plugin = name,
            from = short(old.as_deref()),
            to = short(status.version.as_deref()),
            compile_ms = status.compile_ms,
            "plugin uploaded"
        );
        Ok(status)
    }

    /// Delete plugin `name`: its files and its tools.
    pub async fn delete(&self, name: &str) -> Result<(), ChangeError> {
        if !tool::is_valid_plugin_name(name) {
            return Err(ChangeError::InvalidName(name.to_owned()));
        }
        let key: Key = (name.to_owned(), UPLOADS);
        let lock = self.entry_lock(&key);
        let _guard = lock.lock().await;
        let mut found = self.get_key(&key).is_some();
        // The component, its manifest, and what said where it came from (a
        // lock left behind would fetch it again).
        for ext in ["wasm", "toml", "oci.lock", "wasm.sig", "wasm.sigstore.json"] {
            match tokio::fs::remove_file(self.dir.join(format!("{name}.{ext}"))).await {
                Ok(()) => found = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        if !found {
            return Err(ChangeError::NotFound(name.to_owned()));
        }
        self.unload(&key, "deleted through the admin API");
        Ok(())
    }
}

/// What an upload brings to vouch for its component.
#[derive(Default)]
pub struct Proofs {
    /// A cosign blob signature (base64), written as `<name>.wasm.sig`.
    pub signature: Option<Vec<u8>>,
    /// A Sigstore bundle, written as `<name>.wasm.sigstore.json`.
    pub bundle: Option<Vec<u8>>,
}

fn copies(files: &[EntryFile]) -> Vec<EntryFile> {
    files
        .iter()
        .map(|f| EntryFile {
            path: f.path.clone(),
            bytes: f.bytes.clone(),
            hash: f.hash.clone(),
        })
        .collect()
}

/// Write `bytes` to `path` through a hidden temporary file in the same
/// directory and a rename, so no reader (nor the watcher) sees half a file.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".upload-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_data()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
