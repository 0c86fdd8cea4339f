//! Node images on each engine: found there, or loaded from the configured
//! `docker save` archive (engines that cannot pull), once per engine.

use super::engines::{Engines, Member, lock};

impl Engines {
    /// Make `image` present on engine `i`: known there (unless `recheck`),
    /// found there, or loaded from the archive. `Ok(false)`: missing and no
    /// archive.
    pub async fn ensure_image(
        &self,
        i: usize,
        docker: &bollard::Docker,
        image: &str,
        recheck: bool,
    ) -> Result<bool, String> {
        let m = self.member(i);
        if !recheck && lock(&m.state).images.contains(image) {
            return Ok(true);
        }
        let present = |m: &Member, yes: bool| {
            let mut s = lock(&m.state);
            if yes {
                s.missing.remove(image);
                s.images.insert(image.to_owned());
            } else {
                s.images.remove(image);
                s.missing.insert(image.to_owned());
            }
        };
        let _one = m.loading.lock().await;
        match docker.inspect_image(image).await {
            Ok(_) => {
                present(m, true);
                return Ok(true);
            }
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {}
            Err(e) => return Err(e.to_string()),
        }
        let Some(archive) = &self.archive else {
            present(m, false);
            return Ok(false);
        };
        if !lock(&m.state).tried.insert(image.to_owned()) {
            present(m, false);
            return Err(format!(
                "the archive {} did not bring `{image}`",
                archive.display()
            ));
        }
        let started = std::time::Instant::now();
        tracing::info!(engine = %m.name, image, archive = %archive.display(), "loading the node image into the engine");
        load_archive(docker, archive).await?;
        let there = docker.inspect_image(image).await.is_ok();
        present(m, there);
        tracing::info!(engine = %m.name, image, there, ms = started.elapsed().as_millis() as u64, "loaded the image archive");
        if there {
            Ok(true)
        } else {
            Err(format!(
                "the archive {} does not hold `{image}`",
                archive.display()
            ))
        }
    }

    /// Whether the archive could bring an image that is missing.
    pub fn has_archive(&self) -> bool {
        self.archive.is_some()
    }
}

/// `docker load` of `archive`, streamed from the file.
async fn load_archive(docker: &bollard::Docker, archive: &std::path::Path) -> Result<(), String> {
    use futures::StreamExt;
    let file = tokio::fs::File::open(archive)
        .await
        .map_err(|e| format!("cannot open the image archive {}: {e}", archive.display()))?;
    let body = tokio_util::io::ReaderStream::new(file);
    let options = bollard::query_parameters::ImportImageOptionsBuilder::default()
        .quiet(true)
        .build();
    let mut stream = docker.import_image_stream(options, body, None);
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| format!("loading the image archive failed: {e}"))?;
        if let Some(e) = info.error_detail.and_then(|d| d.message) {
            return Err(format!("loading the image archive failed: {e}"));
        }
    }
    Ok(())
}
