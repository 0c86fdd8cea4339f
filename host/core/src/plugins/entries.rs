//! What the plugins directory holds, and whose it is: the entries each
//! backend claims (a folder goes to the one backend whose manifest table it
//! has), their files, sizes and identities, and which of two entries of
//! different kinds with one name came first.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::status::Stamps;
use super::{Key, PluginManager};
use crate::backend::{Backend, EntryFile, folder_owner};

impl PluginManager {
    /// The entries a child of the directory belongs to (one per backend that
    /// claims it).
    pub fn claims(&self, child: &Path) -> Vec<Key> {
        self.backends
            .iter()
            .filter_map(|b| Some((b.claim(child)?, b.name())))
            .collect()
    }

    /// Entries present in the directory, in backend order, then by name.
    pub fn entries_on_disk(&self) -> std::io::Result<Vec<Key>> {
        let mut keys = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let path = entry?.path();
            for key in self.claims(&path) {
                let backend = self.backend(key.1).expect("a backend of ours");
                if !files_of(&**backend, &self.kinds, &self.dir, &key.0).is_empty()
                    && !keys.contains(&key)
                {
                    keys.push(key);
                }
            }
        }
        let order = |k: &Key| self.backends.iter().position(|b| b.name() == k.1);
        keys.sort_by(|a, b| order(a).cmp(&order(b)).then(a.0.cmp(&b.0)));
        Ok(keys)
    }

    /// Names of the entries present in the directory.
    pub fn names_on_disk(&self) -> std::io::Result<Vec<String>> {
        Ok(self.entries_on_disk()?.into_iter().map(|k| k.0).collect())
    }

    /// Of `keys`, those whose name an older entry of another kind has.
    pub(super) fn latecomers(&self, keys: &[Key]) -> Vec<Key> {
        let newest = |key: &Key| -> std::time::SystemTime {
            self.backend(key.1)
                .map(|b| files_of(&**b, &self.kinds, &self.dir, &key.0))
                .unwrap_or_default()
                .iter()
                .filter_map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
                .max()
                .unwrap_or(UNIX_EPOCH)
        };
        let order = |k: &Key| self.backends.iter().position(|b| b.name() == k.1);
        let mut later = Vec::new();
        let mut names: Vec<&String> = keys.iter().map(|k| &k.0).collect();
        names.sort();
        names.dedup();
        for name in names {
            let mut same: Vec<&Key> = keys.iter().filter(|k| &k.0 == name).collect();
            if same.len() < 2 {
                continue;
            }
            same.sort_by_cached_key(|k| (newest(k), order(k)));
            later.extend(same.into_iter().skip(1).cloned());
        }
        later
    }

    pub(super) fn size_of(&self, key: &Key) -> u64 {
        self.backend(key.1).map_or(0, |b| {
            files_of(&**b, &self.kinds, &self.dir, &key.0)
                .iter()
                .filter_map(|p| std::fs::metadata(p).ok())
                .map(|m| m.len())
                .sum()
        })
    }
}

/// The files of entry `name` as `backend` lists them, when it is this
/// backend's: a folder entry goes to the one folder backend whose kind its
/// manifest names.
pub(super) fn files_of(
    backend: &dyn Backend,
    kinds: &[&'static str],
    dir: &Path,
    name: &str,
) -> Vec<PathBuf> {
    match backend.folder_kind() {
        Some(kind) if folder_owner(dir, name, kinds) != Some(kind) => Vec::new(),
        _ => backend.files(dir, name),
    }
}

/// Size and modification time of each of `paths`.
pub(super) fn stamps(paths: &[PathBuf]) -> Stamps {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).map_or((u64::MAX, None), |m| (m.len(), m.modified().ok())))
        .collect()
}

pub(super) fn read_all(paths: &[PathBuf]) -> std::io::Result<Vec<EntryFile>> {
    paths
        .iter()
        .map(|path| Ok(EntryFile::new(path.clone(), std::fs::read(path)?)))
        .collect()
}

/// The content hashes of an entry's files, with their names.
pub(super) fn identity(files: &[EntryFile]) -> String {
    files
        .iter()
        .map(|f| {
            format!(
                "{}={}",
                f.path.file_name().unwrap_or_default().to_string_lossy(),
                f.hash
            )
        })
        .collect::<Vec<_>>()
        .join("+")
}

/// What every kind's manifest (`<name>.toml`) may say at its top level,
/// read here for the catalog (each backend's own reading checks it).
#[derive(Debug, Default)]
pub struct Common {
    pub category: Option<String>,
    pub health: Option<crate::health::declared::Declared>,
    pub fallback: crate::health::declared::Fallbacks,
}

/// The top-level `category`, `[health]` and `[fallback]` of entry `name`'s
/// manifest, if it has one.
pub(super) fn manifest_common(name: &str, files: &[EntryFile]) -> Common {
    let manifest = format!("{name}.toml");
    let table = files
        .iter()
        .find(|f| f.path.file_name().is_some_and(|n| n == manifest.as_str()))
        .and_then(|f| std::str::from_utf8(&f.bytes).ok())
        .and_then(|text| text.parse::<toml::Table>().ok())
        .unwrap_or_default();
    let health = table.get("health").cloned().map(toml::Value::try_into);
    let fallback = table.get("fallback").cloned().map(toml::Value::try_into);
    Common {
        category: table
            .get("category")
            .and_then(|c| c.as_str())
            .map(str::to_owned),
        health: health.and_then(Result::ok),
        fallback: fallback.and_then(Result::ok).unwrap_or_default(),
    }
}

/// Whether toolkit `name`'s `[fallback]` can be honoured: each names one of
/// its `tools`, never the tool itself, and each fallback there now takes
/// the tool's input ([`crate::health::declared::schema_disagreement`]);
/// else the toolkit is refused with the reason. A fallback not in the
/// catalog yet is a warning (skipped until it is there).
pub(super) fn check_fallbacks(
    catalog: &crate::catalog::Catalog,
    name: &str,
    tools: &[crate::tool::ToolDescriptor],
    fallback: &crate::health::declared::Fallbacks,
) -> Result<Vec<String>, super::ChangeError> {
    let refuse = |message: String| super::ChangeError::Register {
        name: name.to_owned(),
        message,
    };
    let mut warnings = Vec::new();
    for (tool, ids) in fallback {
        let Some(own) = tools.iter().find(|t| t.name == *tool) else {
            return Err(refuse(format!(
                "[fallback] names `{tool}`, which is not one of its tools"
            )));
        };
        for id in ids {
            let schema = match tools
                .iter()
                .find(|t| crate::tool::tool_id(name, &t.name) == *id)
            {
                Some(t) if t.name == *tool => {
                    return Err(refuse(format!(
                        "[fallback] of `{tool}` names the tool itself"
                    )));
                }
                Some(t) => Some(t.input_schema.clone()),
                None => catalog.get(id).map(|t| t.descriptor.input_schema.clone()),
            };
            match schema {
                Some(schema) => {
                    if let Some(why) =
                        crate::health::declared::schema_disagreement(&own.input_schema, &schema)
                    {
                        return Err(refuse(format!(
                            "[fallback] of `{tool}`: `{id}` cannot take its input: {why}"
                        )));
                    }
                }
                None => warnings.push(format!(
                    "[fallback] of `{tool}`: there is no tool `{id}` now; it is skipped until there is"
                )),
            }
        }
    }
    Ok(warnings)
}
