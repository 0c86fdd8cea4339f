//! `files`: read, write, modify and list files in the caller's session workspace.
//!
//! The host preopens the session's workspace directory at [`WORKSPACE`] and
//! nothing else, so the WASI sandbox already confines every file operation to
//! it (symlinks pointing out of it included). On top of that, this plugin only
//! accepts plain relative paths: no absolute paths, no `..`, no NUL bytes, so an
//! agent gets a clear message instead of a puzzling "not permitted".
//!
//! Tools (seen by agents as `files_<name>`):
//!
//! - `read {path, offset_line?, max_lines?}`: the text of a file, or a window
//!   of its lines;
//! - `write {path, content, append?}`: create, overwrite or append to a file,
//!   creating parent directories;
//! - `modify {path, new_text, start_line?, end_line?, old_text?, replace_all?}`:
//!   replace a range of lines, or occurrences of a text;
//! - `list {path?, max_depth?}`: a directory tree as JSON;
//! - `delete {path}`: delete a file, or a directory and all it holds, once
//!   the caller has confirmed it (an input request, `toolhost:input/ask`);
//!   where nobody can confirm, nothing is deleted.
//!
//! The logic that does not touch the file system (path checks: `path.rs`,
//! line windows: `window.rs`, edits: `edit.rs`) is in pure functions with unit
//! tests; the file operations take the workspace root as a parameter so that
//! they are tested natively too.

use std::fs;
use std::io::{self, BufReader, Write};
use std::path::Path;

use toolhost_sdk::{Deserialize, Json, JsonSchema, Serialize, ToolError, input};

mod edit;
mod path;
mod window;

pub use edit::Edit;
use edit::plural;
pub use path::relative_path;
pub use window::{Window, WindowError, read_window};

/// Where the host mounts the session workspace inside the sandbox.
pub const WORKSPACE: &str = "/workspace";
/// Longest accepted path, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// Most text `read` returns at once (the host's default output limit is 1 MiB).
pub const MAX_READ_BYTES: usize = 1 << 20;
/// Largest file `modify` edits (it holds the file and its new text in memory).
pub const MAX_MODIFY_BYTES: u64 = 8 << 20;
/// Default and maximum depth of `list`.
pub const DEFAULT_LIST_DEPTH: u32 = 4;
pub const MAX_LIST_DEPTH: u32 = 16;
/// Most entries one `list` returns.
pub const MAX_LIST_ENTRIES: usize = 10_000;

// ---------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadInput {
    /// File path relative to the workspace root, e.g. `notes/todo.txt`.
    path: String,
    /// First line to return, counting from 1 (default 1).
    #[schemars(range(min = 1))]
    offset_line: Option<u32>,
    /// Most lines to return (default: all, up to 1 MiB of text).
    #[schemars(range(min = 1))]
    max_lines: Option<u32>,
}

