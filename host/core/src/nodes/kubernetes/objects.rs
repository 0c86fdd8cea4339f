//! The objects the cluster provider sends, built from a toolkit manifest:
//! agent-sandbox's `SandboxTemplate`, `SandboxWarmPool` and `SandboxClaim`
//! (group `extensions.agents.x-k8s.io`, v1beta1), the driver's `ConfigMap`,
//! and the exec command. Pure functions: what they return is what goes on
//! the wire, and what the tests validate against the vendored schemas.
//!
//! The agent-sandbox kinds are written as JSON here rather than as derived
//! `CustomResource` types: toolhost sends three small specs and reads two
//! status fields, and the truth about their shape is the vendored CRDs'
//! `openAPIV3Schema`, which the tests check every object against (a derived
//! schema would be a second, unchecked copy; the derive also costs
//! `kube-derive` + `schemars` in every build). The embedded pod spec is the
//! typed `k8s_openapi` `PodSpec` of the pinned Kubernetes version.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, PersistentVolumeClaimVolumeSource, PodSpec,
    ResourceRequirements, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::core::ApiResource;
use serde_json::{Value, json};

use crate::nodes::manifest::{LoadedManifest, Network};

pub const GROUP: &str = "extensions.agents.x-k8s.io";
pub const VERSION: &str = "v1beta1";
/// Where a sandbox mounts the whole workspaces volume (one directory a
/// session), with `shared_workspaces`.
pub const WORKSPACES: &str = "/workspaces";
/// Where a sandbox mounts its own session's directory alone (the default):
/// the volume's `$(TOOLHOST_WORKSPACE)` sub-path, as Docker nodes see theirs.
pub const WORKSPACE: &str = "/workspace";
/// The claim's variable naming its session's directory of the volume.
pub const WORKSPACE_VAR: &str = "TOOLHOST_WORKSPACE";
/// Where a sandbox mounts its toolkit's driver (from a ConfigMap).
pub const DRIVER_DIR: &str = "/opt/toolhost";
/// The sandbox pod's one container.
pub const CONTAINER: &str = "node";
/// Field manager of toolhost's server-side applies.
pub const MANAGER: &str = "toolhost";

pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const INSTANCE_LABEL: &str = "toolhost.dev/instance";
pub const SESSION_LABEL: &str = "toolhost.dev/session";
pub const TOOLKIT_LABEL: &str = "toolhost.dev/toolkit";
/// The session id as it is (a label value may not hold every id).
pub const SESSION_ANNOTATION: &str = "toolhost.dev/session";
/// agent-sandbox: the pod a Sandbox adopted from a warm pool.
pub const POD_NAME_ANNOTATION: &str = "agents.x-k8s.io/pod-name";

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub fn templates() -> ApiResource {
    resource(GROUP, VERSION, "SandboxTemplate", "sandboxtemplates")
}

pub fn warm_pools() -> ApiResource {
    resource(GROUP, VERSION, "SandboxWarmPool", "sandboxwarmpools")
}

pub fn claims() -> ApiResource {
    resource(GROUP, VERSION, "SandboxClaim", "sandboxclaims")
}

/// The core kind a claim ends in (`agents.x-k8s.io`).
pub fn sandboxes() -> ApiResource {
    resource("agents.x-k8s.io", VERSION, "Sandbox", "sandboxes")
}

