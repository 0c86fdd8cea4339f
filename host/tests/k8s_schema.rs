//! Every object the Kubernetes node provider sends, validated against the
//! published schemas: agent-sandbox's CRDs (vendored under
//! deploy/crds/agent-sandbox) and Kubernetes v1.36's OpenAPI (trimmed under
//! tests/k8s/schemas). No cluster is involved.

mod k8s_common;

use k8s_common::{
    check_object, crd_schema, definition, errors, kubernetes, shell_manifest, url_pairs,
};
use serde_json::{Value, json};
use toolhost::nodes::kubernetes::objects;
use toolhost::nodes::manifest::LoadedManifest;

const NS: &str = "toolhost";

/// The default: each sandbox mounts its session's directory alone.
fn settings() -> objects::PodSettings<'static> {
    objects::PodSettings {
        workspace_pvc: "toolhost-workspaces",
        runtime_class: Some("gvisor"),
        isolated: true,
    }
}

/// `shared_workspaces = true`: the whole volume, warm sandboxes.
fn shared() -> objects::PodSettings<'static> {
    objects::PodSettings {
        isolated: false,
        ..settings()
    }
}

fn sent(spec: &LoadedManifest) -> Vec<Value> {
    let owner = objects::Owner {
        instance: "toolhost-0",
        toolkit: &spec.name,
        pod: None,
    };
    let in_cluster = objects::Owner {
        instance: "toolhost-0",
        toolkit: &spec.name,
        pod: Some(("toolhost-7d9f-x2x", "0a6f3c52-7a4e-4a55-9a49-5b1f3e0c2d11")),
    };
    vec![
        objects::driver_config_map(spec, NS, "print('driver')\n"),
        objects::template(spec, NS, &settings()).unwrap(),
        objects::template(spec, NS, &shared()).unwrap(),
        objects::warm_pool(&spec.name, NS, 2),
        objects::claim(
            &objects::claim_name(&spec.name),
            NS,
            &owner,
            "a-session-id",
            Some("a-session-id"),
        ),
        // A claim of a toolhost running in the cluster: its pod owns it.
        objects::claim("toolhost-shell-0000abcd", NS, &in_cluster, "s2", None),
        // A session id that is no label value (an XAgent cookie may be anything).
        objects::claim(
            "toolhost-shell-1234abcd",
            NS,
            &owner,
            "sess/ion with spaces and more than sixty-three characters in all of it",
            None,
        ),
    ]
}

#[test]
fn every_object_sent_for_the_shell_toolkit_is_valid() {
    let spec = shell_manifest();
    for object in sent(&spec) {
        let found = check_object(&object);
        assert!(
            found.is_empty(),
            "{}: {found:#?}\n{object:#}",
            object["kind"]
        );
    }
}

#[test]
fn the_template_says_what_the_manifest_says() {
    let spec = shell_manifest();
    let t = objects::template(&spec, NS, &settings()).unwrap();
    let pod = &t["spec"]["podTemplate"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "toolhost-node:latest");
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    // shell.toml: cpus = 1.0, memory_mb = 512.
    assert_eq!(
        c["resources"]["limits"],
        json!({"cpu": "1000m", "memory": "512Mi"})
    );
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["runtimeClassName"], "gvisor");
    assert_eq!(
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "toolhost-workspaces"
    );
    // By default a sandbox mounts its session's directory alone, named by
    // its claim's variable, which the template lets claims set.
    assert_eq!(
        c["volumeMounts"][0],
        json!({"name": "workspaces", "mountPath": "/workspace", "subPathExpr": "$(TOOLHOST_WORKSPACE)"})
    );
    assert_eq!(c["workingDir"], "/workspace");
    assert_eq!(t["spec"]["envVarsInjectionPolicy"], "Allowed");
    let owner = objects::Owner {
        instance: "i",
        toolkit: "shell",
        pod: None,
    };
    let claim = objects::claim("c", NS, &owner, "s 1", Some("s1dir"));
    assert_eq!(
        claim["spec"]["env"],
        json!([{"name": "TOOLHOST_WORKSPACE", "value": "s1dir"}])
    );
    assert!(objects::driver_command("s1dir", true)[2].starts_with("cd \"/workspace\""));
    // shared_workspaces: the whole volume, no variable, the session's
    // directory given to the driver.
    let shared_t = objects::template(&spec, NS, &shared()).unwrap();
    let shared_c = &shared_t["spec"]["podTemplate"]["spec"]["containers"][0];
    assert_eq!(
        shared_c["volumeMounts"][0],
        json!({"name": "workspaces", "mountPath": "/workspaces"})
    );
    assert!(shared_t["spec"].get("envVarsInjectionPolicy").is_none());
    assert!(
        objects::claim("c", NS, &owner, "s", None)["spec"]
            .get("env")
            .is_none()
    );
    assert!(objects::driver_command("s1dir", false)[2].starts_with("cd \"/workspaces/$1\""));
    // network = "none": a managed policy with no rule, i.e. deny all.
    assert_eq!(t["spec"]["networkPolicyManagement"], "Managed");
    assert_eq!(
        t["spec"]["networkPolicy"],
        json!({"ingress": [], "egress": []})
    );
    // The claim names the pool, which names the template.
    let pool = objects::warm_pool("shell", NS, 3);
    assert_eq!(
        pool["spec"]["sandboxTemplateRef"]["name"],
        t["metadata"]["name"]
    );
    assert_eq!(pool["spec"]["replicas"], 3);
}

