//! The Docker provider's part of the monitor's look: each engine up or
//! down (leftover containers of earlier runs removed from one that comes
//! up), failed removals retried, and each toolkit's image present on a
//! usable engine (loaded from the image archive when missing).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::query_parameters::ListContainersOptionsBuilder;

use super::containers::missing_image;
use super::{DockerProvider, RUN_LABEL, SCOPE_LABEL, lock};
use crate::nodes::health::{Cause, Health};

/// How often replicas look for what a gone replica left.
const SWEEP_EVERY: Duration = Duration::from_secs(15);

/// How old a gone replica's container must be to be removed: older than a
/// reading of the alive replicas can be, plus a margin for the clocks.
const MADE_BEFORE: Duration = Duration::from_secs(30);

impl DockerProvider {
    /// The monitor's look at each engine (up, down; leftovers swept from
    /// one that comes up; removals retried) and each toolkit: is an engine
    /// up with its image there (loaded from the image archive when
    /// missing)? Recorded in `health`.
    pub(super) async fn look(&self, specs: &[(String, Option<String>)], health: &Health) {
        let (up, came_up) = self.engines.check().await;
        for &i in &came_up {
            self.remove_orphans(i).await;
        }
        // Replicas sharing a registry also look now and then for what a
        // replica that is gone left (it cannot sweep it itself).
        if self.replicas.shared_scope().is_some() {
            let due = {
                let mut swept = lock(&self.swept);
                let due = swept.is_none_or(|at| at.elapsed() >= SWEEP_EVERY);
                if due {
                    *swept = Some(Instant::now());
                }
                due
            };
            if due {
                for &i in up.iter().filter(|i| !came_up.contains(i)) {
                    self.remove_orphans(i).await;
                }
            }
        }
        let graves: Vec<String> = lock(&self.graveyard).iter().cloned().collect();
        for id in graves {
            self.remove(&id).await;
        }
        if up.is_empty() {
            let e = self.engines.down_reason();
            for (name, _) in specs {
                health.found(name, Cause::Engine, &e);
            }
            return;
        }
        let mut clients = Vec::new();
        for i in up {
            if self.engines.member(i).is_drained() {
                continue;
            }
            if let Ok(docker) = self.docker(i).await {
                clients.push((i, docker));
            }
        }
        for (name, image) in specs {
            let (name, image) = (name.clone(), image.clone());
            let Some(image) = image else {
                health.engine_and_image_ok(&name);
                continue;
            };
            // Present on one usable engine is enough (nodes go there).
            let mut present = false;
            for (i, docker) in &clients {
                match self.engines.ensure_image(*i, docker, &image, true).await {
                    Ok(true) => present = true,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::debug!(toolkit = %name, engine = %self.engines.member(*i).name, error = %e, "cannot make the node image present")
                    }
                }
            }
            if present {
                health.engine_and_image_ok(&name);
            } else if !clients.is_empty() {
                health.found(&name, Cause::Image, &missing_image(&image).to_string());
            }
        }
    }

    /// Remove this scope's containers of processes that are gone from
    /// engine `engine`: every other run's on our own; on a shared registry,
    /// those of replicas no longer alive, made long enough ago that their
    /// replica was alive and known when it made them.
    async fn remove_orphans(&self, engine: usize) {
        let Ok(docker) = self.docker(engine).await else {
            return;
        };
        let filters: HashMap<String, Vec<String>> = [(
            "label".to_owned(),
            vec![format!("{SCOPE_LABEL}={}", self.scope)],
        )]
        .into();
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        match docker.list_containers(Some(options)).await {
            Ok(list) => {
                // Never this run's own: calls make nodes while this runs.
                let shared = self.replicas.shared_scope().is_some();
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs() as i64;
                let ids: Vec<String> = list
                    .into_iter()
                    .filter(|c| {
                        let run = c.labels.as_ref().and_then(|l| l.get(RUN_LABEL));
                        run.is_none_or(|run| self.replicas.is_gone(run))
                    })
                    .filter(|c| {
                        !shared
                            || c.created
                                .is_some_and(|t| now - t > MADE_BEFORE.as_secs() as i64)
                    })
                    .filter_map(|c| c.id)
                    .collect();
                for id in &ids {
                    self.engines.settle(id, engine, 0.0, 0);
                    self.remove(id).await;
                }
                if !ids.is_empty() {
                    tracing::info!(
                        count = ids.len(),
                        engine = %self.engines.member(engine).name,
                        "removed node containers left by a previous run or a replica that is gone"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot list leftover node containers"),
        }
    }
}
