//! The Docker backend's side of the backend contract: a toolkit is a folder
//! `<plugins>/<name>/` with `<name>.toml` and its driver, claimed, loaded,
//! hot-reloaded and removed like any other entry of the plugins directory.
//! A reloaded toolkit serves new calls at once; the nodes of its previous
//! version finish their calls and are then replaced (the monitor drains
//! them); a removed toolkit's nodes and hot pool go the same way.

use std::sync::Arc;

use super::health::Cause;
use super::manifest::{self, LoadedManifest};
use super::{DockerToolkit, NodeBackend, lock};
use crate::backend::{
    Backend, BackendFuture, Checked, EntryFile, Loaded, Problem, content_hash, folder_manifest,
};
use crate::tool::Limits;

/// How long a look waits for a service's health path.
const PROBE_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

impl Backend for NodeBackend {
    fn name(&self) -> &'static str {
        "docker"
    }

    fn folder_kind(&self) -> Option<&'static str> {
        Some("docker")
    }

    fn observe(&self, metrics: &crate::metrics::Metrics) {
        if !metrics.is_enabled() {
            return;
        }
        self.series
            .get_or_init(|| super::metrics::NodeSeries::register(metrics.registry()))
            .record(&self.census());
    }

    fn resources(&self) -> Option<serde_json::Value> {
        Some(self.provider.resources())
    }

    fn load<'a>(
        &'a self,
        name: &'a str,
        files: Vec<EntryFile>,
        _report: &'a (dyn Fn(&'static str) + Sync),
    ) -> BackendFuture<'a, Result<Loaded, String>> {
        Box::pin(async move {
            let (folder, text) = folder_manifest(name, &files)?;
            let mut spec = manifest::parse(name, &folder, text)?;
            let me = self
                .me
                .upgrade()
                .ok_or("the Docker backend is shutting down")?;
            let limits = Limits {
                timeout_ms: spec.manifest.docker.call_timeout_s * 1000,
                max_concurrency: 64,
                max_queue: 256,
                max_output_kb: 64 * 1024,
            };
            // The version: every file of the folder (a new driver is a new
            // version too).
            let mut all = Vec::new();
            for f in &files {
                all.extend_from_slice(f.hash.as_bytes());
            }
            let version = content_hash(&all);
            // An image named by the manifest is judged by the trust policy
            // before any node of it starts (a built one is the folder's).
            let verdict = match &spec.manifest.docker.build {
                None => self.judge_image(&spec.manifest.docker.image).await?,
                Some(_) => None,
            };
            if spec.manifest.docker.build.is_some() {
                spec.manifest.docker.image = super::docker::build::tag(name, &version);
            }
            let spec = Arc::new(spec);
            let loaded = Loaded {
                description: spec.manifest.description.clone(),
                version,
                limits,
                toolkit: Arc::new(DockerToolkit::new(me, spec.clone())),
                tools: spec.descriptors(),
                compile: None,
                better: None,
                warnings: verdict.iter().filter_map(|v| v.warning.clone()).collect(),
                provenance: verdict
                    .map(|v| serde_json::json!({"image": spec.manifest.docker.image, "trust": v})),
            };
            self.serve(spec);
            Ok(loaded)
        })
    }

    fn unloaded(&self, name: &str, replaced: bool) {
        if !replaced {
            lock(&self.specs).remove(name);
        }
        // Pre-started nodes were made for the old version: they go now;
        // session nodes go once idle (the monitor drains them).
        self.drain_pool(name);
    }

    fn problem(&self, name: &str) -> Option<Problem> {
        let health = self.health.of(name);
        let reason = health.problem?;
        Some(if health.cause == Some(Cause::Unhealthy) {
            Problem::failed(reason)
        } else {
            Problem::unavailable(reason)
        })
    }

    fn probe<'a>(&'a self, name: &'a str) -> BackendFuture<'a, Option<Checked>> {
        Box::pin(async move {
            let spec = lock(&self.specs).get(name).cloned()?;
            spec.service_port()?;
            let path = &spec.manifest.docker.health_path;
            let mut checked = None;
            for node in self.idle_nodes(&spec) {
                let answer = node.check(path, PROBE_WITHIN).await;
                let (ok, detail) = match answer {
                    Ok(status) => (
                        (200..300).contains(&status),
                        format!("GET {path} answered {status}"),
                    ),
                    Err(e) => (false, format!("GET {path} failed: {e}")),
                };
                checked = Some(Checked {
                    ok,
                    detail,
                    container_id: Some(node.container.clone()),
                });
                if !ok {
                    break;
                }
            }
            checked
        })
    }

    fn restart(&self, name: &str) {
        self.drain_pool(name);
        let Some(me) = self.me.upgrade() else { return };
        let name = name.to_owned();
        tokio::spawn(async move { me.discard_idle(&name).await });
    }

    fn scheduling(&self, name: &str) -> Option<serde_json::Value> {
        let spec = lock(&self.specs).get(name).cloned()?;
        let health = self.health.of(name);
        let running = self.running_nodes(name);
        let state = match health.cause {
            Some(Cause::Degraded) => "degraded",
            Some(_) => "stopped",
            None if running > 0 => "running",
            None => "sleeping",
        };
        Some(serde_json::json!({
            "mode": spec.manifest.docker.scheduling.name(),
            "state": state,
            "containers": running,
        }))
    }

    fn shutdown(&self) -> BackendFuture<'_, ()> {
        Box::pin(async move { NodeBackend::shutdown(self).await })
    }
}

impl NodeBackend {
    /// `spec` is the version of its toolkit new nodes are made for.
    fn serve(&self, spec: Arc<LoadedManifest>) {
        let name = spec.name.clone();
        let replaced = lock(&self.specs).insert(name.clone(), spec.clone());
        if replaced.is_some() {
            self.drain_pool(&name);
        }
        tracing::info!(toolkit = %name, "docker toolkit registered");
        self.provider.prepare(&spec);
        if let Some(me) = self.me.upgrade() {
            me.refill(&spec);
        }
    }

    /// Remove the hot pool of toolkit `name` (its nodes are of a version no
    /// longer served).
    fn drain_pool(&self, name: &str) {
        let pooled = lock(&self.pools).remove(name).unwrap_or_default();
        for p in pooled {
            self.provider.release_later(&p.node.container);
            // Off the async worker; nothing waits for it.
            tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&p.dir));
        }
    }
}
