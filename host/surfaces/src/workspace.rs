//! Session workspace files for the protocol routes (upload, download, tree,
//! zip). Every access goes through cap-std, opened at the workspace root, so
//! `..`, absolute paths and symlinks cannot leave it.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use std::sync::Arc;

use axum::http::StatusCode;
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use serde_json::{Value, json};
use toolhost_core::sessions::Session;

use crate::error::ApiError;

/// Entries listed by [`tree`] at most.
const MAX_TREE_ENTRIES: usize = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("invalid path `{0}`: use a relative path inside the workspace")]
    BadPath(String),
    #[error("no file `{0}` in the workspace")]
    NotFound(String),
    #[error("{0}")]
    TooLarge(String),
    #[error("workspace I/O failed: {0}")]
    Io(#[from] std::io::Error),
}

impl From<WorkspaceError> for ApiError {
    fn from(e: WorkspaceError) -> Self {
        let (status, kind) = match e {
            WorkspaceError::BadPath(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"),
            WorkspaceError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            WorkspaceError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "invalid_input"),
            WorkspaceError::Io(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError::new(status, kind, e.to_string())
    }
}

/// Run `work` on `session`'s workspace (created if need be) on the blocking
/// pool: file-system work never runs on a request thread.
pub async fn in_session<T: Send + 'static>(
    session: &Arc<Session>,
    work: impl FnOnce(&Path) -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, ApiError> {
    let session = session.clone();
    tokio::task::spawn_blocking(move || {
        let root = session.workspace()?;
        Ok(work(root)?)
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?
}

/// `path` as a clean relative path: a leading `/workspace/` or `workspace/`
/// (how agents name it) is dropped; `..`, roots and empty paths are refused.
pub fn relative(path: &str) -> Result<PathBuf, WorkspaceError> {
    let trimmed = path
        .strip_prefix("/workspace/")
        .or_else(|| path.strip_prefix("workspace/"))
        .unwrap_or(path);
    let p = Path::new(trimmed);
    let mut clean = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            _ => return Err(WorkspaceError::BadPath(path.to_owned())),
        }
    }
    if clean.as_os_str().is_empty() {
        return Err(WorkspaceError::BadPath(path.to_owned()));
    }
    Ok(clean)
}

fn open(root: &Path) -> Result<Dir, WorkspaceError> {
    Ok(Dir::open_ambient_dir(root, ambient_authority())?)
}

/// Map cap-std's refusals of an escape to a path error.
fn io_error(path: &str, e: std::io::Error) -> WorkspaceError {
    match e.kind() {
        std::io::ErrorKind::NotFound => WorkspaceError::NotFound(path.to_owned()),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::InvalidInput => {
            WorkspaceError::BadPath(path.to_owned())
        }
        _ if e.kind() == std::io::ErrorKind::NotADirectory => {
            WorkspaceError::NotFound(path.to_owned())
        }
        _ if matches!(e.raw_os_error(), Some(ELOOP | ENAMETOOLONG)) => {
            WorkspaceError::BadPath(path.to_owned())
        }
        _ => WorkspaceError::Io(e),
    }
}

/// Linux's ELOOP: cap-std refuses to follow a symlink.
const ELOOP: i32 = 40;
/// Linux's ENAMETOOLONG: a path component over 255 bytes (found by fuzzing
/// `/download_file`; it was a 500).
const ENAMETOOLONG: i32 = 36;

/// Write `bytes` to `path` under `root` (parents created). Returns the
/// relative path written.
pub fn write(root: &Path, path: &str, bytes: &[u8]) -> Result<String, WorkspaceError> {
    let rel = relative(path)?;
    let dir = open(root)?;
    if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        dir.create_dir_all(parent).map_err(|e| io_error(path, e))?;
    }
    let mut file = dir.create(&rel).map_err(|e| io_error(path, e))?;
    file.write_all(bytes)?;
    Ok(rel.to_string_lossy().into_owned())
}

/// A file being written to `path` under `root`, under a temporary name
/// beside it until [`Upload::finish`] puts it in place (parents created).
pub struct Upload {
    dir: Dir,
    rel: PathBuf,
    temp: PathBuf,
}

impl Upload {
    /// The open temporary file, to write to.
    pub fn create(root: &Path, path: &str) -> Result<(Upload, std::fs::File), WorkspaceError> {
        let rel = relative(path)?;
        let dir = open(root)?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        if !parent.as_os_str().is_empty() {
            dir.create_dir_all(parent).map_err(|e| io_error(path, e))?;
        }
        let temp = parent.join(format!(".upload-{}", uuid::Uuid::new_v4().simple()));
        let file = dir.create(&temp).map_err(|e| io_error(path, e))?;
        Ok((Upload { dir, rel, temp }, file.into_std()))
    }

