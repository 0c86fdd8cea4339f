//! The hot pool: pre-started nodes of `hot` toolkits, handed to new
//! sessions with their spare workspace moved into the session's place. A
//! node that finishes starting after its toolkit's version was replaced or
//! removed goes at once, not into the pool.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::manifest::{self, LoadedManifest};
use super::{Node, NodeBackend, Pooled, lock};
use crate::sessions::Session;

impl NodeBackend {
    /// A started node of engine `engine` from the hot pool, its workspace
    /// moved into the session's place (the bind mount follows the renamed
    /// directory).
    pub(super) async fn take_pooled(
        &self,
        spec: &LoadedManifest,
        session: &Session,
        engine: usize,
    ) -> Option<Arc<Node>> {
        // A cluster keeps its own warm pool (SandboxWarmPool).
        if !self.provider.keeps_pools() {
            return None;
        }
        loop {
            let pooled = {
                let mut pools = lock(&self.pools);
                let pool = pools.get_mut(&spec.name)?;
                let at = pool.iter().rposition(|p| p.engine == engine)?;
                pool.remove(at)
            };
            let failure = if pooled.node.is_alive() {
                let (from, to) = (pooled.dir.clone(), session.workspace_path().to_owned());
                let adopted = tokio::task::spawn_blocking(move || adopt_workspace(&from, &to))
                    .await
                    .unwrap_or_else(|e| Err(std::io::Error::other(e)));
                match adopted {
                    Ok(()) => {
                        // The workspace exists now: the session says so
                        // (made on disk, as `prepare_workspace` would).
                        if let Err(e) = session.prepare_workspace().await {
                            tracing::warn!(error = %e, "the adopted workspace is not usable");
                        }
                        return Some(pooled.node);
                    }
                    Err(e) => Some(e),
                }
            } else {
                None
            };
            // Not usable: its container goes (the monitor removes what is in
            // the graveyard), and so does its spare workspace.
            self.provider.release_later(&pooled.node.container);
            let _ = tokio::fs::remove_dir_all(&pooled.dir).await;
            if let Some(e) = failure {
                tracing::warn!(error = %e, "cannot hand a pooled node its session workspace");
                return None;
            }
        }
    }

    /// Top up the hot pool of `spec` in the background.
    pub(super) fn refill(self: &Arc<Self>, spec: &Arc<LoadedManifest>) {
        let d = &spec.manifest.docker;
        if d.scheduling != manifest::Scheduling::Hot
            || d.hot_pool == 0
            || !self.provider.keeps_pools()
        {
            return;
        }
        if !lock(&self.refilling).insert(spec.name.clone()) {
            return;
        }
        let (this, spec) = (self.clone(), spec.clone());
        tokio::spawn(async move {
            loop {
                let have = lock(&this.pools).get(&spec.name).map_or(0, Vec::len);
                if have >= spec.manifest.docker.hot_pool as usize
                    || !served(&lock(&this.specs), &spec)
                {
                    break;
                }
                let dir = this
                    .pool_root
                    .join(uuid::Uuid::new_v4().simple().to_string());
                if let Err(e) = tokio::fs::create_dir_all(&dir).await {
                    tracing::warn!(error = %e, "cannot create a pool workspace");
                    break;
                }
                let made = match this.engine_for("pool", &spec).await {
                    Ok(engine) => this
                        .create_node(&spec, &dir, "pool", engine)
                        .await
                        .map(|node| (node, engine)),
                    Err(e) => Err(e),
                };
                match made {
                    Ok((node, engine)) => {
                        if let Some(stale) =
                            this.pool_if_served(&spec, Pooled { node, dir, engine })
                        {
                            // Its version was replaced while it started: it
                            // goes now, not at the monitor's next sweep.
                            this.provider.release_later(&stale.node.container);
                            let _ = tokio::fs::remove_dir_all(&stale.dir).await;
                            break;
                        }
                    }
                    Err(e) => {
                        let _ = tokio::fs::remove_dir_all(&dir).await;
                        tracing::debug!(toolkit = %spec.name, error = %e, "cannot fill the hot pool now");
                        break;
                    }
                }
            }
            lock(&this.refilling).remove(&spec.name);
        });
    }

    /// Put `pooled` in the hot pool of `spec` if `spec` is still the version
    /// its toolkit serves; else give it back. Checked and pushed under the
    /// versions' lock: a new version registered ([`Self::serve`]) either
    /// comes first (the node is given back) or drains the pool after the
    /// push.
    fn pool_if_served(&self, spec: &Arc<LoadedManifest>, pooled: Pooled) -> Option<Pooled> {
        let specs = lock(&self.specs);
        if !served(&specs, spec) {
            return Some(pooled);
        }
        lock(&self.pools)
            .entry(spec.name.clone())
            .or_default()
            .push(pooled);
        None
    }
}

/// Whether `spec` is the version of its toolkit that `specs` serve.
fn served(specs: &HashMap<String, Arc<LoadedManifest>>, spec: &Arc<LoadedManifest>) -> bool {
    specs.get(&spec.name).is_some_and(|s| Arc::ptr_eq(s, spec))
}

/// Move `pool_dir` into the place of a session workspace `target`: what the
/// session already has there moves into the pool directory first.
fn adopt_workspace(pool_dir: &Path, target: &Path) -> std::io::Result<()> {
    if target.is_dir() {
        for entry in std::fs::read_dir(target)? {
            let entry = entry?;
            std::fs::rename(entry.path(), pool_dir.join(entry.file_name()))?;
        }
        std::fs::remove_dir(target)?;
    } else if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::rename(pool_dir, target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn a_pool_workspace_takes_the_sessions_place_and_keeps_its_files() {
        let root = tempfile::tempdir().unwrap();
        let pool = root.path().join("pool/a");
        let target = root.path().join("workspaces/s1");
        std::fs::create_dir_all(&pool).unwrap();
        std::fs::create_dir_all(target.join("sub")).unwrap();
        std::fs::write(target.join("sub/f.txt"), "x").unwrap();
        adopt_workspace(&pool, &target).unwrap();
        assert!(!pool.exists());
        assert_eq!(
            std::fs::read_to_string(target.join("sub/f.txt")).unwrap(),
            "x"
        );

        let pool2 = root.path().join("pool/b");
        std::fs::create_dir_all(&pool2).unwrap();
        let fresh = root.path().join("workspaces/s2");
        adopt_workspace(&pool2, &fresh).unwrap();
        assert!(fresh.is_dir());
    }
}
