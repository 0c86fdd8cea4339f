//! What the Kubernetes tests share: the vendored schemas (agent-sandbox's
//! CRDs, Kubernetes' trimmed OpenAPI) as validators, and the shell toolkit's
//! manifest.
#![allow(dead_code)]

pub mod replay;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Reject what a schema does not name: every object schema that lists its
/// `properties` (and says nothing of others) gets `additionalProperties:
/// false`. Stricter than the API server, which prunes unknown fields of a
/// custom resource silently: a misspelt field is an error here.
pub fn strict(node: &mut Value) {
    match node {
        Value::Object(map) => {
            let open = map.contains_key("additionalProperties")
                || map.contains_key("x-kubernetes-preserve-unknown-fields");
            if map.contains_key("properties") && !open {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            for (_, v) in map.iter_mut() {
                strict(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strict),
        _ => {}
    }
}

/// The v1beta1 `openAPIV3Schema` of a vendored agent-sandbox CRD file.
pub fn crd_schema(file: &str) -> Value {
    let path = repo().join("deploy/crds/agent-sandbox").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let crd: Value = serde_yaml::from_str(&text).unwrap();
    let version = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1beta1")
        .unwrap_or_else(|| panic!("{file} has no v1beta1"));
    assert_eq!(version["served"], true, "{file}: v1beta1 is not served");
    let mut schema = version["schema"]["openAPIV3Schema"].clone();
    strict(&mut schema);
    schema
}

/// The trimmed Kubernetes OpenAPI (definitions, exec parameters).
pub fn kubernetes() -> Value {
    let path = repo().join("tests/k8s/schemas/kubernetes-v1.36.0.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A schema for Kubernetes definition `name` (strict).
pub fn definition(name: &str) -> Value {
    let mut definitions = kubernetes()["definitions"].clone();
    assert!(definitions.get(name).is_some(), "{name} is not vendored");
    strict(&mut definitions);
    json!({ "$ref": format!("#/definitions/{name}"), "definitions": definitions })
}

/// Every error of `instance` against `schema` (none: valid).
pub fn errors(schema: &Value, instance: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(schema).expect("a valid schema");
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// Check an object toolhost sends by its kind: the CRD's schema for the
/// agent-sandbox kinds (the embedded pod spec also against Kubernetes'
/// PodSpec), Kubernetes' own for core kinds; metadata against ObjectMeta.
pub fn check_object(object: &Value) -> Vec<String> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let mut found = match kind {
        "SandboxTemplate" => {
            let mut e = errors(
                &crd_schema("extensions.agents.x-k8s.io_sandboxtemplates.yaml"),
                object,
            );
            e.extend(errors(
                &definition("io.k8s.api.core.v1.PodSpec"),
                &object["spec"]["podTemplate"]["spec"],
            ));
            e
        }
        "SandboxWarmPool" => errors(
            &crd_schema("extensions.agents.x-k8s.io_sandboxwarmpools.yaml"),
            object,
        ),
        "SandboxClaim" => errors(
            &crd_schema("extensions.agents.x-k8s.io_sandboxclaims.yaml"),
            object,
        ),
        "Sandbox" => errors(&crd_schema("agents.x-k8s.io_sandboxes.yaml"), object),
        "ConfigMap" => errors(&definition("io.k8s.api.core.v1.ConfigMap"), object),
        other => vec![format!("unexpected kind `{other}`")],
    };
    found.extend(errors(
        &definition("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
        &object["metadata"],
    ));
    found
}

/// The shell toolkit of the repository, as loaded from its folder.
pub fn shell_manifest() -> toolhost::nodes::manifest::LoadedManifest {
    shell_manifest_in(&repo().join("plugins/shell"))
}

pub fn shell_manifest_in(dir: &Path) -> toolhost::nodes::manifest::LoadedManifest {
    let text = std::fs::read_to_string(dir.join("shell.toml")).unwrap();
    toolhost::nodes::manifest::parse("shell", dir, &text).unwrap()
}

/// `a=b&c=d` decoded.
pub fn url_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let dec = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (dec(k), dec(v))
        })
        .collect()
}