    /// Put the written file in place (replacing one of that name); the
    /// relative path.
    pub fn finish(self) -> Result<String, WorkspaceError> {
        let path = self.rel.to_string_lossy().into_owned();
        if self.dir.is_dir(&self.rel) {
            let _ = self.dir.remove_file(&self.temp);
            return Err(WorkspaceError::BadPath(path));
        }
        self.dir
            .rename(&self.temp, &self.dir, &self.rel)
            .map_err(|e| io_error(&path, e))?;
        Ok(path)
    }

    /// Drop the temporary file (the upload failed).
    pub fn abandon(self) {
        let _ = self.dir.remove_file(&self.temp);
    }
}

/// File `path` under `root`, open for reading, and its size.
pub fn open_file(root: &Path, path: &str) -> Result<(std::fs::File, u64), WorkspaceError> {
    let rel = relative(path)?;
    let dir = open(root)?;
    let meta = dir.metadata(&rel).map_err(|e| io_error(path, e))?;
    if !meta.is_file() {
        return Err(WorkspaceError::NotFound(path.to_owned()));
    }
    let file = dir.open(&rel).map_err(|e| io_error(path, e))?;
    Ok((file.into_std(), meta.len()))
}

/// Delete file `path` under `root` (a directory: `NotFound`).
pub fn remove(root: &Path, path: &str) -> Result<(), WorkspaceError> {
    let rel = relative(path)?;
    let dir = open(root)?;
    let meta = dir.symlink_metadata(&rel).map_err(|e| io_error(path, e))?;
    if meta.is_dir() {
        return Err(WorkspaceError::NotFound(path.to_owned()));
    }
    dir.remove_file(&rel).map_err(|e| io_error(path, e))
}

/// The modification time and size of file `path` under `root`, found as
/// [`read`] finds it (a symlink or `..` that leads out of `root` is not
/// followed): none when there is no such file.
pub fn stat(root: &Path, path: &str) -> Option<(std::time::SystemTime, u64)> {
    let rel = relative(path).ok()?;
    let meta = open(root).ok()?.metadata(&rel).ok()?;
    Some((meta.modified().ok()?.into_std(), meta.len()))
}

/// Read `path` under `root`: (file name, bytes), at most `max` bytes.
pub fn read(root: &Path, path: &str, max: usize) -> Result<(String, Vec<u8>), WorkspaceError> {
    let rel = relative(path)?;
    let dir = open(root)?;
    let meta = dir.metadata(&rel).map_err(|e| io_error(path, e))?;
    if !meta.is_file() {
        return Err(WorkspaceError::NotFound(path.to_owned()));
    }
    if meta.len() > max as u64 {
        return Err(WorkspaceError::TooLarge(format!(
            "`{path}` is {} bytes, over the {max}-byte download limit",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    dir.open(&rel)
        .map_err(|e| io_error(path, e))?
        .read_to_end(&mut bytes)?;
    let name = rel
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((name, bytes))
}

/// The workspace as XAgent's tree: `{"name","type":"directory","children":[...]}`.
/// Symlinks are listed as files and not followed.
pub fn tree(root: &Path) -> Result<Value, WorkspaceError> {
    let dir = open(root)?;
    let mut budget = MAX_TREE_ENTRIES;
    let children = walk(&dir, &mut budget)?;
    let mut out = json!({"name": "workspace", "type": "directory", "children": children});
    if budget == 0 {
        out["truncated"] = json!(true);
    }
    Ok(out)
}

/// A [`tree`] drawn as text, the way XAgent's `print_filesys_struture` draws
/// it for its prompts: one line per entry, directories with a `/`, the root
/// line first when `with_root`.
pub fn tree_text(tree: &Value, with_root: bool) -> String {
    fn draw(children: &Value, prefix: &str, out: &mut String) {
        let list = children.as_array().map(Vec::as_slice).unwrap_or_default();
        for (i, child) in list.iter().enumerate() {
            let last = i + 1 == list.len();
            let name = child["name"].as_str().unwrap_or_default();
            let is_dir = child["type"] == "directory";
            out.push_str(prefix);
            out.push_str(if last { "└── " } else { "├── " });
            out.push_str(name);
            if is_dir {
                out.push('/');
            }
            out.push('\n');
            if is_dir {
                let deeper = format!("{prefix}{}", if last { "    " } else { "│   " });
                draw(&child["children"], &deeper, out);
            }
        }
    }
    let mut out = String::new();
    if with_root {
        out.push_str(tree["name"].as_str().unwrap_or("workspace"));
        out.push_str("/\n");
    }
    draw(&tree["children"], "", &mut out);
    if tree["truncated"] == true {
        out.push_str("... (more entries not shown)\n");
    }
    out
}

fn walk(dir: &Dir, budget: &mut usize) -> Result<Vec<Value>, WorkspaceError> {
    let mut entries: Vec<_> = dir.entries()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    let mut out = Vec::new();
    for entry in entries {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            let sub = entry.open_dir()?;
            out.push(json!({"name": name, "type": "directory", "children": walk(&sub, budget)?}));
        } else {
            out.push(json!({"name": name, "type": "file"}));
        }
    }
    Ok(out)
}

/// The whole workspace as a zip archive, at most `max` bytes of file content.
pub fn zip(root: &Path, max: usize) -> Result<Vec<u8>, WorkspaceError> {
    let dir = open(root)?;
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options: zip::write::SimpleFileOptions = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let mut total = 0usize;
    add_dir(&dir, "", &mut writer, options, &mut total, max)?;
    let cursor = writer
        .finish()
        .map_err(|e| WorkspaceError::Io(std::io::Error::other(e)))?;
    Ok(cursor.into_inner())
}

fn add_dir(
    dir: &Dir,
    prefix: &str,
    writer: &mut zip::ZipWriter<std::io::Cursor<Vec<u8>>>,
    options: zip::write::SimpleFileOptions,
    total: &mut usize,
    max: usize,
) -> Result<(), WorkspaceError> {
    let zip_err = |e: zip::result::ZipError| WorkspaceError::Io(std::io::Error::other(e));
    let mut entries: Vec<_> = dir.entries()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            writer
                .add_directory(format!("{name}/"), options)
                .map_err(zip_err)?;
            add_dir(
                &entry.open_dir()?,
                &format!("{name}/"),
                writer,
                options,
                total,
                max,
            )?;
        } else if kind.is_file() {
            let mut bytes = Vec::new();
            entry.open()?.read_to_end(&mut bytes)?;
            *total += bytes.len();
            if *total > max {
                return Err(WorkspaceError::TooLarge(format!(
                    "the workspace holds over {max} bytes; download files one by one"
                )));
            }
            writer.start_file(name, options).map_err(zip_err)?;
            writer.write_all(&bytes)?;
        }
        // Symlinks and other kinds are left out.
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_draw_as_text() {
        let t = json!({"name": "workspace", "type": "directory", "children": [
            {"name": "a.txt", "type": "file"},
            {"name": "d", "type": "directory", "children": [
                {"name": "e", "type": "directory", "children": [{"name": "f.py", "type": "file"}]},
                {"name": "g", "type": "file"}
            ]},
            {"name": "z", "type": "file"}
        ]});
        assert_eq!(
            tree_text(&t, true),
            "workspace/\n├── a.txt\n├── d/\n│   ├── e/\n│   │   └── f.py\n│   └── g\n└── z\n"
        );
        assert!(tree_text(&t, false).starts_with("├── a.txt"));
        let empty = json!({"name": "workspace", "type": "directory", "children": []});
        assert_eq!(tree_text(&empty, true), "workspace/\n");
    }

    #[test]
    fn paths_stay_inside() {
        assert_eq!(relative("a/b.txt").unwrap(), PathBuf::from("a/b.txt"));
        assert_eq!(
            relative("/workspace/a.txt").unwrap(),
            PathBuf::from("a.txt")
        );
        assert_eq!(relative("./a.txt").unwrap(), PathBuf::from("a.txt"));
        for bad in ["../x", "a/../../x", "/etc/passwd", "", ".", "a/.."] {
            assert!(relative(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn write_read_tree_zip_and_symlinks() {
        let root = tempfile::tempdir().unwrap();
        write(root.path(), "d/e/f.txt", b"hello").unwrap();
        assert_eq!(
            read(root.path(), "d/e/f.txt", 100).unwrap(),
            ("f.txt".into(), b"hello".to_vec())
        );
        assert!(matches!(
            read(root.path(), "d/e/f.txt", 2),
            Err(WorkspaceError::TooLarge(_))
        ));
        assert!(matches!(
            read(root.path(), "nope", 100),
            Err(WorkspaceError::NotFound(_))
        ));
        // A path through a file is a path that does not exist.
        assert!(matches!(
            read(root.path(), "d/e/f.txt/g", 100),
            Err(WorkspaceError::NotFound(_))
        ));
        // A name too long for the filesystem is the caller's bad path.
        let long = "c".repeat(300);
        assert!(matches!(
            read(root.path(), &long, 10),
            Err(WorkspaceError::BadPath(_))
        ));
        assert!(matches!(
            write(root.path(), &format!("d/{long}"), b"x"),
            Err(WorkspaceError::BadPath(_))
        ));
        // A symlink pointing out of the workspace is not followed.
        std::os::unix::fs::symlink("/etc", root.path().join("out")).unwrap();
        assert!(read(root.path(), "out/passwd", 1 << 20).is_err());
        assert!(write(root.path(), "out/x", b"x").is_err());
        let t = tree(root.path()).unwrap();
        assert_eq!(t["children"][0]["name"], "d");
        assert_eq!(
            t["children"][0]["children"][0]["children"][0]["name"],
            "f.txt"
        );
        assert_eq!(t["children"][1], json!({"name": "out", "type": "file"}));
        let z = zip(root.path(), 1 << 20).unwrap();
        assert_eq!(&z[..2], b"PK");
        assert!(matches!(
            zip(root.path(), 2),
            Err(WorkspaceError::TooLarge(_))
        ));
    }

    #[test]
    fn stat_finds_what_read_finds_and_nothing_outside() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::fs::write(root.path().join("a.txt"), "abc").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("out")).unwrap();
        std::os::unix::fs::symlink("a.txt", root.path().join("alias")).unwrap();
        assert_eq!(stat(root.path(), "a.txt").map(|s| s.1), Some(3));
        assert_eq!(stat(root.path(), "alias").map(|s| s.1), Some(3));
        assert!(stat(root.path(), "out/secret").is_none());
        assert!(stat(root.path(), "../x").is_none());
        assert!(read(root.path(), "out/secret", 100).is_err());
    }
}
