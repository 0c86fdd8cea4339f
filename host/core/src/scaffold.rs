//! `toolhost new` and `toolhost build`: start a plugin from a language's
//! template, and build a plugin folder into `<name>.wasm` + `<name>.toml`
//! ready for the plugins directory.
//!
//! The templates are embedded in the binary (`sdk/<lang>/template`). Building
//! uses the language's toolchain and the repository's SDK (`sdk/`, found
//! through `TOOLHOST_SDK_DIR`, next to the binary, or where it was built);
//! a missing toolchain is named with the command that installs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::tool::is_valid_plugin_name;

/// A plugin language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
    C,
}

/// The placeholder name in the templates.
const PLACEHOLDER: &str = "my-plugin";

fn template(lang: Lang) -> &'static [(&'static str, &'static str)] {
    match lang {
        Lang::Rust => &[
            (
                "Cargo.toml",
                include_str!("../../../sdk/rust/template/Cargo.toml"),
            ),
            (
                "README.md",
                include_str!("../../../sdk/rust/template/README.md"),
            ),
            (
                "my-plugin.toml",
                include_str!("../../../sdk/rust/template/my-plugin.toml"),
            ),
            (
                "src/lib.rs",
                include_str!("../../../sdk/rust/template/src/lib.rs"),
            ),
        ],
        Lang::Python => &[
            (
                "app.py",
                include_str!("../../../sdk/python/template/app.py"),
            ),
            (
                "README.md",
                include_str!("../../../sdk/python/template/README.md"),
            ),
            (
                "my-plugin.toml",
                include_str!("../../../sdk/python/template/my-plugin.toml"),
            ),
        ],
        Lang::Js => &[
            ("app.js", include_str!("../../../sdk/js/template/app.js")),
            (
                "README.md",
                include_str!("../../../sdk/js/template/README.md"),
            ),
            (
                "my-plugin.toml",
                include_str!("../../../sdk/js/template/my-plugin.toml"),
            ),
        ],
        Lang::C => &[
            ("app.c", include_str!("../../../sdk/c/template/app.c")),
            (
                "README.md",
                include_str!("../../../sdk/c/template/README.md"),
            ),
            (
                "my-plugin.toml",
                include_str!("../../../sdk/c/template/my-plugin.toml"),
            ),
        ],
    }
}

/// The SDK directory (`sdk/` of the repository), if it can be found.
pub fn sdk_dir() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(dir) = std::env::var_os("TOOLHOST_SDK_DIR") {
        candidates.push(PathBuf::from(dir));
    }
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/toolhost -> <repo>/sdk
        for up in exe.ancestors().skip(1).take(4) {
            candidates.push(up.join("sdk"));
        }
    }
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk"));
    candidates
        .into_iter()
        .find(|d| d.join("rust/Cargo.toml").is_file())
        .and_then(|d| d.canonicalize().ok())
}