fn read(input: ReadInput) -> Result<String, ToolError> {
    read_in(Path::new(WORKSPACE), input)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteInput {
    /// File path relative to the workspace root, e.g. `notes/todo.txt`.
    /// Missing parent directories are created.
    path: String,
    /// The text to write.
    content: String,
    /// Append to the file instead of replacing it (default false).
    append: Option<bool>,
}

fn write(input: WriteInput) -> Result<String, ToolError> {
    write_in(Path::new(WORKSPACE), input)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ModifyInput {
    /// File path relative to the workspace root, e.g. `notes/todo.txt`.
    path: String,
    /// The replacement text. In line mode it replaces whole lines: a final
    /// newline is added if missing, and an empty text deletes the lines.
    new_text: String,
    /// Line mode: first line to replace, counting from 1.
    #[schemars(range(min = 1))]
    start_line: Option<u32>,
    /// Line mode: last line to replace, inclusive (default: start_line).
    #[schemars(range(min = 1))]
    end_line: Option<u32>,
    /// Text mode: the exact text to replace (instead of start_line/end_line).
    old_text: Option<String>,
    /// Text mode: replace every occurrence of old_text, not just the first
    /// (default false).
    replace_all: Option<bool>,
}

fn modify(input: ModifyInput) -> Result<String, ToolError> {
    modify_in(Path::new(WORKSPACE), input)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListInput {
    /// Directory path relative to the workspace root (default `.`, the root).
    path: Option<String>,
    /// How many levels below `path` to list (default 4, at most 16); deeper
    /// directories are shown without `children`.
    #[schemars(range(max = 16))]
    max_depth: Option<u32>,
}

/// One file system entry of a `list` result.
#[derive(Debug, Serialize, JsonSchema, PartialEq)]
struct Entry {
    /// File name (for the top entry: the path that was listed).
    name: String,
    /// What it is. Symbolic links are reported, not followed.
    #[serde(rename = "type")]
    kind: EntryKind,
    /// Size in bytes, for files.
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    /// Entries sorted by name, for directories within max_depth; absent for a
    /// directory that was not descended into.
    #[serde(skip_serializing_if = "Option::is_none")]
    children: Option<Vec<Entry>>,
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "lowercase")]
enum EntryKind {
    File,
    Directory,
    Symlink,
}

fn list(input: ListInput) -> Result<Json<Entry>, ToolError> {
    list_in(Path::new(WORKSPACE), input).map(Json)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteInput {
    /// File or directory path relative to the workspace root.
    path: String,
}

/// Asks before it deletes anything, and asks the same question for the same
/// input (the host may run the call again with the answer).
fn delete(input: DeleteInput) -> Result<String, ToolError> {
    let root = Path::new(WORKSPACE);
    let (rel, what) = delete_target(root, &input.path)?;
    let yes = input::confirm("confirm", &format!("Delete {what}?")).map_err(|e| {
        ToolError::failed(format!("`{rel}` not deleted: nobody could confirm ({e})"))
    })?;
    if !yes {
        return Ok(format!("`{rel}` kept: the deletion was not confirmed"));
    }
    delete_in(root, &rel)
}

toolhost_sdk::toolkit! {
    read: "Read a UTF-8 text file from the session workspace. Paths are relative to the \
        workspace root (e.g. `notes/todo.txt`). Optionally return only a window of lines: \
        offset_line (first line, from 1) and max_lines. At most 1 MiB of text per call.",
    write: "Write a text file in the session workspace, replacing it (or appending with \
        append=true). Missing parent directories are created. Paths are relative to the \
        workspace root.",
    modify: "Edit a text file in the session workspace in one of two ways: replace the lines \
        start_line..end_line (1-based, inclusive) with new_text, or replace old_text with \
        new_text (the first occurrence, or all with replace_all=true). Give either the line \
        range or old_text, not both.",
    list: "List a directory of the session workspace as a JSON tree of entries \
        {name, type: file|directory|symlink, size, children}, sorted by name. Defaults to the \
        workspace root, 4 levels deep (max_depth up to 16).",
    delete: "Delete a file, or a directory and everything in it, from the session workspace. \
        The caller is asked to confirm first; without a confirmation nothing is deleted.",
}

// ---------------------------------------------------------------------------
// File operations, relative to a workspace root
// ---------------------------------------------------------------------------

fn read_in(root: &Path, input: ReadInput) -> Result<String, ToolError> {
    let rel = relative_path(&input.path, false).map_err(ToolError::invalid_input)?;
    let full = root.join(&rel);
    if fs::metadata(&full).map_err(|e| io_error(e, &rel))?.is_dir() {
        return Err(ToolError::invalid_input(format!(
            "`{rel}` is a directory; use list to see what it holds"
        )));
    }
    let file = fs::File::open(&full).map_err(|e| io_error(e, &rel))?;
    let window = Window {
        offset_line: input.offset_line.unwrap_or(1),
        max_lines: input.max_lines,
        max_bytes: MAX_READ_BYTES,
    };
    read_window(BufReader::new(file), &window).map_err(|e| match e {
        WindowError::Io(e) => io_error(e, &rel),
        other => ToolError::invalid_input(format!("`{rel}`: {}", other.message())),
    })
}

fn write_in(root: &Path, input: WriteInput) -> Result<String, ToolError> {
    let rel = relative_path(&input.path, false).map_err(ToolError::invalid_input)?;
    let full = root.join(&rel);
    if let Some(parent) = Path::new(&rel)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
    {
        let dir = root.join(parent);
        // On failure, say what is in the way: a file, a symlink out of the
        // workspace (which the sandbox refuses to follow), or something else.
        fs::create_dir_all(&dir).map_err(|e| match fs::metadata(&dir) {
            Err(e) => io_error(e, &rel),
            Ok(m) if !m.is_dir() => {
                ToolError::invalid_input(format!("a parent of `{rel}` is a file, not a directory"))
            }
            Ok(_) => io_error(e, &rel),
        })?;
    }
    if fs::metadata(&full).is_ok_and(|m| m.is_dir()) {
        return Err(ToolError::invalid_input(format!("`{rel}` is a directory")));
    }
    let append = input.append.unwrap_or(false);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .append(append)
        .truncate(!append)
        .open(&full)
        .map_err(|e| io_error(e, &rel))?;
    file.write_all(input.content.as_bytes())
        .and_then(|()| file.flush())
        .map_err(|e| io_error(e, &rel))?;
    let verb = if append { "appended" } else { "wrote" };
    let bytes = input.content.len();
    let unit = if bytes == 1 { "byte" } else { "bytes" };
    Ok(format!("{verb} {bytes} {unit} to {rel}"))
}

/// The edit a `modify` call's optional fields describe.
fn edit_of(input: &ModifyInput) -> Result<Edit, String> {
    Edit::new(
        input.start_line,
        input.end_line,
        input.old_text.as_deref(),
        input.replace_all,
        &input.new_text,
    )
}

fn modify_in(root: &Path, input: ModifyInput) -> Result<String, ToolError> {
    let rel = relative_path(&input.path, false).map_err(ToolError::invalid_input)?;
    let edit = edit_of(&input).map_err(ToolError::invalid_input)?;
    let full = root.join(&rel);
    let meta = fs::metadata(&full).map_err(|e| io_error(e, &rel))?;
    if meta.is_dir() {
        return Err(ToolError::invalid_input(format!("`{rel}` is a directory")));
    }
    if meta.len() > MAX_MODIFY_BYTES {
        return Err(ToolError::invalid_input(format!(
            "`{rel}` is {} bytes; modify edits files up to {} MiB",
            meta.len(),
            MAX_MODIFY_BYTES >> 20
        )));
    }
    let bytes = fs::read(&full).map_err(|e| io_error(e, &rel))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ToolError::invalid_input(format!("`{rel}` is not UTF-8 text")))?;
    let (new, summary) = edit
        .apply(&text)
        .map_err(|e| ToolError::invalid_input(format!("`{rel}`: {e}")))?;
    fs::write(&full, new).map_err(|e| io_error(e, &rel))?;
    Ok(format!("{summary} in {rel}"))
}

fn list_in(root: &Path, input: ListInput) -> Result<Entry, ToolError> {
    let rel = relative_path(input.path.as_deref().unwrap_or("."), true)
        .map_err(ToolError::invalid_input)?;
    let max_depth = input.max_depth.unwrap_or(DEFAULT_LIST_DEPTH);
    if max_depth > MAX_LIST_DEPTH {
        return Err(ToolError::invalid_input(format!(
            "max_depth is {max_depth}; the limit is {MAX_LIST_DEPTH}"
        )));
    }
    let name = if rel.is_empty() {
        ".".to_owned()
    } else {
        rel.clone()
    };
    let mut budget = MAX_LIST_ENTRIES;
    describe(&root.join(&rel), name, &rel, max_depth, &mut budget)
}

/// The checked relative path of what `delete` would delete, and how the
/// confirmation names it.
fn delete_target(root: &Path, path: &str) -> Result<(String, String), ToolError> {
    let rel = relative_path(path, false).map_err(ToolError::invalid_input)?;
    let meta = fs::symlink_metadata(root.join(&rel)).map_err(|e| io_error(e, &rel))?;
    let what = if meta.is_dir() {
        format!("the directory `{rel}` and everything in it")
    } else if meta.file_type().is_symlink() {
        format!("the symlink `{rel}`")
    } else {
        format!("`{rel}` ({})", plural(meta.len() as usize, "byte"))
    };
    Ok((rel, what))
}

fn delete_in(root: &Path, rel: &str) -> Result<String, ToolError> {
    let full = root.join(rel);
    let meta = fs::symlink_metadata(&full).map_err(|e| io_error(e, rel))?;
    if meta.is_dir() {
        fs::remove_dir_all(&full)
    } else {
        fs::remove_file(&full)
    }
    .map_err(|e| io_error(e, rel))?;
    Ok(format!("deleted {rel}"))
}

/// The entry at `full` (shown as `name`, `rel` for messages), with children
/// down to `depth` more levels. `budget` counts the entries still allowed.
fn describe(
    full: &Path,
    name: String,
    rel: &str,
    depth: u32,
    budget: &mut usize,
) -> Result<Entry, ToolError> {
    let meta = fs::symlink_metadata(full).map_err(|e| io_error(e, display(rel)))?;
    let kind = if meta.file_type().is_symlink() {
        EntryKind::Symlink
    } else if meta.is_dir() {
        EntryKind::Directory
    } else {
        EntryKind::File
    };
    let mut entry = Entry {
        name,
        kind,
        size: (kind == EntryKind::File).then_some(meta.len()),
        children: None,
    };
    if kind != EntryKind::Directory || depth == 0 {
        return Ok(entry);
    }
    let mut names = Vec::new();
    for child in fs::read_dir(full).map_err(|e| io_error(e, display(rel)))? {
        let child = child.map_err(|e| io_error(e, display(rel)))?;
        if *budget == 0 {
            return Err(ToolError::invalid_input(format!(
                "more than {MAX_LIST_ENTRIES} entries under `{}`; list a subdirectory or lower max_depth",
                display(rel)
            )));
        }
        *budget -= 1;
        names.push(child.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    let mut children = Vec::with_capacity(names.len());
    for child in names {
        let child_rel = if rel.is_empty() {
            child.clone()
        } else {
            format!("{rel}/{child}")
        };
        children.push(describe(
            &full.join(&child),
            child,
            &child_rel,
            depth - 1,
            budget,
        )?);
    }
    entry.children = Some(children);
    Ok(entry)
}

fn display(rel: &str) -> &str {
    if rel.is_empty() { "." } else { rel }
}

/// An I/O error on `rel` as the agent should see it. Files that do not exist,
/// wrong kinds of files and paths the sandbox refuses (e.g. a symlink out of
/// the workspace) are the agent's to fix; anything else is a tool failure.
fn io_error(err: io::Error, rel: &str) -> ToolError {
    use io::ErrorKind as K;
    let message = match err.kind() {
        K::NotFound => format!("`{rel}` does not exist"),
        K::PermissionDenied => {
            format!("path escapes the workspace or is not accessible: `{rel}` ({err})")
        }
        K::ReadOnlyFilesystem => format!("the workspace is read-only: cannot change `{rel}`"),
        K::IsADirectory => format!("`{rel}` is a directory"),
        K::NotADirectory => format!("a parent of `{rel}` is not a directory"),
        K::AlreadyExists => format!("`{rel}` already exists"),
        K::InvalidFilename | K::InvalidInput => format!("invalid path `{rel}`: {err}"),
        K::DirectoryNotEmpty => format!("`{rel}` is a directory that is not empty"),
        _ => return ToolError::failed(format!("`{rel}`: {err}")),
    };
    ToolError::invalid_input(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    // -- the tools on a real directory ------------------------------------------

    /// A fresh directory standing in for the workspace.
    fn workspace(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("toolhost-files-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn invalid(result: Result<impl std::fmt::Debug, ToolError>) -> String {
        match result {
            Err(ToolError::InvalidInput(m)) => m,
            other => panic!("expected invalid input, got {other:?}"),
        }
    }

    #[test]
    fn write_read_modify_list() {
        let root = workspace("roundtrip");
        let write_input = |path: &str, content: &str, append| WriteInput {
            path: path.into(),
            content: content.into(),
            append,
        };
        let read_input = |path: &str| ReadInput {
            path: path.into(),
            offset_line: None,
            max_lines: None,
        };
        let out = write_in(&root, write_input("notes/todo.txt", "one\ntwo\n", None)).unwrap();
        assert_eq!(out, "wrote 8 bytes to notes/todo.txt");
        let out = write_in(
            &root,
            write_input("./notes//todo.txt", "three\n", Some(true)),
        )
        .unwrap();
        assert_eq!(out, "appended 6 bytes to notes/todo.txt");
        assert_eq!(
            read_in(&root, read_input("notes/todo.txt")).unwrap(),
            "one\ntwo\nthree\n"
        );

        let modify_input = ModifyInput {
            path: "notes/todo.txt".into(),
            new_text: "TWO".into(),
            start_line: Some(2),
            end_line: Some(2),
            old_text: None,
            replace_all: None,
        };
        let out = modify_in(&root, modify_input).unwrap();
        assert_eq!(
            out,
            "replaced line 2 with 1 line; the file now has 3 lines in notes/todo.txt"
        );
        assert_eq!(
            fs::read_to_string(root.join("notes/todo.txt")).unwrap(),
            "one\nTWO\nthree\n"
        );

        write_in(&root, write_input("b.bin", "x", None)).unwrap();
        fs::write(root.join("notes/bad.txt"), b"\xff\xfe").unwrap();
        let tree = list_in(
            &root,
            ListInput {
                path: None,
                max_depth: None,
            },
        )
        .unwrap();
        let json = serde_json::to_value(&tree).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": ".", "type": "directory", "children": [
                {"name": "b.bin", "type": "file", "size": 1},
                {"name": "notes", "type": "directory", "children": [
                    {"name": "bad.txt", "type": "file", "size": 2},
                    {"name": "todo.txt", "type": "file", "size": 14},
                ]},
            ]})
        );
        let shallow = list_in(
            &root,
            ListInput {
                path: Some(".".into()),
                max_depth: Some(1),
            },
        )
        .unwrap();
        assert_eq!(
            shallow.children.as_ref().unwrap()[1].children,
            None,
            "not descended"
        );

        // Errors the agent can fix.
        assert!(invalid(read_in(&root, read_input("notes/bad.txt"))).contains("not UTF-8"));
        assert!(invalid(read_in(&root, read_input("notes"))).contains("is a directory"));
        assert_eq!(
            invalid(read_in(&root, read_input("nope.txt"))),
            "`nope.txt` does not exist"
        );
        assert!(invalid(read_in(&root, read_input("../x"))).contains("contains `..`"));
        assert!(
            invalid(write_in(&root, write_input("notes", "x", None))).contains("is a directory")
        );
        assert_eq!(
            invalid(write_in(&root, write_input("b.bin/x", "x", None))),
            "a parent of `b.bin/x` is a file, not a directory"
        );
        assert!(invalid(write_in(&root, write_input("/tmp/x", "x", None))).contains("is absolute"));
        let max_depth = list_in(
            &root,
            ListInput {
                path: None,
                max_depth: Some(17),
            },
        );
        assert!(invalid(max_depth).contains("the limit is 16"));

        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn symlinks_are_listed_not_followed() {
        let root = workspace("symlinks");
        fs::write(root.join("real.txt"), "hi").unwrap();
        std::os::unix::fs::symlink("real.txt", root.join("link.txt")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc-link")).unwrap();
        let tree = list_in(
            &root,
            ListInput {
                path: None,
                max_depth: None,
            },
        )
        .unwrap();
        let kinds: Vec<_> = tree
            .children
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.kind, e.size))
            .collect();
        assert_eq!(
            kinds,
            [
                ("etc-link".to_owned(), EntryKind::Symlink, None),
                ("link.txt".to_owned(), EntryKind::Symlink, None),
                ("real.txt".to_owned(), EntryKind::File, Some(2)),
            ]
        );
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn delete_names_its_target_then_deletes_it() {
        let root = workspace("delete");
        fs::create_dir_all(root.join("dir/sub")).unwrap();
        fs::write(root.join("dir/sub/a.txt"), "abc").unwrap();
        fs::write(root.join("one.txt"), "x").unwrap();
        std::os::unix::fs::symlink("one.txt", root.join("link")).unwrap();
        let what = |p: &str| delete_target(&root, p).map(|(_, w)| w);
        assert_eq!(what("./one.txt").unwrap(), "`one.txt` (1 byte)");
        assert_eq!(what("dir/sub/a.txt").unwrap(), "`dir/sub/a.txt` (3 bytes)");
        assert_eq!(
            what("dir/").unwrap(),
            "the directory `dir` and everything in it"
        );
        assert_eq!(what("link").unwrap(), "the symlink `link`");
        assert!(invalid(what("missing")).contains("does not exist"));
        assert!(invalid(what("../x")).contains(".."));
        assert!(
            invalid(what(".")).contains("root"),
            "{}",
            invalid(what("."))
        );
        // A symlink goes, not what it points to; a directory goes whole.
        assert_eq!(delete_in(&root, "link").unwrap(), "deleted link");
        assert!(root.join("one.txt").exists());
        assert_eq!(delete_in(&root, "dir").unwrap(), "deleted dir");
        assert!(!root.join("dir").exists());
        fs::remove_dir_all(&root).unwrap();
    }
}
