//! Kubernetes as the node provider (`[kubernetes]`), through
//! kubernetes-sigs/agent-sandbox: a Docker-kind toolkit becomes a
//! `SandboxTemplate` (and a `SandboxWarmPool` of pre-started sandboxes), a
//! session's node is a `SandboxClaim` on that pool, and the toolkit's driver
//! runs through the pod exec API, speaking the same JSON-lines protocol as
//! over `docker exec` ([`Node::from_stdio`]). Releasing a node deletes its
//! claim (agent-sandbox deletes the sandbox and its pod with it).
//!
//! - Workspaces: one ReadWriteMany volume (`workspace_pvc`), at
//!   `<data>/workspaces` in toolhost. By default each sandbox mounts its
//!   session's directory alone at `/workspace` (the claim's
//!   `TOOLHOST_WORKSPACE`, the template's `subPathExpr`), started for its
//!   claim. With `shared_workspaces` every sandbox mounts the whole volume at
//!   `/workspaces` and the driver starts in `/workspaces/<session>`, so warm
//!   sandboxes can be handed out: see docs/backends.md for what that leaves open.
//! - Node death: a pod that vanishes, or an exec stream that closes,
//!   ends the calls waiting on it; [`Cluster::lost`] then says whether the
//!   pod is gone, which the call path answers as `node_lost`.
//!
//! Files: `objects` (what is sent, pure), this file (the exchange).

pub mod config;
pub mod objects;
pub mod provider;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, AttachParams, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::Value;

pub use objects::{is_dns_subdomain, is_label_value};

use super::manifest::LoadedManifest;
use super::node::{Node, NodeError};
use crate::tool::CallError;
use config::KubernetesConfig;

/// A claim's status is read again after this, doubling while it is not
/// ready (a warm sandbox is adopted within moments) ...
const POLL_FIRST: Duration = Duration::from_millis(100);
/// ... up to this.
const POLL_EVERY: Duration = Duration::from_millis(500);

/// Why the cluster could not give a node.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("the Kubernetes configuration cannot be used: {0}")]
    Config(String),
    #[error("the Kubernetes API refused {what}: {error}")]
    Api { what: String, error: String },
    #[error("{0}")]
    Unsupported(String),
    #[error(
        "the SandboxClaim `{claim}` was not ready within {within:?} ({why}); is the agent-sandbox controller running, and can the cluster pull the image?"
    )]
    NotReady {
        claim: String,
        within: Duration,
        why: String,
    },
    #[error("the driver in pod `{pod}` did not start: {error}")]
    Driver { pod: String, error: NodeError },
}

impl From<ClusterError> for CallError {
    fn from(e: ClusterError) -> CallError {
        match e {
            ClusterError::Driver { .. } => CallError::ToolError(e.to_string()),
            _ => CallError::BackendUnavailable(e.to_string()),
        }
    }
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ClusterError {
    let what = what.into();
    move |e| ClusterError::Api {
        what,
        error: e.to_string(),
    }
}

/// A node made from a claim: what to delete, and where it runs.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub claim: String,
    pub pod: String,
}

pub struct Cluster {
    client: kube::Client,
    config: KubernetesConfig,
    instance: String,
    /// This toolhost's pod (name, uid), from the downward API's
    /// `TOOLHOST_POD_NAME` and `TOOLHOST_POD_UID`, when it runs in the cluster.
    pod: Option<(String, String)>,
    /// The manifest each toolkit's objects were applied for.
    applied: Mutex<std::collections::HashMap<String, Arc<LoadedManifest>>>,
}

