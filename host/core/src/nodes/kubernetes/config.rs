//! `[kubernetes]`: the cluster node provider's settings and their checks.

use serde::{Deserialize, Serialize};

/// `[kubernetes]`: the cluster node provider (see
/// [`super`]). The key names are shared with the deployment
/// manifests (`deploy/kubernetes/`); keep them and `docs/backends.md` in
/// step (`make kubernetes` checks the manifests' `toolhost.toml` against
/// this type).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KubernetesConfig {
    /// Namespace of every object toolhost makes, and of the sandbox pods.
    pub namespace: String,
    /// Kubeconfig file; none: the in-cluster service account, else
    /// `$KUBECONFIG` / `~/.kube/config`.
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Context of the kubeconfig (its current one when unset).
    pub context: Option<String>,
    /// Value of the instance label on this server's claims (default:
    /// `$HOSTNAME`, else the data directory's scope).
    pub instance: Option<String>,
    /// PersistentVolumeClaim (ReadWriteMany) of the session workspaces:
    /// mounted at `/workspaces` in every sandbox, and by the toolhost
    /// replicas at `<data>/workspaces`.
    pub workspace_pvc: String,
    /// Pre-started sandboxes per toolkit (`SandboxWarmPool.spec.replicas`).
    pub warm_pool: u32,
    /// How long a first heavy call waits for its claim to be ready, s.
    pub ready_timeout_s: u64,
    /// `runtimeClassName` of the sandbox pods (gVisor, Kata, ...).
    pub runtime_class: Option<String>,
    /// Every sandbox mounts the whole workspaces volume and starts in its
    /// session's directory, so warm sandboxes can be handed out; a shell can
    /// then reach other sessions' files. Off (the default): each sandbox
    /// mounts its session's directory alone at /workspace, started for its
    /// claim (no warm pool).
    pub shared_workspaces: bool,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            namespace: "default".into(),
            kubeconfig: None,
            context: None,
            instance: None,
            workspace_pvc: String::new(),
            warm_pool: 0,
            ready_timeout_s: 120,
            runtime_class: None,
            shared_workspaces: false,
        }
    }
}

impl KubernetesConfig {
    /// Why these settings cannot work, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        let dns_label = |s: &str| {
            !s.is_empty()
                && s.len() <= 63
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !s.starts_with('-')
                && !s.ends_with('-')
        };
        if !dns_label(&self.namespace) {
            return Err(format!(
                "namespace `{}` is not a valid namespace name (lower-case letters, digits and '-', at most 63)",
                self.namespace
            ));
        }
        if self.workspace_pvc.is_empty() {
            return Err("workspace_pvc is required: the PersistentVolumeClaim (ReadWriteMany) that holds the session workspaces, mounted by the sandboxes and by toolhost at <data>/workspaces".into());
        }
        if !super::is_dns_subdomain(&self.workspace_pvc) {
            return Err(format!(
                "workspace_pvc `{}` is not a valid object name",
                self.workspace_pvc
            ));
        }
        if self.ready_timeout_s == 0 {
            return Err("ready_timeout_s must be at least 1".into());
        }
        if self.warm_pool > 0 && !self.shared_workspaces {
            return Err("warm_pool needs shared_workspaces = true: a sandbox that mounts its session's workspace alone is started for its claim, so none can wait in a pool (and shared workspaces let a shell reach other sessions' files: see docs/backends.md)".into());
        }
        if self.context.is_some() && self.kubeconfig.is_none() {
            return Err("context needs a kubeconfig file".into());
        }
        if let Some(i) = &self.instance
            && !super::is_label_value(i)
        {
            return Err(format!(
                "instance `{i}` is not a valid label value (at most 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit)"
            ));
        }
        Ok(())
    }
}