#[test]
fn a_host_network_toolkit_gets_the_controllers_default_policy() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(k8s_common::repo().join("plugins/shell/shell.toml"))
        .unwrap()
        .replace("network = \"none\"", "network = \"host\"")
        .replace("cpus = 1.0", "cpus = 0.25");
    std::fs::write(dir.path().join("shell.toml"), text).unwrap();
    std::fs::copy(
        k8s_common::repo().join("plugins/shell/driver.py"),
        dir.path().join("driver.py"),
    )
    .unwrap();
    let spec = k8s_common::shell_manifest_in(dir.path());
    let t = objects::template(&spec, NS, &settings()).unwrap();
    assert!(t["spec"].get("networkPolicy").is_none(), "{t:#}");
    assert_eq!(
        t["spec"]["podTemplate"]["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "250m"
    );
    assert!(check_object(&t).is_empty());
}

#[test]
fn wrong_objects_are_rejected() {
    let spec = shell_manifest();
    // A wrong type in an agent-sandbox field.
    let mut pool = objects::warm_pool("shell", NS, 2);
    pool["spec"]["replicas"] = json!("two");
    assert!(!check_object(&pool).is_empty());
    // The v1alpha1 field name on a v1beta1 claim (v1beta1 requires warmPoolRef).
    let owner = objects::Owner {
        instance: "i",
        toolkit: "shell",
        pod: None,
    };
    let mut claim = objects::claim("c", NS, &owner, "s", None);
    claim["spec"] = json!({"sandboxTemplateRef": {"name": "toolhost-shell"}});
    let found = check_object(&claim);
    assert!(found.iter().any(|e| e.contains("warmPoolRef")), "{found:?}");
    // An owner reference without the owner's uid.
    let in_cluster = objects::Owner {
        pod: Some(("toolhost-0", "u")),
        ..owner
    };
    let mut claim = objects::claim("c", NS, &in_cluster, "s", None);
    assert_eq!(claim["metadata"]["ownerReferences"][0]["kind"], "Pod");
    claim["metadata"]["ownerReferences"][0]
        .as_object_mut()
        .unwrap()
        .remove("uid");
    assert!(
        !check_object(&claim).is_empty(),
        "an owner reference needs a uid"
    );
    // A wrong type inside the embedded pod spec: the CRD's copy and
    // Kubernetes' own PodSpec both refuse it.
    let mut t = objects::template(&spec, NS, &settings()).unwrap();
    t["spec"]["podTemplate"]["spec"]["automountServiceAccountToken"] = json!("no");
    assert!(check_object(&t).len() >= 2, "{:?}", check_object(&t));
    // A misspelt pod field (strict: the server would drop it silently).
    let mut t = objects::template(&spec, NS, &settings()).unwrap();
    t["spec"]["podTemplate"]["spec"]["runtimeClass"] = json!("gvisor");
    assert!(!check_object(&t).is_empty());
    // A resource quantity that is no quantity (the CRD's pattern).
    let mut t = objects::template(&spec, NS, &settings()).unwrap();
    t["spec"]["podTemplate"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] =
        json!("one core");
    assert!(!check_object(&t).is_empty());
    // Metadata: a label value must be a string (Kubernetes' ObjectMeta).
    let mut claim = objects::claim("c", NS, &owner, "s", None);
    claim["metadata"]["labels"]["n"] = json!(1);
    assert!(!check_object(&claim).is_empty());
    // The schemas themselves are not vacuous.
    assert!(
        !errors(
            &crd_schema("extensions.agents.x-k8s.io_sandboxclaims.yaml"),
            &json!({})
        )
        .is_empty()
    );
    assert!(
        !errors(
            &definition("io.k8s.api.core.v1.PodSpec"),
            &json!({"containers": "x"})
        )
        .is_empty()
    );
}

