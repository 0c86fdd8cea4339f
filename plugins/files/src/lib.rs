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
//! The logic that does not touch the file system (path checks, line windows,
//! edits) is in pure functions with unit tests; the file operations take the
//! workspace root as a parameter so that they are tested natively too.

use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use toolhost_sdk::{Deserialize, Json, JsonSchema, Serialize, ToolError, input};

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

fn modify_in(root: &Path, input: ModifyInput) -> Result<String, ToolError> {
    let rel = relative_path(&input.path, false).map_err(ToolError::invalid_input)?;
    let edit = Edit::from_input(&input).map_err(ToolError::invalid_input)?;
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

// ---------------------------------------------------------------------------
// Pure logic
// ---------------------------------------------------------------------------

/// Check an agent's path and normalise it to a plain relative path inside the
/// workspace: `a/./b//c` becomes `a/b/c`; `.` (the root itself) becomes the
/// empty string, which only `allow_root` accepts.
pub fn relative_path(path: &str, allow_root: bool) -> Result<String, String> {
    if path.len() > MAX_PATH_BYTES {
        return Err(format!(
            "path is {} bytes long; the limit is {MAX_PATH_BYTES}",
            path.len()
        ));
    }
    if path.contains('\0') {
        return Err("path contains a NUL byte".to_owned());
    }
    if path.is_empty() {
        return Err(if allow_root {
            "path is empty; use `.` for the workspace root".to_owned()
        } else {
            "path is empty; give a path relative to the workspace root, e.g. `notes/todo.txt`"
                .to_owned()
        });
    }
    if path.starts_with('/') {
        return Err(format!(
            "path `{path}` is absolute; paths are relative to the workspace root, e.g. `notes/todo.txt`"
        ));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "path `{path}` contains `..`; paths must stay inside the workspace"
                ));
            }
            _ => parts.push(part),
        }
    }
    if parts.is_empty() && !allow_root {
        return Err(format!(
            "path `{path}` names the workspace root, not a file"
        ));
    }
    Ok(parts.join("/"))
}

/// Which lines of a file `read` returns.
#[derive(Debug, Clone)]
pub struct Window {
    /// First line, from 1.
    pub offset_line: u32,
    /// Most lines, if limited.
    pub max_lines: Option<u32>,
    /// Most bytes of text.
    pub max_bytes: usize,
}

#[derive(Debug)]
pub enum WindowError {
    Io(io::Error),
    /// The file is not UTF-8; the 1-based line where that shows.
    NotUtf8 {
        line: u64,
    },
    /// `offset_line` is past the last line.
    PastEnd {
        offset_line: u32,
        lines: u64,
    },
    /// The window holds more than `max_bytes`; the line where it stopped.
    TooLarge {
        line: u64,
    },
    /// `offset_line` is 0.
    ZeroOffset,
}

impl WindowError {
    fn message(&self) -> String {
        match self {
            WindowError::Io(e) => e.to_string(),
            WindowError::NotUtf8 { line } => format!("not UTF-8 text (at line {line})"),
            WindowError::PastEnd { offset_line, lines } => {
                format!("offset_line {offset_line} is past the end of the file ({lines} lines)")
            }
            WindowError::TooLarge { line } => format!(
                "the text from the offset to line {line} is larger than {} KiB; read it in parts with \
                 offset_line and max_lines",
                MAX_READ_BYTES >> 10
            ),
            WindowError::ZeroOffset => "offset_line counts from 1".to_owned(),
        }
    }
}

/// Read the lines of `window` from `reader`, keeping their line endings, without
/// holding more of the file than the window in memory. A line is a run of
/// bytes ending with `\n` or at the end of the file: `a\nb` and `a\nb\n` both
/// have two lines, an empty file has none.
pub fn read_window(mut reader: impl BufRead, window: &Window) -> Result<String, WindowError> {
    if window.offset_line == 0 {
        return Err(WindowError::ZeroOffset);
    }
    let first = u64::from(window.offset_line);
    let last = window.max_lines.map(|n| first + u64::from(n));
    let mut out = Vec::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        if last.is_some_and(|last| number + 1 >= last) {
            break;
        }
        line.clear();
        if reader
            .read_until(b'\n', &mut line)
            .map_err(WindowError::Io)?
            == 0
        {
            break;
        }
        number += 1;
        // `\n` never occurs inside a multi-byte character, so checking line by
        // line is exact.
        if std::str::from_utf8(&line).is_err() {
            return Err(WindowError::NotUtf8 { line: number });
        }
        if number >= first {
            if out.len() + line.len() > window.max_bytes {
                return Err(WindowError::TooLarge { line: number });
            }
            out.extend_from_slice(&line);
        }
    }
    if first > 1 && number < first {
        return Err(WindowError::PastEnd {
            offset_line: window.offset_line,
            lines: number,
        });
    }
    Ok(String::from_utf8(out).expect("checked line by line"))
}