/// Whether `s` may name an object (an RFC 1123 subdomain).
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// Whether `s` may be a label value.
pub fn is_label_value(s: &str) -> bool {
    s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.bytes().next().is_none_or(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_none_or(|b| b.is_ascii_alphanumeric())
}

/// `s` as a label value: unchanged when it is one, else its allowed
/// characters and a hash of the whole (so two ids never share one).
pub fn label_value(s: &str) -> String {
    if is_label_value(s) {
        return s.to_owned();
    }
    let hash = &crate::wasm::loader::content_hash(s.as_bytes())[..10];
    let kept: String = s
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect();
    let kept = kept.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if kept.is_empty() {
        format!("h{hash}")
    } else {
        format!("{kept}-{hash}")
    }
}

/// The object name of toolkit `toolkit`'s template, warm pool and driver
/// ConfigMap: `toolhost-<toolkit>` (lower-cased; `_` -> `-`; a hash added
/// when that changed it, so `A` and `a` differ).
pub fn toolkit_object(toolkit: &str) -> String {
    let plain: String = toolkit
        .chars()
        .map(|c| match c {
            '_' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    let plain = plain.trim_matches('-');
    if plain == toolkit {
        format!("toolhost-{plain}")
    } else {
        let hash = &crate::wasm::loader::content_hash(toolkit.as_bytes())[..8];
        format!("toolhost-{plain}-{hash}")
    }
}

/// Who made an object, and for what.
#[derive(Clone, Copy)]
pub struct Owner<'a> {
    pub instance: &'a str,
    pub toolkit: &'a str,
    /// The toolhost pod (name, uid) when it runs in the cluster: its claims
    /// are then the pod's dependents, and Kubernetes' garbage collector
    /// deletes them with it (a replica gone for good leaves no sandbox).
    pub pod: Option<(&'a str, &'a str)>,
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), label_value(v)))
        .collect()
}

/// The ConfigMap carrying toolkit `spec`'s driver (`driver` is its text).
pub fn driver_config_map(spec: &LoadedManifest, namespace: &str, driver: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": toolkit_object(&spec.name),
            "namespace": namespace,
            "labels": labels(&[(MANAGED_BY, "toolhost"), (TOOLKIT_LABEL, &spec.name)]),
        },
        "data": { "driver.py": driver },
    })
}

/// Settings of the pod template that come from `[kubernetes]`.
pub struct PodSettings<'a> {
    pub workspace_pvc: &'a str,
    pub runtime_class: Option<&'a str>,
    /// Each sandbox mounts only its session's directory ([`WORKSPACE`]),
    /// named by its claim; else the whole volume ([`WORKSPACES`]).
    pub isolated: bool,
}

/// A numeric `uid[:gid]` user (exec cannot pick a user, so the container
/// runs as it); a named user cannot be mapped.
fn numeric_user(user: Option<&str>) -> Result<(Option<i64>, Option<i64>), String> {
    let Some(user) = user else {
        return Ok((None, None));
    };
    let mut parts = user.splitn(2, ':');
    let uid = parts.next().unwrap_or_default().parse::<i64>();
    let gid = parts.next().map(str::parse::<i64>).transpose();
    match (uid, gid) {
        (Ok(u), Ok(g)) => Ok((Some(u), g)),
        _ => Err(format!(
            "user `{user}`: a Kubernetes pod runs as a numeric uid[:gid]; give the manifest's `user` as numbers"
        )),
    }
}