#[test]
fn the_exec_request_uses_only_parameters_kubernetes_declares() {
    // The exec query the provider sends (kube's request builder, the real
    // one; its wire form is also asserted by the replay test).
    let command = objects::driver_command("session-1", true);
    let ap = kube::api::AttachParams::default()
        .container(objects::CONTAINER)
        .stdin(true)
        .stdout(true)
        .stderr(true);
    let req = kube::core::Request::new("/api/v1/namespaces/toolhost/pods")
        .exec("pod-a", command.clone(), &ap)
        .unwrap();
    let uri = req.uri().clone();
    assert_eq!(uri.path(), "/api/v1/namespaces/toolhost/pods/pod-a/exec");
    let declared = kubernetes()["exec_parameters"].as_array().unwrap().clone();
    let pairs: Vec<(String, String)> = url_pairs(uri.query().unwrap_or_default());
    for (k, v) in &pairs {
        let p = declared
            .iter()
            .find(|p| p["name"] == k.as_str() && p["in"] == "query")
            .unwrap_or_else(|| panic!("`{k}` is no exec parameter of Kubernetes v1.36"));
        match p["type"].as_str().unwrap() {
            "boolean" => assert!(v == "true" || v == "false", "{k}={v}"),
            "string" => {}
            t => panic!("unexpected type {t}"),
        }
    }
    let commands: Vec<&str> = pairs
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(
        commands,
        command.iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert!(pairs.contains(&("stdin".into(), "true".into())));
    assert!(pairs.contains(&("container".into(), "node".into())));
}

#[test]
fn names_and_labels_are_valid_whatever_the_toolkit_or_session() {
    for t in ["shell", "My_Kit", "a-b", "x_"] {
        let n = objects::toolkit_object(t);
        assert!(objects::is_dns_subdomain(&n), "{n}");
        assert!(objects::is_dns_subdomain(&objects::claim_name(t)));
    }
    assert_ne!(objects::toolkit_object("A"), objects::toolkit_object("a"));
    for s in ["abc", "sess/ion", "", "-x-", &"z".repeat(100)] {
        let v = objects::label_value(s);
        assert!(objects::is_label_value(&v), "{s:?} -> {v:?}");
    }
    assert_ne!(objects::label_value("a/b"), objects::label_value("a.b/"));
}

/// A GPU toolkit's pods ask for the NVIDIA device plugin's resource (valid
/// against the schema); "all of a node's" cannot be asked of Kubernetes and
/// is refused, named.
#[test]
fn gpus_become_the_device_plugins_resource() {
    let mut spec = shell_manifest();
    spec.manifest.docker.gpu = true;
    spec.manifest.docker.gpu_count = 2;
    let t = objects::template(&spec, NS, &settings()).unwrap();
    let limits = &t["spec"]["podTemplate"]["spec"]["containers"][0]["resources"]["limits"];
    assert_eq!(limits["nvidia.com/gpu"], "2", "{limits}");
    assert!(check_object(&t).is_empty(), "{t:#}");
    spec.manifest.docker.gpu_count = -1;
    let e = objects::template(&spec, NS, &settings()).unwrap_err();
    assert!(e.contains("gpu_count = -1"), "{e}");
}
