//! Pushing a component in the CNCF wasm layout, and cosign signatures.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::client::{Client, Request};
use super::pull::ok;
use super::{CONFIG_TYPE, LAYER_TYPE, MANIFEST_TYPE, MAX_MANIFEST_BYTES, Reference, sha256};
use crate::trust::cosign;

/// Push `component` to `reference` (its tag; a digest reference is
/// refused: the digest is what the push makes). The manifest's digest.
/// `title` names the layer's file for clients that save it (ORAS).
pub async fn push(
    client: &Client,
    reference: &Reference,
    component: &[u8],
    title: &str,
) -> Result<String, String> {
    let tag = match (&reference.tag, &reference.digest) {
        (Some(tag), None) => tag.clone(),
        _ => return Err("push to a tag (oci://host/repo:tag), not a digest".into()),
    };
    let layer = sha256(component);
    let config = serde_json::to_vec(&json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer],
    }))
    .unwrap_or_default();
    let config_digest = upload(client, reference, &config).await?;
    upload(client, reference, component).await?;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": config.len()},
        "layers": [{
            "mediaType": LAYER_TYPE,
            "digest": layer,
            "size": component.len(),
            "annotations": {"org.opencontainers.image.title": title},
        }],
    });
    put_manifest(client, reference, &tag, &manifest).await
}

/// Add a cosign signature of manifest `digest` to `reference`'s repository
/// (the `sha256-<hex>.sig` tag; signatures already there are kept).
pub async fn push_signature(
    client: &Client,
    reference: &Reference,
    digest: &str,
    payload: &[u8],
    signature: &str,
) -> Result<(), String> {
    let tag = cosign::signature_tag(digest);
    let url = format!("{}/manifests/{tag}", reference.base(client));
    let existing = client
        .send(&Request::get(url.clone()).header("accept", MANIFEST_TYPE))
        .await?;
    let mut layers: Vec<Value> = if existing.status() == StatusCode::NOT_FOUND {
        Vec::new()
    } else {
        let bytes = ok(existing, &url)?
            .bytes()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let manifest: Value =
            serde_json::from_slice(&bytes).map_err(|e| format!("{url}: not a manifest: {e}"))?;
        manifest["layers"].as_array().cloned().unwrap_or_default()
    };
    let payload_digest = upload(client, reference, payload).await?;
    let layer = json!({
        "mediaType": cosign::PAYLOAD_TYPE,
        "digest": payload_digest,
        "size": payload.len(),
        "annotations": {cosign::SIGNATURE_ANNOTATION: signature},
    });
    if layers.contains(&layer) {
        return Ok(());
    }
    layers.push(layer);
    let diff_ids: Vec<&Value> = layers.iter().map(|l| &l["digest"]).collect();
    let config = serde_json::to_vec(&json!({
        "architecture": "",
        "os": "",
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }))
    .unwrap_or_default();
    let config_digest = upload(client, reference, &config).await?;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config.len(),
        },
        "layers": layers,
    });
    put_manifest(client, reference, &tag, &manifest)
        .await
        .map(|_| ())
}

async fn put_manifest(
    client: &Client,
    reference: &Reference,
    tag: &str,
    manifest: &Value,
) -> Result<String, String> {
    let bytes = serde_json::to_vec(manifest).unwrap_or_default();
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err("a manifest over 1 MiB".into());
    }
    let digest = sha256(&bytes);
    let url = format!("{}/manifests/{tag}", reference.base(client));
    let request = Request::get(url.clone())
        .header("content-type", MANIFEST_TYPE)
        .body(Method::PUT, bytes);
    let response = ok(client.send(&request).await?, &url)?;
    let said = response
        .headers()
        .get("docker-content-digest")
        .and_then(|v| v.to_str().ok());
    if let Some(said) = said
        && said != digest
    {
        return Err(format!(
            "{url}: the registry stored the manifest as {said}, its bytes are {digest}"
        ));
    }
    Ok(digest)
}

/// Upload blob `bytes` unless the registry has it: its digest.
async fn upload(client: &Client, reference: &Reference, bytes: &[u8]) -> Result<String, String> {
    let digest = sha256(bytes);
    let base = reference.base(client);
    let head = Request {
        method: Method::HEAD,
        ..Request::get(format!("{base}/blobs/{digest}"))
    };
    if client.send(&head).await?.status().is_success() {
        return Ok(digest);
    }
    let start = format!("{base}/blobs/uploads/");
    let response = ok(
        client
            .send(&Request::get(start.clone()).body(Method::POST, Vec::new()))
            .await?,
        &start,
    )?;
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| format!("{start}: no upload location"))?;
    let mut url = if location.starts_with('/') {
        format!("{}{location}", client.base())
    } else {
        location.to_owned()
    };
    url.push(if url.contains('?') { '&' } else { '?' });
    url.push_str(&format!("digest={digest}"));
    let request = Request::get(url.clone())
        .header("content-type", "application/octet-stream")
        .body(Method::PUT, bytes.to_vec());
    let response = client.send(&request).await?;
    if response.status() != StatusCode::CREATED {
        return Err(format!(
            "{start}: the upload of {digest} was answered {}",
            response.status()
        ));
    }
    Ok(digest)
}
