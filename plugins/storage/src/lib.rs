//! `storage`: a key-value store per session (Qwen-Agent's `storage` tool:
//! put, get, delete, scan), kept in the session workspace under
//! `.storage/`, one file per key named by the key's hex, so any key (slashes,
//! dots, any script) maps to one safe file name.
//!
//! Tools (seen by agents as `storage_<name>`):
//!
//! - `put {key, value}`: store a text value (replacing one);
//! - `get {key}`: the value, or an invalid-input error naming the key;
//! - `delete {key}`: remove it (an error if there is none);
//! - `scan {prefix?, limit?, values?}`: the keys starting with `prefix`,
//!   sorted, with their values unless `values` is false.
//!
//! The operations take the workspace root as a parameter, so they are tested
//! natively too.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use toolhost_sdk::{Deserialize, Json, JsonSchema, Serialize, ToolError};

/// Where the host mounts the session workspace inside the sandbox.
pub const WORKSPACE: &str = "/workspace";
/// The store's folder in the workspace.
pub const DIR: &str = ".storage";
/// Longest key, bytes.
pub const MAX_KEY: usize = 512;
/// Largest value, bytes.
pub const MAX_VALUE: usize = 1 << 20;
/// Most keys one `scan` returns, and most value bytes it carries.
pub const MAX_SCAN: usize = 1000;
pub const MAX_SCAN_BYTES: usize = 512 << 10;

/// The file name of `key`: its UTF-8 bytes in hex.
pub fn file_name(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect::<String>() + ".val"
}

