//! The cluster as a [`NodeProvider`]: a node is a claimed sandbox with the
//! toolkit's driver exec'd into it; releasing it deletes the claim. The
//! cluster places its sandboxes and keeps its own warm pools, so the
//! backend's placement and hot pools do not apply.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Cluster, ClusterError};
use crate::backend::BackendFuture;
use crate::nodes::health::{Cause, Health};
use crate::nodes::manifest::LoadedManifest;
use crate::nodes::node::Node;
use crate::nodes::provider::{CreateError, Lifecycle, NodeProvider, PlaceCensus, closing};
use crate::tool::CallError;

/// How long a claimed sandbox's driver may take to say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(60);

pub struct KubernetesProvider {
    cluster: Arc<Cluster>,
    life: Arc<Lifecycle>,
    /// A node's claim -> its pod.
    claims: Mutex<HashMap<String, String>>,
    /// This instance's leftover claims were swept.
    swept: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl KubernetesProvider {
    pub fn new(cluster: Cluster, life: Arc<Lifecycle>) -> Self {
        KubernetesProvider {
            cluster: Arc::new(cluster),
            life,
            claims: Mutex::default(),
            swept: AtomicBool::new(false),
        }
    }
}

impl NodeProvider for KubernetesProvider {
    fn kind(&self) -> &'static str {
        "kubernetes"
    }

    fn prepare(&self, spec: &Arc<LoadedManifest>) {
        // Applied when the first claim needs it (`Cluster::node`): a
        // toolkit that is never called costs the cluster nothing.
        let _ = spec;
    }

    fn place<'a>(
        &'a self,
        _session: &'a str,
        _spec: &'a LoadedManifest,
    ) -> BackendFuture<'a, Result<usize, CallError>> {
        Box::pin(async { Ok(0) })
    }

    fn create<'a>(
        &'a self,
        spec: &'a Arc<LoadedManifest>,
        workspace: &'a Path,
        session: &'a str,
        _place: usize,
    ) -> BackendFuture<'a, Result<Arc<Node>, CreateError>> {
        Box::pin(async move {
            let _creating = self.life.creating();
            if self.life.is_closing() {
                return Err(closing());
            }
            if spec.driver.is_none() {
                return Err((
                    None,
                    CallError::BackendUnavailable(format!(
                        "the {} toolkit is a service (`internal_port`); the Kubernetes provider runs driver toolkits only",
                        spec.name
                    )),
                ));
            }
            let begun = std::time::Instant::now();
            match self
                .cluster
                .node(spec, session, workspace, READY_WITHIN)
                .await
            {
                Ok((node, claimed)) => {
                    tracing::info!(toolkit = %spec.name, session, claim = %claimed.claim, pod = %claimed.pod, ms = begun.elapsed().as_millis() as u64, "claimed a sandbox and started its driver");
                    lock(&self.claims).insert(claimed.claim, claimed.pod);
                    Ok(Arc::new(node))
                }
                Err(e) => {
                    let cause = match e {
                        ClusterError::Driver { .. } => Cause::Image,
                        _ => Cause::Engine,
                    };
                    Err((Some(cause), CallError::from(e)))
                }
            }
        })
    }

    fn release<'a>(&'a self, id: &'a str) -> BackendFuture<'a, ()> {
        Box::pin(async move {
            // The claim goes (the sandbox and pod with it).
            lock(&self.claims).remove(id);
            self.cluster.release(id).await;
            self.life.count_removed();
        })
    }

    fn release_later(&self, id: &str) {
        let (cluster, id) = (self.cluster.clone(), id.to_owned());
        lock(&self.claims).remove(&id);
        tokio::spawn(async move { cluster.release(&id).await });
    }

    fn lost<'a>(&'a self, node: &'a Node) -> BackendFuture<'a, Option<String>> {
        Box::pin(async move {
            let pod = lock(&self.claims).get(&node.container).cloned()?;
            self.cluster
                .lost(&pod)
                .await
                .map(|why| format!("its Kubernetes sandbox ({why})"))
        })
    }

    fn check<'a>(
        &'a self,
        _toolkits: &'a [(String, Option<String>)],
        _health: &'a Health,
    ) -> BackendFuture<'a, ()> {
        Box::pin(async move {
            // Leftovers are swept once; a toolkit's problems show when a
            // claim fails.
            if !self.swept.swap(true, Ordering::AcqRel)
                && let Err(e) = self.cluster.remove_orphans().await
            {
                self.swept.store(false, Ordering::Release);
                tracing::warn!(error = %e, "cannot sweep leftover SandboxClaims");
            }
        })
    }

    fn session_closed(&self, _session: &str) {}

    fn pending(&self) -> Vec<String> {
        Vec::new()
    }

    fn keeps_pools(&self) -> bool {
        false
    }

    fn census(&self) -> Vec<PlaceCensus> {
        Vec::new()
    }

    fn resources(&self) -> serde_json::Value {
        serde_json::json!({
            "provider": "kubernetes",
            "instance": self.cluster.instance(),
            "claims": lock(&self.claims).len(),
        })
    }
}