/// One `modify` edit.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// Replace the 1-based inclusive line range with `new_text`.
    Lines {
        start: u32,
        end: u32,
        new_text: String,
    },
    /// Replace `old_text` by `new_text`, once or everywhere.
    Text {
        old_text: String,
        new_text: String,
        all: bool,
    },
}

impl Edit {
    fn from_input(input: &ModifyInput) -> Result<Edit, String> {
        Edit::new(
            input.start_line,
            input.end_line,
            input.old_text.as_deref(),
            input.replace_all,
            &input.new_text,
        )
    }

    /// The edit the optional fields describe: exactly one of a line range
    /// (`start_line`, optionally `end_line`) or `old_text`.
    pub fn new(
        start_line: Option<u32>,
        end_line: Option<u32>,
        old_text: Option<&str>,
        replace_all: Option<bool>,
        new_text: &str,
    ) -> Result<Edit, String> {
        let new_text = new_text.to_owned();
        match (start_line, end_line, old_text) {
            (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
                Err("give either a line range (start_line, end_line) or old_text, not both".to_owned())
            }
            (None, None, Some("")) => Err("old_text is empty".to_owned()),
            (None, None, Some(old)) => Ok(Edit::Text {
                old_text: old.to_owned(),
                new_text,
                all: replace_all.unwrap_or(false),
            }),
            (_, _, None) if replace_all == Some(true) => {
                Err("replace_all applies only to old_text; give old_text to replace text".to_owned())
            }
            (Some(start), end, None) => Ok(Edit::Lines {
                start,
                end: end.unwrap_or(start),
                new_text,
            }),
            (None, Some(_), None) => Err("end_line needs start_line".to_owned()),
            (None, None, None) => Err(
                "say what to replace: start_line (and end_line) for a range of lines, or old_text for a text"
                    .to_owned(),
            ),
        }
    }