/// The key a file name stands for, if it is one of ours.
pub fn key_of(name: &str) -> Option<String> {
    let hex = name.strip_suffix(".val")?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

fn check_key(key: &str) -> Result<(), ToolError> {
    if key.is_empty() {
        return Err(ToolError::invalid_input("`key` is empty"));
    }
    if key.len() > MAX_KEY {
        return Err(ToolError::invalid_input(format!(
            "`key` is {} bytes; the limit is {MAX_KEY}",
            key.len()
        )));
    }
    Ok(())
}

fn io_error(what: &str, e: io::Error) -> ToolError {
    ToolError::failed(format!("{what}: {e}"))
}

fn path_of(root: &Path, key: &str) -> PathBuf {
    root.join(DIR).join(file_name(key))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PutInput {
    /// The key (any text up to 512 bytes, e.g. `notes/plan` or `用户偏好`).
    key: String,
    /// The value to keep (text, up to 1 MiB).
    value: String,
}

#[derive(Serialize, JsonSchema)]
struct PutOutput {
    key: String,
    bytes: usize,
    /// Whether a value was there before.
    replaced: bool,
}

pub fn put_in(root: &Path, key: &str, value: &str) -> Result<(usize, bool), ToolError> {
    check_key(key)?;
    if value.len() > MAX_VALUE {
        return Err(ToolError::invalid_input(format!(
            "`value` is {} bytes; the limit is {MAX_VALUE}",
            value.len()
        )));
    }
    let dir = root.join(DIR);
    fs::create_dir_all(&dir).map_err(|e| io_error("cannot make the store", e))?;
    let path = path_of(root, key);
    let replaced = path.is_file();
    // Whole or not at all: written aside, then renamed over.
    let tmp = dir.join(format!(".{}.tmp", file_name(key)));
    let mut f = fs::File::create(&tmp).map_err(|e| io_error("cannot write the value", e))?;
    f.write_all(value.as_bytes())
        .map_err(|e| io_error("cannot write the value", e))?;
    drop(f);
    fs::rename(&tmp, &path).map_err(|e| io_error("cannot write the value", e))?;
    Ok((value.len(), replaced))
}

fn put(input: PutInput) -> Result<Json<PutOutput>, ToolError> {
    let (bytes, replaced) = put_in(Path::new(WORKSPACE), &input.key, &input.value)?;
    Ok(Json(PutOutput {
        key: input.key,
        bytes,
        replaced,
    }))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct KeyInput {
    /// The key.
    key: String,
}

pub fn get_in(root: &Path, key: &str) -> Result<String, ToolError> {
    check_key(key)?;
    match fs::read(path_of(root, key)) {
        Ok(bytes) => String::from_utf8(bytes)
            .map_err(|_| ToolError::failed(format!("the value of `{key}` is not UTF-8 text"))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(ToolError::invalid_input(format!(
            "no value under `{key}` (storage_scan lists the keys)"
        ))),
        Err(e) => Err(io_error("cannot read the value", e)),
    }
}

fn get(input: KeyInput) -> Result<String, ToolError> {
    get_in(Path::new(WORKSPACE), &input.key)
}

pub fn delete_in(root: &Path, key: &str) -> Result<(), ToolError> {
    check_key(key)?;
    match fs::remove_file(path_of(root, key)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(ToolError::invalid_input(format!(
            "no value under `{key}` to delete"
        ))),
        Err(e) => Err(io_error("cannot delete the value", e)),
    }
}

#[derive(Serialize, JsonSchema)]
struct Deleted {
    key: String,
    deleted: bool,
}

fn delete(input: KeyInput) -> Result<Json<Deleted>, ToolError> {
    delete_in(Path::new(WORKSPACE), &input.key)?;
    Ok(Json(Deleted {
        key: input.key,
        deleted: true,
    }))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ScanInput {
    /// Only keys starting with this (default: every key).
    prefix: Option<String>,
    /// Most keys to return (default and limit 1000).
    #[schemars(range(min = 1, max = 1000))]
    limit: Option<u32>,
    /// Include the values (default true; at most 512 KiB of them).
    values: Option<bool>,
}

#[derive(Serialize, JsonSchema, Debug, PartialEq)]
pub struct Item {
    pub key: String,
    pub bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(Serialize, JsonSchema, Debug, PartialEq)]
pub struct ScanOutput {
    pub items: Vec<Item>,
    /// More keys match than were returned (raise `limit`, narrow `prefix`),
    /// or values were left out past 512 KiB.
    pub more: bool,
}

pub fn scan_in(
    root: &Path,
    prefix: &str,
    limit: usize,
    values: bool,
) -> Result<ScanOutput, ToolError> {
    let dir = root.join(DIR);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(ScanOutput {
                items: Vec::new(),
                more: false,
            });
        }
        Err(e) => return Err(io_error("cannot list the store", e)),
    };
    let mut keys: Vec<(String, u64)> = entries
        .flatten()
        .filter_map(|e| {
            let key = key_of(e.file_name().to_str()?)?;
            let len = e.metadata().ok()?.len();
            key.starts_with(prefix).then_some((key, len))
        })
        .collect();
    keys.sort();
    let limit = limit.clamp(1, MAX_SCAN);
    let mut more = keys.len() > limit;
    let mut carried = 0usize;
    let mut items = Vec::new();
    for (key, bytes) in keys.into_iter().take(limit) {
        let value = if values && carried + bytes as usize <= MAX_SCAN_BYTES {
            carried += bytes as usize;
            Some(get_in(root, &key)?)
        } else {
            more |= values;
            None
        };
        items.push(Item { key, bytes, value });
    }
    Ok(ScanOutput { items, more })
}

fn scan(input: ScanInput) -> Result<Json<ScanOutput>, ToolError> {
    scan_in(
        Path::new(WORKSPACE),
        input.prefix.as_deref().unwrap_or(""),
        input.limit.unwrap_or(MAX_SCAN as u32) as usize,
        input.values.unwrap_or(true),
    )
    .map(Json)
}

toolhost_sdk::toolkit! {
    put: "Keep a text value under a key for this session, replacing any value there. Keys \
        are any text up to 512 bytes (use `/` to group them, e.g. `notes/plan`); values up \
        to 1 MiB.",
    get: "The value kept under a key in this session.",
    delete: "Remove the value kept under a key in this session.",
    scan: "List the keys of this session's store that start with a prefix (all of them by \
        default), sorted, with their values unless values=false.",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_safe_file_names_and_back() {
        for key in [
            "a",
            "notes/plan",
            "../../etc/passwd",
            "用户偏好",
            "a.val",
            " ",
        ] {
            let name = file_name(key);
            let stem = name.strip_suffix(".val").unwrap();
            assert!(stem.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
            assert_eq!(key_of(&name).as_deref(), Some(key));
        }
        assert_eq!(key_of("zz.val"), None);
        assert_eq!(key_of("616.val"), None);
        assert_eq!(key_of("notes.txt"), None);
    }

    #[test]
    fn put_get_delete_scan() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        assert_eq!(scan_in(r, "", 10, true).unwrap().items, vec![]);
        assert_eq!(put_in(r, "notes/plan", "ship it").unwrap(), (7, false));
        assert_eq!(
            put_in(r, "notes/plan", "ship it twice").unwrap(),
            (13, true)
        );
        put_in(r, "notes/idea", "x").unwrap();
        put_in(r, "other", "y").unwrap();
        assert_eq!(get_in(r, "notes/plan").unwrap(), "ship it twice");
        let scanned = scan_in(r, "notes/", 10, true).unwrap();
        let keys: Vec<&str> = scanned.items.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["notes/idea", "notes/plan"]);
        assert_eq!(scanned.items[1].value.as_deref(), Some("ship it twice"));
        assert!(!scanned.more);
        let limited = scan_in(r, "", 1, false).unwrap();
        assert_eq!((limited.items.len(), limited.more), (1, true));
        assert_eq!(limited.items[0].value, None);
        delete_in(r, "notes/idea").unwrap();
        assert!(delete_in(r, "notes/idea").is_err());
        assert!(get_in(r, "notes/idea").is_err());
        assert!(put_in(r, "", "x").is_err());
        assert!(put_in(r, &"k".repeat(MAX_KEY + 1), "x").is_err());
        assert!(put_in(r, "big", &"v".repeat(MAX_VALUE + 1)).is_err());
        // Nothing outside the store's folder.
        let files: Vec<_> = fs::read_dir(r)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(files, [std::ffi::OsString::from(DIR)]);
    }
}
