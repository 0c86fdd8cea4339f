//! Images built from a toolkit's folder (`[docker] build = "Dockerfile"`):
//! the folder's files are the build context, the image is tagged
//! `toolhost-build-<toolkit>:<12 hex of the folder's content>`, so an edited
//! folder is a new image and an unchanged one is built once. The build starts
//! when the toolkit loads; a node creation waits for it (and builds it again
//! if the image went missing). Base images must be local: no registry is
//! contacted by toolhost, and the engine pulls only what a `FROM` names and it
//! does not have.

use std::sync::Arc;

use bollard::query_parameters::BuildImageOptionsBuilder;
use futures::StreamExt;

use super::DockerProvider;
use crate::nodes::health::Cause;
use crate::nodes::manifest::LoadedManifest;
use crate::nodes::provider::CreateError;
use crate::tool::CallError;

/// A build's log lines kept for its error message.
const LOG_TAIL: usize = 12;

/// The tag of toolkit `name`'s built image, for folder content `version`.
pub fn tag(name: &str, version: &str) -> String {
    format!(
        "toolhost-build-{name}:{}",
        &version[..12.min(version.len())]
    )
}

impl DockerProvider {
    /// Start building `spec`'s image now, if it is built from its folder.
    /// (On the first engine; another engine builds it when a node of the
    /// toolkit first goes there.)
    pub(super) fn prebuild(&self, spec: &Arc<LoadedManifest>) {
        if spec.manifest.docker.build.is_none() {
            return;
        }
        let Some(me) = self.me.upgrade() else { return };
        let spec = spec.clone();
        tokio::spawn(async move {
            if let Err((_, e)) = me.ensure_built(&spec, 0).await {
                tracing::warn!(toolkit = %spec.name, error = %e, "building the toolkit's image failed");
            }
        });
    }

    /// Make sure `spec`'s image exists on engine `engine`: built from its
    /// folder (once at a time per tag and engine) when it is a built toolkit
    /// and the image is missing there.
    pub(super) async fn ensure_built(
        &self,
        spec: &LoadedManifest,
        engine: usize,
    ) -> Result<(), CreateError> {
        let Some(dockerfile) = &spec.manifest.docker.build else {
            return Ok(());
        };
        let image = &spec.manifest.docker.image;
        let gate = super::lock(&self.builds)
            .entry(format!("{engine}/{image}"))
            .or_default()
            .clone();
        let _one_at_a_time = gate.lock().await;
        let docker = self
            .docker(engine)
            .await
            .map_err(|e| (Some(Cause::Engine), e))?;
        if docker.inspect_image(image).await.is_ok() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        tracing::info!(toolkit = %spec.name, image, "building the toolkit's image");
        let context = context(&spec.folder).map_err(|e| {
            (
                None,
                CallError::Internal(format!("cannot read the build context: {e}")),
            )
        })?;
        let options = BuildImageOptionsBuilder::default()
            .dockerfile(&dockerfile.to_string_lossy())
            .t(image)
            .rm(true)
            .forcerm(true)
            .build();
        let mut stream =
            docker.build_image(options, None, Some(bollard::body_full(context.into())));
        let mut log: Vec<String> = Vec::new();
        let mut failure = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(line) = info
                        .stream
                        .as_deref()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                    {
                        log.push(line.to_owned());
                    }
                    if let Some(e) = info.error_detail.and_then(|d| d.message) {
                        failure = Some(e);
                    }
                }
                Err(e) => failure = Some(e.to_string()),
            }
            if log.len() > LOG_TAIL {
                log.remove(0);
            }
        }
        match failure {
            None => {
                tracing::info!(toolkit = %spec.name, image, ms = started.elapsed().as_millis() as u64, "built the toolkit's image");
                Ok(())
            }
            Some(e) => {
                let reason = format!(
                    "building its image failed: {e} (build log: {})",
                    log.join(" | ")
                );
                // Recorded in the toolkit's health when the build began
                // in the background, before any node waited for it.
                self.health.failed(&spec.name, Cause::Create, &reason);
                Err((
                    Some(Cause::Create),
                    CallError::BackendUnavailable(format!("the {} toolkit: {reason}", spec.name)),
                ))
            }
        }
    }
}

/// The folder's visible files as an uncompressed tar (a flat build
/// context).
pub fn context(folder: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    for entry in std::fs::read_dir(folder)? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        if name.starts_with('.') || !path.is_file() {
            continue;
        }
        entries.push((name, std::fs::read(&path)?));
    }
    entries.sort();
    tar(&entries)
}

/// A ustar archive of flat `(name, bytes)` entries.
fn tar(entries: &[(String, Vec<u8>)]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    for (name, bytes) in entries {
        if name.len() > 99 {
            return Err(std::io::Error::other(format!(
                "file name {name} is too long"
            )));
        }
        let mut header = [0u8; 512];
        header[..name.len()].copy_from_slice(name.as_bytes());
        let octal = |field: &mut [u8], value: u64| {
            let text = format!("{value:0width$o}", width = field.len() - 1);
            field[..text.len()].copy_from_slice(text.as_bytes());
        };
        octal(&mut header[100..108], 0o644);
        octal(&mut header[108..116], 0);
        octal(&mut header[116..124], 0);
        octal(&mut header[124..136], bytes.len() as u64);
        octal(&mut header[136..148], 0);
        header[156] = b'0';
        header[257..263].copy_from_slice(b"ustar\0");
        header[263..265].copy_from_slice(b"00");
        header[148..156].copy_from_slice(b"        ");
        let sum: u32 = header.iter().map(|b| u32::from(*b)).sum();
        let text = format!("{sum:06o}\0 ");
        header[148..156].copy_from_slice(text.as_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(bytes);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tar_that_tar_reads() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Dockerfile"), "FROM scratch\n").unwrap();
        std::fs::write(dir.path().join("app.py"), "print('hi')\n").unwrap();
        std::fs::write(dir.path().join(".hidden"), "x").unwrap();
        let archive = context(dir.path()).unwrap();
        assert_eq!(archive.len() % 512, 0);
        let file = dir.path().join("context.tar");
        std::fs::write(&file, &archive).unwrap();
        let listed = std::process::Command::new("tar")
            .arg("-tvf")
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            listed.status.success(),
            "{}",
            String::from_utf8_lossy(&listed.stderr)
        );
        let text = String::from_utf8_lossy(&listed.stdout);
        assert!(
            text.contains("Dockerfile") && text.contains("app.py") && !text.contains(".hidden"),
            "{text}"
        );
        assert!(text.contains(" 12 "), "app.py's size: {text}");
        assert_eq!(
            tag("img", "0123456789abcdef"),
            "toolhost-build-img:0123456789ab"
        );
    }
}