    /// Apply the edit to `text`: the new text and a summary of what changed.
    pub fn apply(&self, text: &str) -> Result<(String, String), String> {
        match self {
            Edit::Lines {
                start,
                end,
                new_text,
            } => replace_lines(text, *start, *end, new_text),
            Edit::Text {
                old_text,
                new_text,
                all,
            } => replace_text(text, old_text, new_text, *all),
        }
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Replace lines `start..=end` (from 1) of `text` with `new_text`. The lines go
/// with their line endings; `new_text` gets the last replaced line's ending if
/// it lacks one, and an empty `new_text` deletes the lines.
fn replace_lines(
    text: &str,
    start: u32,
    end: u32,
    new_text: &str,
) -> Result<(String, String), String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let (start, end) = (start as usize, end as usize);
    if start == 0 {
        return Err("lines count from 1".to_owned());
    }
    if start > end {
        return Err(format!("start_line {start} is after end_line {end}"));
    }
    if end > lines.len() {
        return Err(format!(
            "lines {start}-{end} are out of range: the file has {}",
            plural(lines.len(), "line")
        ));
    }
    let last = lines[end - 1];
    let ending = if last.ends_with("\r\n") {
        "\r\n"
    } else if last.ends_with('\n') {
        "\n"
    } else {
        ""
    };
    let mut out = String::with_capacity(text.len() + new_text.len() + ending.len());
    out.extend(lines[..start - 1].iter().copied());
    out.push_str(new_text);
    if !new_text.is_empty() && !new_text.ends_with('\n') {
        out.push_str(ending);
    }
    out.extend(lines[end..].iter().copied());
    let old = if start == end {
        format!("line {start}")
    } else {
        format!("lines {start}-{end}")
    };
    let inserted = new_text.split_inclusive('\n').count();
    let total = out.split_inclusive('\n').count();
    let summary = format!(
        "replaced {old} with {}; the file now has {}",
        plural(inserted, "line"),
        plural(total, "line")
    );
    Ok((out, summary))
}

/// Replace the first (or every) occurrence of `old` in `text` with `new`.
fn replace_text(text: &str, old: &str, new: &str, all: bool) -> Result<(String, String), String> {
    let count = text.matches(old).count();
    if count == 0 {
        return Err(
            "old_text was not found (it must match exactly, including whitespace and line breaks)"
                .to_owned(),
        );
    }
    Ok(if all {
        (
            text.replace(old, new),
            format!("replaced {}", plural(count, "occurrence")),
        )
    } else if count == 1 {
        (
            text.replacen(old, new, 1),
            "replaced 1 occurrence".to_owned(),
        )
    } else {
        (
            text.replacen(old, new, 1),
            format!("replaced the first of {count} occurrences (replace_all replaces them all)"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::path::PathBuf;

    // -- paths ---------------------------------------------------------------

    #[test]
    fn relative_paths_are_normalised() {
        assert_eq!(
            relative_path("notes/todo.txt", false).unwrap(),
            "notes/todo.txt"
        );
        assert_eq!(relative_path("./a//b/./c/", false).unwrap(), "a/b/c");
        assert_eq!(relative_path("a b/ü.txt", false).unwrap(), "a b/ü.txt");
        assert_eq!(relative_path("..foo/bar..", false).unwrap(), "..foo/bar..");
        assert_eq!(relative_path(".", true).unwrap(), "");
        assert_eq!(relative_path("./", true).unwrap(), "");
        assert_eq!(relative_path("dir", true).unwrap(), "dir");
    }

    #[test]
    fn escaping_paths_are_refused() {
        for path in [
            "/etc/passwd",
            "/workspace/../etc/passwd",
            "/workspace/a",
            "/",
        ] {
            let e = relative_path(path, true).unwrap_err();
            assert!(e.contains("is absolute"), "{path}: {e}");
        }
        for path in [
            "..",
            "../bob/x.txt",
            "notes/../../x",
            "a/..",
            "a/../b",
            "./..",
        ] {
            let e = relative_path(path, true).unwrap_err();
            assert!(e.contains("contains `..`"), "{path}: {e}");
        }
    }

    #[test]
    fn malformed_paths_are_refused() {
        assert!(
            relative_path("", false)
                .unwrap_err()
                .starts_with("path is empty")
        );
        assert!(
            relative_path("", true)
                .unwrap_err()
                .starts_with("path is empty")
        );
        assert!(
            relative_path(".", false)
                .unwrap_err()
                .contains("names the workspace root")
        );
        assert!(
            relative_path(".//./", false)
                .unwrap_err()
                .contains("names the workspace root")
        );
        assert_eq!(
            relative_path("a\0b", false).unwrap_err(),
            "path contains a NUL byte"
        );
        let long = "a/".repeat(2049);
        assert!(
            relative_path(&long, false)
                .unwrap_err()
                .contains("the limit is 4096")
        );
        assert!(relative_path(&"a".repeat(4096), false).is_ok());
    }

    // -- read windows --------------------------------------------------------

    fn window(text: &str, offset_line: u32, max_lines: Option<u32>) -> Result<String, WindowError> {
        let w = Window {
            offset_line,
            max_lines,
            max_bytes: 32,
        };
        read_window(Cursor::new(text.as_bytes().to_vec()), &w)
    }

    #[test]
    fn windows_of_lines() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(window(text, 1, None).unwrap(), text);
        assert_eq!(window(text, 2, None).unwrap(), "two\nthree\n");
        assert_eq!(window(text, 2, Some(1)).unwrap(), "two\n");
        assert_eq!(window(text, 1, Some(2)).unwrap(), "one\ntwo\n");
        assert_eq!(window(text, 3, Some(10)).unwrap(), "three\n");
        assert_eq!(window("a\r\nb", 2, None).unwrap(), "b");
        assert_eq!(window("", 1, None).unwrap(), "");
        assert_eq!(window("no newline", 1, Some(1)).unwrap(), "no newline");
    }

    #[test]
    fn window_errors() {
        let text = "one\ntwo\nthree\n";
        assert!(matches!(
            window(text, 4, None),
            Err(WindowError::PastEnd {
                offset_line: 4,
                lines: 3
            })
        ));
        assert!(matches!(
            window("", 2, None),
            Err(WindowError::PastEnd { lines: 0, .. })
        ));
        assert!(matches!(
            window(text, 0, None),
            Err(WindowError::ZeroOffset)
        ));
        let bytes = [b"ok\n".as_slice(), b"bad \xff\n"].concat();
        let w = Window {
            offset_line: 1,
            max_lines: None,
            max_bytes: 100,
        };
        assert!(matches!(
            read_window(Cursor::new(bytes), &w),
            Err(WindowError::NotUtf8 { line: 2 })
        ));
        let big = "0123456789\n".repeat(10);
        assert!(matches!(
            window(&big, 1, None),
            Err(WindowError::TooLarge { line: 3 })
        ));
        // A window that fits is fine even in a big file.
        assert_eq!(
            window(&big, 5, Some(2)).unwrap(),
            "0123456789\n0123456789\n"
        );
    }

    // -- edits ---------------------------------------------------------------

    fn lines(start: u32, end: Option<u32>, new_text: &str) -> Edit {
        Edit::new(Some(start), end, None, None, new_text).unwrap()
    }

    #[test]
    fn edit_modes_are_exclusive() {
        assert_eq!(
            Edit::new(Some(2), None, None, None, "x").unwrap(),
            Edit::Lines {
                start: 2,
                end: 2,
                new_text: "x".into()
            }
        );
        assert_eq!(
            Edit::new(None, None, Some("a"), Some(true), "b").unwrap(),
            Edit::Text {
                old_text: "a".into(),
                new_text: "b".into(),
                all: true
            }
        );
        let both = Edit::new(Some(1), None, Some("a"), None, "b").unwrap_err();
        assert!(both.contains("not both"), "{both}");
        assert!(
            Edit::new(None, Some(1), Some("a"), None, "b")
                .unwrap_err()
                .contains("not both")
        );
        assert!(
            Edit::new(None, None, None, None, "b")
                .unwrap_err()
                .starts_with("say what to replace")
        );
        assert_eq!(
            Edit::new(None, Some(3), None, None, "b").unwrap_err(),
            "end_line needs start_line"
        );
        assert_eq!(
            Edit::new(None, None, Some(""), None, "b").unwrap_err(),
            "old_text is empty"
        );
        assert!(
            Edit::new(Some(1), None, None, Some(true), "b")
                .unwrap_err()
                .contains("replace_all applies only")
        );
    }

    #[test]
    fn replacing_lines() {
        let text = "one\ntwo\nthree\n";
        let (out, summary) = lines(2, Some(2), "TWO").apply(text).unwrap();
        assert_eq!(out, "one\nTWO\nthree\n");
        assert_eq!(
            summary,
            "replaced line 2 with 1 line; the file now has 3 lines"
        );
        let (out, summary) = lines(1, Some(2), "a\nb\nc\n").apply(text).unwrap();
        assert_eq!(out, "a\nb\nc\nthree\n");
        assert_eq!(
            summary,
            "replaced lines 1-2 with 3 lines; the file now has 4 lines"
        );
        // Deleting.
        assert_eq!(lines(2, Some(3), "").apply(text).unwrap().0, "one\n");
        assert_eq!(lines(1, Some(3), "").apply(text).unwrap().0, "");
        // The last line without a newline stays without one.
        assert_eq!(lines(2, None, "B").apply("a\nb").unwrap().0, "a\nB");
        // CRLF endings are kept.
        assert_eq!(
            lines(1, None, "X").apply("a\r\nb\r\n").unwrap().0,
            "X\r\nb\r\n"
        );
    }

    #[test]
    fn line_range_errors() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(
            lines(3, Some(2), "x").apply(text).unwrap_err(),
            "start_line 3 is after end_line 2"
        );
        assert_eq!(
            lines(2, Some(4), "x").apply(text).unwrap_err(),
            "lines 2-4 are out of range: the file has 3 lines"
        );
        assert!(
            lines(1, None, "x")
                .apply("")
                .unwrap_err()
                .contains("the file has 0 lines")
        );
        assert_eq!(
            lines(0, Some(1), "x").apply(text).unwrap_err(),
            "lines count from 1"
        );
    }

    #[test]
    fn replacing_text() {
        let text = "a-b-a-b";
        let first = Edit::new(None, None, Some("a"), None, "X").unwrap();
        let (out, summary) = first.apply(text).unwrap();
        assert_eq!(out, "X-b-a-b");
        assert!(
            summary.starts_with("replaced the first of 2 occurrences"),
            "{summary}"
        );
        let all = Edit::new(None, None, Some("a"), Some(true), "X").unwrap();
        assert_eq!(
            all.apply(text).unwrap(),
            ("X-b-X-b".to_owned(), "replaced 2 occurrences".to_owned())
        );
        let once = Edit::new(None, None, Some("-b-a"), Some(false), "").unwrap();
        assert_eq!(
            once.apply(text).unwrap(),
            ("a-b".to_owned(), "replaced 1 occurrence".to_owned())
        );
        let missing = Edit::new(None, None, Some("zzz"), None, "X").unwrap();
        assert!(
            missing
                .apply(text)
                .unwrap_err()
                .starts_with("old_text was not found")
        );
    }

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