/// The pod spec of toolkit `spec`'s sandboxes: its image idling (the driver
/// is exec'd into it), CPU and memory capped as the manifest says, no
/// service account token, no privilege escalation, every capability
/// dropped, the workspaces volume at [`WORKSPACES`] and the driver at
/// [`DRIVER_DIR`].
pub fn pod_spec(spec: &LoadedManifest, settings: &PodSettings) -> Result<PodSpec, String> {
    let d = &spec.manifest.docker;
    let (uid, gid) = numeric_user(d.user.as_deref())?;
    let mut caps = BTreeMap::new();
    // A fraction of a CPU in millicores, memory in MiB: both exact.
    let millis = (d.cpus * 1000.0).round() as i64;
    caps.insert("cpu".to_owned(), Quantity(format!("{millis}m")));
    caps.insert("memory".to_owned(), Quantity(format!("{}Mi", d.memory_mb)));
    // GPUs as the NVIDIA device plugin's extended resource: a number (a
    // pod cannot ask for "all of a node's").
    if d.gpu {
        if d.gpu_count < 1 {
            return Err(format!(
                "the {} toolkit asks for all of a node's GPUs (gpu_count = -1): on Kubernetes give gpu_count as a number",
                spec.name
            ));
        }
        caps.insert(
            "nvidia.com/gpu".to_owned(),
            Quantity(d.gpu_count.to_string()),
        );
    }
    let container = Container {
        name: CONTAINER.into(),
        image: Some(d.image.clone()),
        // A `:latest` tag would default to Always: an image loaded into the
        // nodes (kind, air-gapped clusters) must be usable as it is.
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec!["sleep".into(), "infinity".into()]),
        working_dir: Some(
            if settings.isolated {
                WORKSPACE
            } else {
                WORKSPACES
            }
            .into(),
        ),
        env: (!d.env.is_empty()).then(|| {
            d.env
                .iter()
                .map(|(k, v)| k8s_openapi::api::core::v1::EnvVar {
                    name: k.clone(),
                    value: Some(v.clone()),
                    ..Default::default()
                })
                .collect()
        }),
        resources: Some(ResourceRequirements {
            limits: Some(caps.clone()),
            requests: Some(caps),
            ..Default::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            run_as_user: uid,
            run_as_group: gid,
            ..Default::default()
        }),
        volume_mounts: Some(vec![
            if settings.isolated {
                // The kubelet expands the claim's variable: the session's
                // directory alone, never its neighbours.
                VolumeMount {
                    name: "workspaces".into(),
                    mount_path: WORKSPACE.into(),
                    sub_path_expr: Some(format!("$({WORKSPACE_VAR})")),
                    ..Default::default()
                }
            } else {
                VolumeMount {
                    name: "workspaces".into(),
                    mount_path: WORKSPACES.into(),
                    ..Default::default()
                }
            },
            VolumeMount {
                name: "driver".into(),
                mount_path: DRIVER_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    Ok(PodSpec {
        containers: vec![container],
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        runtime_class_name: settings.runtime_class.map(str::to_owned),
        volumes: Some(vec![
            Volume {
                name: "workspaces".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: settings.workspace_pvc.into(),
                    read_only: None,
                }),
                ..Default::default()
            },
            Volume {
                name: "driver".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: toolkit_object(&spec.name),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ]),
        ..Default::default()
    })
}

/// Toolkit `spec`'s `SandboxTemplate`. `network = "none"` becomes a managed
/// NetworkPolicy with no rule, which agent-sandbox documents as deny-all
/// ingress and egress (enforced only where the CNI enforces
/// NetworkPolicies); `network = "host"` has no pod equivalent and gets
/// agent-sandbox's default policy (public internet egress, no cluster or
/// metadata addresses).
pub fn template(
    spec: &LoadedManifest,
    namespace: &str,
    settings: &PodSettings,
) -> Result<Value, String> {
    let pod = pod_spec(spec, settings)?;
    let pod = serde_json::to_value(&pod).map_err(|e| e.to_string())?;
    let mut body = json!({
        "podTemplate": {
            "metadata": { "labels": labels(&[(MANAGED_BY, "toolhost"), (TOOLKIT_LABEL, &spec.name)]) },
            "spec": pod,
        },
        "networkPolicyManagement": "Managed",
    });
    if spec.manifest.docker.network == Network::None {
        body["networkPolicy"] = json!({ "ingress": [], "egress": [] });
    }
    if settings.isolated {
        // Claims name their session's directory (and so start a sandbox of
        // their own: agent-sandbox does not hand a claim with variables a
        // warm one).
        body["envVarsInjectionPolicy"] = json!("Allowed");
    }
    Ok(json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "SandboxTemplate",
        "metadata": {
            "name": toolkit_object(&spec.name),
            "namespace": namespace,
            "labels": labels(&[(MANAGED_BY, "toolhost"), (TOOLKIT_LABEL, &spec.name)]),
        },
        "spec": body,
    }))
}