impl Cluster {
    /// A client for `config` (its kubeconfig, else in-cluster, else the
    /// default kubeconfig). Nothing is sent yet.
    pub async fn connect(config: &KubernetesConfig, scope: &str) -> Result<Cluster, ClusterError> {
        config.check().map_err(ClusterError::Config)?;
        // kube's TLS takes rustls's process-wide provider, which cannot be
        // inferred with both ring and aws-lc-rs in the build (as for
        // bollard's TLS engines).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let kube_config = match &config.kubeconfig {
            Some(path) => {
                let file = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                    ClusterError::Config(format!("cannot read {}: {e}", path.display()))
                })?;
                let options = kube::config::KubeConfigOptions {
                    context: config.context.clone(),
                    ..Default::default()
                };
                kube::Config::from_custom_kubeconfig(file, &options)
                    .await
                    .map_err(|e| ClusterError::Config(format!("{}: {e}", path.display())))?
            }
            None => kube::Config::infer()
                .await
                .map_err(|e| ClusterError::Config(e.to_string()))?,
        };
        let client =
            kube::Client::try_from(kube_config).map_err(|e| ClusterError::Config(e.to_string()))?;
        let instance = config
            .instance
            .clone()
            .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| is_label_value(h)))
            .unwrap_or_else(|| scope.to_owned());
        let pod = match (
            std::env::var("TOOLHOST_POD_NAME"),
            std::env::var("TOOLHOST_POD_UID"),
        ) {
            (Ok(name), Ok(uid)) if !name.is_empty() && !uid.is_empty() => Some((name, uid)),
            _ => None,
        };
        Ok(Cluster {
            client,
            config: config.clone(),
            instance,
            pod,
            applied: Mutex::default(),
        })
    }

    pub fn instance(&self) -> &str {
        &self.instance
    }

    fn api(&self, resource: &kube::core::ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.config.namespace, resource)
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.config.namespace)
    }

    /// Apply `object` (server-side apply, toolhost's field manager).
    async fn apply(
        &self,
        resource: &kube::core::ApiResource,
        object: Value,
    ) -> Result<(), ClusterError> {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let what = format!("applying {} `{name}`", resource.kind);
        let params = PatchParams::apply(objects::MANAGER).force();
        self.api(resource)
            .patch(&name, &params, &Patch::Apply(&object))
            .await
            .map_err(api_error(what))?;
        Ok(())
    }

    /// Make the cluster's objects of toolkit `spec` match it (once per
    /// manifest version): the driver's ConfigMap, the SandboxTemplate, the
    /// SandboxWarmPool.
    pub async fn ensure_toolkit(&self, spec: &Arc<LoadedManifest>) -> Result<(), ClusterError> {
        let done = self
            .applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&spec.name)
            .is_some_and(|m| Arc::ptr_eq(m, spec));
        if done {
            return Ok(());
        }
        let d = &spec.manifest.docker;
        if d.build.is_some() {
            return Err(ClusterError::Unsupported(format!(
                "the {} toolkit builds its image locally (`build`); a cluster pulls images from a registry: push the image and name it in `image`",
                spec.name
            )));
        }
        let Some(driver) = &spec.driver else {
            return Err(ClusterError::Unsupported(format!(
                "the {} toolkit is a service (`internal_port`); the Kubernetes provider runs driver toolkits only",
                spec.name
            )));
        };
        let text = tokio::fs::read_to_string(driver).await.map_err(|e| {
            ClusterError::Config(format!("cannot read the driver {}: {e}", driver.display()))
        })?;
        let ns = &self.config.namespace;
        let settings = objects::PodSettings {
            workspace_pvc: &self.config.workspace_pvc,
            runtime_class: self.config.runtime_class.as_deref(),
            isolated: !self.config.shared_workspaces,
        };
        let template = objects::template(spec, ns, &settings)
            .map_err(|e| ClusterError::Unsupported(format!("the {} toolkit: {e}", spec.name)))?;
        let config_map = objects::driver_config_map(spec, ns, &text);
        let config_maps = kube::core::ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
        };
        self.apply(&config_maps, config_map).await?;
        self.apply(&objects::templates(), template).await?;
        let pool = objects::warm_pool(&spec.name, ns, self.config.warm_pool);
        self.apply(&objects::warm_pools(), pool).await?;
        tracing::info!(toolkit = %spec.name, namespace = %ns, warm_pool = self.config.warm_pool, "applied the toolkit's SandboxTemplate and SandboxWarmPool");
        self.applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(spec.name.clone(), spec.clone());
        Ok(())
    }

    /// A node of toolkit `spec` for session `session` (whose workspace is
    /// `workspace`, a directory of the shared volume): claim a sandbox,
    /// wait for it, exec the driver. A claim that does not make it is
    /// deleted.
    pub async fn node(
        &self,
        spec: &Arc<LoadedManifest>,
        session: &str,
        workspace: &Path,
        ready_within: Duration,
    ) -> Result<(Node, Claimed), ClusterError> {
        self.ensure_toolkit(spec).await?;
        let dir = workspace
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| {
                ClusterError::Config(format!(
                    "the workspace {} has no directory name",
                    workspace.display()
                ))
            })?
            .to_owned();
        let name = objects::claim_name(&spec.name);
        let owner = objects::Owner {
            instance: &self.instance,
            toolkit: &spec.name,
            pod: self.pod.as_ref().map(|(n, u)| (n.as_str(), u.as_str())),
        };
        let isolated = !self.config.shared_workspaces;
        let claim = objects::claim(
            &name,
            &self.config.namespace,
            &owner,
            session,
            isolated.then_some(dir.as_str()),
        );
        let claim: DynamicObject =
            serde_json::from_value(claim).map_err(|e| ClusterError::Api {
                what: "building the claim".into(),
                error: e.to_string(),
            })?;
        self.api(&objects::claims())
            .create(&PostParams::default(), &claim)
            .await
            .map_err(api_error(format!("creating SandboxClaim `{name}`")))?;
        match self.bind(spec, &name, &dir, ready_within).await {
            Ok((node, pod)) => Ok((node, Claimed { claim: name, pod })),
            Err(e) => {
                self.release(&name).await;
                Err(e)
            }
        }
    }

    async fn bind(
        &self,
        spec: &LoadedManifest,
        claim: &str,
        dir: &str,
        ready_within: Duration,
    ) -> Result<(Node, String), ClusterError> {
        let deadline =
            tokio::time::Instant::now() + Duration::from_secs(self.config.ready_timeout_s);
        let claims = self.api(&objects::claims());
        let mut pause = POLL_FIRST;
        let sandbox = loop {
            let got = claims
                .get(claim)
                .await
                .map_err(api_error(format!("reading SandboxClaim `{claim}`")))?;
            let got = serde_json::to_value(&got).unwrap_or_default();
            let why = match objects::claim_state(&got) {
                objects::ClaimState::Ready(sandbox) => break sandbox,
                objects::ClaimState::Waiting(why) => why,
            };
            if tokio::time::Instant::now() + pause > deadline {
                return Err(ClusterError::NotReady {
                    claim: claim.to_owned(),
                    within: Duration::from_secs(self.config.ready_timeout_s),
                    why: why.unwrap_or_else(|| "no Ready condition yet".into()),
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(POLL_EVERY);
        };
        let sandbox = self
            .api(&objects::sandboxes())
            .get(&sandbox)
            .await
            .map_err(api_error(format!("reading Sandbox `{sandbox}`")))?;
        let pod = objects::pod_of(&serde_json::to_value(&sandbox).unwrap_or_default()).ok_or_else(
            || ClusterError::Api {
                what: "reading the Sandbox's pod".into(),
                error: "the Sandbox names no pod".into(),
            },
        )?;
        let params = AttachParams::default()
            .container(objects::CONTAINER)
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .max_stdout_buf_size(1 << 20)
            .max_stdin_buf_size(1 << 20);
        let mut process = self
            .pods()
            .exec(
                &pod,
                objects::driver_command(dir, !self.config.shared_workspaces),
                &params,
            )
            .await
            .map_err(api_error(format!("exec in pod `{pod}`")))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (process.stdin(), process.stdout(), process.stderr())
        else {
            return Err(ClusterError::Api {
                what: format!("exec in pod `{pod}`"),
                error: "the exec gave no stdio".into(),
            });
        };
        // kube's exec task ends (its status sender dropped) however the
        // stream ends; when it fails it leaves stdout open, so this is what
        // tells the node.
        let Some(status) = process.take_status() else {
            return Err(ClusterError::Api {
                what: format!("exec in pod `{pod}`"),
                error: "the exec gave no status channel".into(),
            });
        };
        let gone = async move {
            match status.await {
                Some(s) => format!(
                    "the exec in its pod ended ({})",
                    s.message.or(s.status).unwrap_or_default()
                ),
                None => "the exec stream to its pod ended".to_owned(),
            }
        };
        let node = Node::from_stdio(
            claim,
            &spec.name,
            stdout,
            stderr,
            stdin,
            process,
            gone,
            ready_within,
        )
        .await
        .map_err(|error| ClusterError::Driver {
            pod: pod.clone(),
            error,
        })?;
        Ok((node, pod))
    }

    /// Delete claim `claim` (its sandbox and pod go with it). Already gone
    /// is fine; another failure is logged (start-up sweeps leftovers).
    pub async fn release(&self, claim: &str) {
        match self
            .api(&objects::claims())
            .delete(claim, &DeleteParams::background())
            .await
        {
            Ok(_) => tracing::debug!(claim, "deleted the SandboxClaim"),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => tracing::warn!(claim, error = %e, "could not delete a SandboxClaim"),
        }
    }

    /// Whether the pod of a node is gone (or no longer running): then the
    /// node was lost with it.
    pub async fn lost(&self, pod: &str) -> Option<String> {
        match self.pods().get_opt(pod).await {
            Ok(None) => Some(format!("its pod `{pod}` is gone")),
            Ok(Some(p)) => {
                let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
                let deleting = p.metadata.deletion_timestamp.is_some();
                (deleting || !matches!(phase.as_str(), "Running" | "Pending")).then(|| {
                    format!(
                        "its pod `{pod}` is {}",
                        if deleting {
                            "being deleted".into()
                        } else {
                            phase
                        }
                    )
                })
            }
            Err(_) => None,
        }
    }

    /// Delete this instance's claims left by an earlier run.
    pub async fn remove_orphans(&self) -> Result<(), ClusterError> {
        let selector = format!(
            "{}=toolhost,{}={}",
            objects::MANAGED_BY,
            objects::INSTANCE_LABEL,
            objects::label_value(&self.instance)
        );
        self.api(&objects::claims())
            .delete_collection(
                &DeleteParams::background(),
                &ListParams::default().labels(&selector),
            )
            .await
            .map_err(api_error("deleting leftover SandboxClaims"))?;
        Ok(())
    }
}
