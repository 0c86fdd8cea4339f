//! Agents' paths: checked and normalised to plain relative paths inside the
//! workspace.

use crate::MAX_PATH_BYTES;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