/// Create `<parent>/<name>/` from the template of `lang`; returns the folder.
pub fn new_plugin(lang: Lang, name: &str, parent: &Path) -> anyhow::Result<PathBuf> {
    if !is_valid_plugin_name(name) {
        bail!(
            "invalid plugin name `{name}`: use lowercase letters, digits and `-`, starting with a letter (agents see its tools as `<name>_<tool>`)"
        );
    }
    let dir = parent.join(name);
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    let sdk = sdk_dir();
    for (file, text) in template(lang) {
        let path = dir.join(file.replace(PLACEHOLDER, name));
        let mut text = text.replace(PLACEHOLDER, name);
        if lang == Lang::Rust && *file == "Cargo.toml" {
            text = rust_sdk_dependency(&text, sdk.as_deref());
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(dir)
}

/// Point the template's `toolhost-sdk` path dependency at the SDK.
fn rust_sdk_dependency(cargo_toml: &str, sdk: Option<&Path>) -> String {
    let line = match sdk {
        Some(sdk) => format!(
            "toolhost-sdk = {{ path = {:?} }}",
            sdk.join("rust").to_string_lossy()
        ),
        None => "toolhost-sdk = { path = \"<set the path of toolhost's sdk/rust here>\" }".into(),
    };
    cargo_toml
        .lines()
        .map(|l| {
            if l.starts_with("toolhost-sdk") {
                line.as_str()
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// What `build` found in a plugin folder.
#[derive(Debug, PartialEq, Eq)]
pub struct PluginSource {
    pub lang: Lang,
    /// From the one manifest `<name>.toml`.
    pub name: String,
}

/// The language and name of the plugin in `dir`.
pub fn detect(dir: &Path) -> anyhow::Result<PluginSource> {
    let lang = if dir.join("Cargo.toml").is_file() {
        Lang::Rust
    } else if dir.join("app.py").is_file() {
        Lang::Python
    } else if dir.join("app.js").is_file() {
        Lang::Js
    } else if dir.join("app.c").is_file() {
        Lang::C
    } else {
        bail!(
            "{} is not a plugin folder: expected Cargo.toml (Rust), app.py (Python), app.js (JavaScript) or app.c (C); start one with `toolhost new --lang <lang> <name>`",
            dir.display()
        );
    };
    let mut manifests = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        if path.extension().is_some_and(|e| e == "toml")
            && !["Cargo", "pyproject", "componentize-py"].contains(&stem)
        {
            manifests.push(stem.to_owned());
        }
    }
    match manifests.as_slice() {
        [name] if is_valid_plugin_name(name) => Ok(PluginSource {
            lang,
            name: name.clone(),
        }),
        [name] => bail!(
            "the manifest {name}.toml does not name a valid plugin: use lowercase letters, digits and `-`"
        ),
        _ => bail!(
            "{} needs exactly one manifest <name>.toml (found {})",
            dir.display(),
            manifests.len()
        ),
    }
}

/// Build the plugin in `dir` into `out/<name>.wasm` + `out/<name>.toml`.
pub fn build(dir: &Path, out: &Path) -> anyhow::Result<PathBuf> {
    let src = detect(dir)?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let sdk = || {
        sdk_dir().context(
            "cannot find toolhost's sdk/ directory: set TOOLHOST_SDK_DIR to the repository's sdk folder",
        )
    };
    match src.lang {
        Lang::Rust => build_rust(dir, out, &src.name)?,
        Lang::Python => {
            need(
                "python3",
                "install Python 3.9+ with venv (Debian: apt-get install python3-venv)",
            )?;
            run_script(&sdk()?.join("python/build.sh"), dir, out)?
        }
        Lang::Js => {
            need(
                "node",
                "install Node.js 18+ with npm (Debian: apt-get install nodejs npm)",
            )?;
            run_script(&sdk()?.join("js/build.sh"), dir, out)?
        }
        // build.sh names the Debian packages of a missing clang / wasi-libc.
        Lang::C => run_script(&sdk()?.join("c/build.sh"), dir, out)?,
    }
    let wasm = out.join(format!("{}.wasm", src.name));
    if !wasm.is_file() {
        bail!(
            "the build reported success but {} is missing",
            wasm.display()
        );
    }
    Ok(wasm)
}

fn need(program: &str, how: &str) -> anyhow::Result<()> {
    match Command::new(program).arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => bail!("`{program}` is needed to build this plugin: {how}"),
    }
}

/// Run an SDK's `build.sh <dir> <out>`, with `TOOLHOST_BIN` set to this very
/// binary (the C build componentizes with it).
fn run_script(script: &Path, dir: &Path, out: &Path) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find the toolhost binary")?;
    let status = Command::new("bash")
        .arg(script)
        .arg(dir)
        .arg(out)
        .env("TOOLHOST_BIN", exe)
        .status()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !status.success() {
        bail!("{} failed ({status})", script.display());
    }
    Ok(())
}

fn build_rust(dir: &Path, out: &Path, name: &str) -> anyhow::Result<()> {
    need("cargo", "install Rust with rustup (https://rustup.rs)")?;
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l == "wasm32-wasip2")
        })
        .unwrap_or(false);
    if !installed {
        bail!("the wasm32-wasip2 target is missing: run `rustup target add wasm32-wasip2`");
    }
    let target_dir = dir.join("target");
    let status = Command::new("cargo")
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .status()
        .context("cannot run cargo")?;
    if !status.success() {
        bail!("cargo build failed ({status})");
    }
    let built = target_dir
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", name.replace('-', "_")));
    if !built.is_file() {
        bail!(
            "cargo built no {}: the package name in Cargo.toml must be the manifest's, `{name}`",
            built.display()
        );
    }
    // Manifest first, then the component by rename: a watching server never
    // sees half a file.
    std::fs::copy(
        dir.join(format!("{name}.toml")),
        out.join(format!("{name}.toml")),
    )?;
    let tmp = out.join(format!(".{name}.wasm.tmp"));
    std::fs::copy(&built, &tmp)?;
    std::fs::rename(&tmp, out.join(format!("{name}.wasm")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_fills_in_the_name_and_detect_reads_it_back() {
        let parent = tempfile::tempdir().unwrap();
        for (lang, main) in [
            (Lang::Rust, "src/lib.rs"),
            (Lang::Python, "app.py"),
            (Lang::Js, "app.js"),
            (Lang::C, "app.c"),
        ] {
            let name = format!("demo-{lang:?}").to_lowercase();
            let dir = new_plugin(lang, &name, parent.path()).unwrap();
            assert!(dir.join(main).is_file());
            assert!(dir.join(format!("{name}.toml")).is_file());
            assert!(!dir.join("my-plugin.toml").exists());
            assert_eq!(
                detect(&dir).unwrap(),
                PluginSource {
                    lang,
                    name: name.clone()
                }
            );
            let all: String = template(lang)
                .iter()
                .map(|(f, _)| {
                    std::fs::read_to_string(dir.join(f.replace(PLACEHOLDER, &name))).unwrap()
                })
                .collect();
            assert!(!all.contains(PLACEHOLDER), "{lang:?}: placeholder left");
            // A second time: refused, nothing overwritten.
            assert!(new_plugin(lang, &name, parent.path()).is_err());
        }
    }

    #[test]
    fn bad_names_and_folders_are_refused() {
        let parent = tempfile::tempdir().unwrap();
        for bad in ["", "My", "a_b", "../x", "a/b", "-x"] {
            assert!(
                new_plugin(Lang::Python, bad, parent.path()).is_err(),
                "{bad}"
            );
        }
        let empty = tempfile::tempdir().unwrap();
        assert!(
            detect(empty.path())
                .unwrap_err()
                .to_string()
                .contains("not a plugin folder")
        );
        std::fs::write(empty.path().join("app.py"), "").unwrap();
        assert!(
            detect(empty.path())
                .unwrap_err()
                .to_string()
                .contains("exactly one manifest")
        );
    }

    #[test]
    fn the_rust_template_depends_on_the_sdk() {
        let text = rust_sdk_dependency(
            "[dependencies]\ntoolhost-sdk = { path = \"../\" }\n",
            Some(Path::new("/x/sdk")),
        );
        assert!(
            text.contains("toolhost-sdk = { path = \"/x/sdk/rust\" }"),
            "{text}"
        );
    }
}
