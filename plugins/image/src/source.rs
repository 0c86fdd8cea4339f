//! Where an image comes from (a workspace file, a URL, base64) and where a
//! result goes (a workspace file). Workspace paths are relative to the
//! session workspace, which the host preopens at `/workspace`; the
//! functions take its root, so they are tested natively too.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use toolhost_sdk::ToolError;

use crate::format::Format;

/// Largest input image, bytes (a file or a download).
pub const MAX_INPUT: usize = 32 << 20;

/// One of the three ways to give an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source<'a> {
    Path(&'a str),
    Url(&'a str),
    Base64(&'a str),
}

impl<'a> Source<'a> {
    /// Exactly one of the three, else the caller's error.
    pub fn one_of(
        path: Option<&'a str>,
        url: Option<&'a str>,
        base64: Option<&'a str>,
    ) -> Result<Source<'a>, ToolError> {
        match (path, url, base64) {
            (Some(p), None, None) => Ok(Source::Path(p)),
            (None, Some(u), None) => Ok(Source::Url(u)),
            (None, None, Some(b)) => Ok(Source::Base64(b)),
            _ => Err(ToolError::invalid_input(
                "give the image as exactly one of `path` (a workspace file), `url` or `base64`",
            )),
        }
    }
}

/// An input image's bytes and, for a workspace file, its clean path.
pub struct Input {
    pub bytes: Vec<u8>,
    pub path: Option<String>,
}

/// `path` as a clean path relative to the workspace: a leading `/workspace/`
/// (how agents see it) is dropped; absolute paths, `..` and empty paths are
/// refused.
pub fn relative(path: &str) -> Result<String, ToolError> {
    let trimmed = path
        .strip_prefix("/workspace/")
        .or_else(|| path.strip_prefix("workspace/"))
        .unwrap_or(path);
    let bad = || {
        ToolError::invalid_input(format!(
            "`{path}` is not a workspace path: use a relative path such as `photos/cat.jpg`"
        ))
    };
    if trimmed.starts_with('/') || trimmed.contains('\\') || trimmed.contains('\0') {
        return Err(bad());
    }
    let mut parts = Vec::new();
    for part in trimmed.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(bad()),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(bad());
    }
    Ok(parts.join("/"))
}

/// Read `source`: a file under `root`, a download through wasi:http, or
/// base64 (a `data:` URL prefix is accepted).
pub fn load(root: &Path, source: Source<'_>) -> Result<Input, ToolError> {
    match source {
        Source::Path(p) => {
            let rel = relative(p)?;
            let bytes = read_file(root, &rel)?;
            Ok(Input {
                bytes,
                path: Some(rel),
            })
        }
        Source::Url(u) => Ok(Input {
            bytes: download(u)?,
            path: None,
        }),
        Source::Base64(b) => Ok(Input {
            bytes: from_base64(b)?,
            path: None,
        }),
    }
}

fn read_file(root: &Path, rel: &str) -> Result<Vec<u8>, ToolError> {
    let full = root.join(rel);
    let meta = fs::metadata(&full).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => {
            ToolError::invalid_input(format!("no file `{rel}` in the workspace"))
        }
        _ => ToolError::invalid_input(format!("cannot read `{rel}`: {e}")),
    })?;
    if !meta.is_file() {
        return Err(ToolError::invalid_input(format!("`{rel}` is not a file")));
    }
    if meta.len() > MAX_INPUT as u64 {
        return Err(too_large(meta.len()));
    }
    fs::read(&full).map_err(|e| ToolError::failed(format!("cannot read `{rel}`: {e}")))
}

fn too_large(bytes: u64) -> ToolError {
    ToolError::invalid_input(format!(
        "the image is {:.1} MiB; at most {} MiB",
        bytes as f64 / f64::from(1 << 20),
        MAX_INPUT >> 20
    ))
}

/// Decode base64 (standard or URL-safe alphabet, padding optional,
/// whitespace ignored, an optional `data:...;base64,` prefix).
pub fn from_base64(text: &str) -> Result<Vec<u8>, ToolError> {
    let body = match text.trim_start().strip_prefix("data:") {
        Some(rest) => {
            rest.split_once(',')
                .filter(|(meta, _)| meta.ends_with(";base64"))
                .ok_or_else(|| {
                    ToolError::invalid_input(
                        "a `data:` URL in `base64` must be `data:<type>;base64,<data>`",
                    )
                })?
                .1
        }
        None => text,
    };
    let clean: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    if clean.len() / 4 * 3 > MAX_INPUT + 3 {
        return Err(too_large((clean.len() / 4 * 3) as u64));
    }
    let config =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let engine = if clean.contains(['-', '_']) {
        GeneralPurpose::new(&base64::alphabet::URL_SAFE, config)
    } else {
        GeneralPurpose::new(&base64::alphabet::STANDARD, config)
    };
    engine
        .decode(clean.as_bytes())
        .map_err(|e| ToolError::invalid_input(format!("`base64` is not valid base64: {e}")))
}

#[cfg(target_arch = "wasm32")]
fn download(url: &str) -> Result<Vec<u8>, ToolError> {
    use toolhost_sdk::http;
    let parsed = http::parse_url(url)?;
    toolhost_sdk::host::progress(&format!("GET {parsed}"), None, None);
    let response = match http::get(&parsed, "toolhost-image/0.1", MAX_INPUT, "image") {
        Ok(r) => r,
        // A host outside the allow-list is the caller's choice of URL, not a
        // failure of the tool: 422, the SDK's message kept (it names the
        // manifest's [http] allow).
        Err(ToolError::Failed(m)) if m.starts_with("HTTP request denied") => {
            return Err(ToolError::InvalidInput(m));
        }
        Err(e) => return Err(e),
    };
    if !(200..300).contains(&response.status) {
        return Err(ToolError::invalid_input(format!(
            "{parsed} answered HTTP {}",
            response.status
        )));
    }
    if response.cut {
        return Err(ToolError::invalid_input(format!(
            "{parsed} is larger than {} MiB",
            MAX_INPUT >> 20
        )));
    }
    Ok(response.body)
}