/// Toolkit `toolkit`'s `SandboxWarmPool` of `replicas` pre-started
/// sandboxes (v1beta1 claims name a warm pool, so it exists at 0 too);
/// a changed template replaces the waiting ones.
pub fn warm_pool(toolkit: &str, namespace: &str, replicas: u32) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "SandboxWarmPool",
        "metadata": {
            "name": toolkit_object(toolkit),
            "namespace": namespace,
            "labels": labels(&[(MANAGED_BY, "toolhost"), (TOOLKIT_LABEL, toolkit)]),
        },
        "spec": {
            "replicas": replicas,
            "sandboxTemplateRef": { "name": toolkit_object(toolkit) },
            "updateStrategy": { "type": "Recreate" },
        },
    })
}

/// The name of a new claim for toolkit `toolkit`.
pub fn claim_name(toolkit: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let base = toolkit_object(toolkit);
    // Object names of 63 at most keep the sandbox and pod names valid.
    let base: String = base.chars().take(63 - 9).collect();
    format!("{}-{}", base.trim_end_matches('-'), &id[..8])
}

/// A `SandboxClaim` named `name` of session `session`'s node of
/// `owner.toolkit`, from that toolkit's warm pool.
/// `workspace`: the session's directory of the volume, for a template that
/// mounts it alone (`PodSettings::isolated`).
pub fn claim(
    name: &str,
    namespace: &str,
    owner: &Owner,
    session: &str,
    workspace: Option<&str>,
) -> Value {
    let mut claim = json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "SandboxClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels(&[
                (MANAGED_BY, "toolhost"),
                (INSTANCE_LABEL, owner.instance),
                (SESSION_LABEL, session),
                (TOOLKIT_LABEL, owner.toolkit),
            ]),
            "annotations": { SESSION_ANNOTATION: session },
        },
        "spec": {
            "warmPoolRef": { "name": toolkit_object(owner.toolkit) },
        },
    });
    if let Some(dir) = workspace {
        claim["spec"]["env"] = json!([{"name": WORKSPACE_VAR, "value": dir}]);
    }
    if let Some((pod, uid)) = owner.pod {
        claim["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid}]);
    }
    claim
}

/// The command exec'd into a session's sandbox: into the session's own
/// directory (its whole mount when `isolated`, else its directory of the
/// volume, `dir`, passed as an argument, never spliced into the script),
/// then the driver.
pub fn driver_command(dir: &str, isolated: bool) -> Vec<String> {
    let into = if isolated {
        WORKSPACE.to_owned()
    } else {
        format!("{WORKSPACES}/$1")
    };
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "cd \"{into}\" || {{ echo \"no workspace directory {into}\" >&2; exit 97; }}; exec python3 -u {DRIVER_DIR}/driver.py"
        ),
        "toolhost-driver".into(),
        dir.into(),
    ]
}

/// What a claim's status says.
#[derive(Debug, PartialEq)]
pub enum ClaimState {
    /// Bound to a ready sandbox of that name.
    Ready(String),
    /// Not yet: the Ready condition's reason and message, if any.
    Waiting(Option<String>),
}

/// Read a claim's `status` (`conditions[type=Ready]`, `sandbox.name`).
pub fn claim_state(claim: &Value) -> ClaimState {
    let status = &claim["status"];
    let ready = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
    let sandbox = status["sandbox"]["name"].as_str().filter(|s| !s.is_empty());
    match (ready, sandbox) {
        (Some(c), Some(name)) if c["status"] == "True" => ClaimState::Ready(name.to_owned()),
        (Some(c), _) => ClaimState::Waiting(Some(format!(
            "{}: {}",
            c["reason"].as_str().unwrap_or("NotReady"),
            c["message"].as_str().unwrap_or_default()
        ))),
        (None, _) => ClaimState::Waiting(None),
    }
}

/// The pod of a Sandbox: the one it adopted from the warm pool, else its own
/// (named as the Sandbox).
pub fn pod_of(sandbox: &Value) -> Option<String> {
    let adopted = sandbox["metadata"]["annotations"][POD_NAME_ANNOTATION].as_str();
    adopted
        .or_else(|| sandbox["metadata"]["name"].as_str())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}