/// Outside wasm there is no wasi:http: native unit tests refuse URLs.
#[cfg(not(target_arch = "wasm32"))]
fn download(url: &str) -> Result<Vec<u8>, ToolError> {
    Err(ToolError::failed(format!(
        "cannot fetch {url}: URLs are fetched only inside the sandbox"
    )))
}

/// Write `bytes` to workspace path `rel` under `root` (folders made as
/// needed), whole or not at all: written aside, then renamed over.
pub fn write(root: &Path, rel: &str, bytes: &[u8]) -> Result<(), ToolError> {
    let full = root.join(rel);
    let io = |e: io::Error| ToolError::failed(format!("cannot write `{rel}`: {e}"));
    if let Some(dir) = full.parent() {
        fs::create_dir_all(dir).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory => {
                ToolError::invalid_input(format!("cannot write `{rel}`: a parent is a file"))
            }
            _ => io(e),
        })?;
    }
    if full.is_dir() {
        return Err(ToolError::invalid_input(format!("`{rel}` is a folder")));
    }
    let name = full.file_name().and_then(|n| n.to_str()).unwrap_or("image");
    let tmp = full.with_file_name(format!(".{name}.tmp"));
    let mut f = fs::File::create(&tmp).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    drop(f);
    fs::rename(&tmp, &full).map_err(io)
}

/// Where a result goes when the caller named no `output`: beside a
/// workspace input as `<stem>.<op>.<ext>`, else `images/<op>-<hash>.<ext>`
/// (a hash of the result, so the same result keeps its name).
pub fn default_output(input: Option<&str>, op: &str, format: Format, bytes: &[u8]) -> String {
    let ext = format.extension();
    match input {
        Some(path) => {
            let (dir, name) = match path.rsplit_once('/') {
                Some((d, n)) => (Some(d), n),
                None => (None, path),
            };
            let stem = match name.rsplit_once('.') {
                Some((s, _)) if !s.is_empty() => s,
                _ => name,
            };
            match dir {
                Some(d) => format!("{d}/{stem}.{op}.{ext}"),
                None => format!("{stem}.{op}.{ext}"),
            }
        }
        None => format!("images/{op}-{:08x}.{ext}", fnv1a(bytes) as u32),
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_source() {
        assert_eq!(
            Source::one_of(Some("a.png"), None, None).unwrap(),
            Source::Path("a.png")
        );
        assert!(Source::one_of(None, None, None).is_err());
        assert!(Source::one_of(Some("a.png"), Some("http://x/"), None).is_err());
    }

    #[test]
    fn workspace_paths_stay_inside() {
        assert_eq!(relative("/workspace/a/b.png").unwrap(), "a/b.png");
        assert_eq!(relative("./a//b.png").unwrap(), "a/b.png");
        for bad in [
            "/etc/passwd",
            "../x.png",
            "a/../../x.png",
            "",
            "/workspace/",
            "a\\b",
        ] {
            assert!(
                matches!(relative(bad), Err(ToolError::InvalidInput(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn base64_in_its_usual_spellings() {
        let want = b"\x89PNG\r\n\x1a\n\xff\xfe".to_vec();
        for text in [
            "iVBORw0KGgr//g==",
            "iVBORw0KGgr//g",
            "iVBO Rw0K\nGgr//g==",
            "iVBORw0KGgr__g",
            "data:image/png;base64,iVBORw0KGgr//g==",
        ] {
            assert_eq!(from_base64(text).unwrap(), want, "{text}");
        }
        for bad in ["not base64!", "data:image/png,iVBO"] {
            assert!(
                matches!(from_base64(bad), Err(ToolError::InvalidInput(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn files_are_read_and_written_in_the_workspace() {
        let root = tempfile::tempdir().unwrap();
        let err = load(root.path(), Source::Path("missing.png"))
            .err()
            .unwrap();
        assert!(matches!(err, ToolError::InvalidInput(m) if m.contains("no file `missing.png`")));
        write(root.path(), "out/deep/a.png", b"abc").unwrap();
        let input = load(root.path(), Source::Path("/workspace/out/deep/a.png")).unwrap();
        assert_eq!(
            (input.bytes, input.path.as_deref()),
            (b"abc".to_vec(), Some("out/deep/a.png"))
        );
        assert!(matches!(
            load(root.path(), Source::Path("out")),
            Err(ToolError::InvalidInput(_))
        ));
        assert!(matches!(
            write(root.path(), "out", b"x"),
            Err(ToolError::InvalidInput(_))
        ));
        let names: Vec<_> = fs::read_dir(root.path().join("out/deep"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.png"], "no temporary file left");
    }

    #[test]
    fn default_output_names() {
        assert_eq!(
            default_output(Some("p/cat.jpg"), "resize", Format::Jpeg, b""),
            "p/cat.resize.jpg"
        );
        assert_eq!(
            default_output(Some("cat"), "rotate", Format::Png, b""),
            "cat.rotate.png"
        );
        assert_eq!(
            default_output(Some(".hidden"), "crop", Format::Png, b""),
            ".hidden.crop.png"
        );
        let a = default_output(None, "zoom", Format::Png, b"one");
        assert!(
            a.starts_with("images/zoom-")
                && a.ends_with(".png")
                && a.len() == "images/zoom-".len() + 12,
            "{a}"
        );
        assert_ne!(a, default_output(None, "zoom", Format::Png, b"two"));
    }
}
