//! Pulling a component, and the cosign signatures of its manifest.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::StatusCode;
use serde::Deserialize;

use super::client::{Client, Request};
use super::{
    CONFIG_TYPE, LAYER_TYPE, MANIFEST_TYPE, MAX_COMPONENT_BYTES, MAX_MANIFEST_BYTES,
    MAX_PAYLOAD_BYTES, Reference, is_digest, sha256,
};
use crate::trust::cosign;

#[derive(Deserialize)]
pub(super) struct Manifest {
    #[serde(rename = "mediaType", default)]
    media_type: Option<String>,
    config: Descriptor,
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
pub(super) struct Descriptor {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

/// A pulled component and the digests it was checked against.
pub struct Pulled {
    /// The manifest's digest.
    pub manifest: String,
    pub manifest_bytes: Vec<u8>,
    pub component_digest: String,
    pub component: Vec<u8>,
    /// The cosign signatures found for the manifest: (payload, signature).
    pub signatures: Vec<super::Signature>,
}

/// The digest of the component layer of manifest `bytes`, checked to be
/// the CNCF wasm layout.
pub(super) fn component_layer(bytes: &[u8]) -> Result<String, String> {
    Ok(layout(bytes)?.0)
}

fn layout(bytes: &[u8]) -> Result<(String, u64), String> {
    let manifest: Manifest =
        serde_json::from_slice(bytes).map_err(|e| format!("not an OCI manifest: {e}"))?;
    if manifest
        .media_type
        .as_deref()
        .is_some_and(|t| t != MANIFEST_TYPE)
    {
        return Err("not an OCI image manifest".into());
    }
    if manifest.config.media_type != CONFIG_TYPE {
        return Err(format!(
            "not a wasm component artifact (config {}, not {CONFIG_TYPE})",
            manifest.config.media_type
        ));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(format!("{} layers, not one", manifest.layers.len()));
    };
    if layer.media_type != LAYER_TYPE {
        return Err(format!(
            "the layer is {}, not {LAYER_TYPE}",
            layer.media_type
        ));
    }
    if !is_digest(&layer.digest) {
        return Err("the layer's digest is not sha256".into());
    }
    if layer.size > MAX_COMPONENT_BYTES {
        return Err(format!(
            "a component of {} bytes is over the limit",
            layer.size
        ));
    }
    Ok((layer.digest.clone(), layer.size))
}

/// Pull `reference`'s component; `locked`: the manifest digest to fetch
/// instead of resolving the tag. With it, the cosign signatures the
/// registry holds for that manifest.
pub async fn pull(
    client: &Client,
    reference: &Reference,
    locked: Option<&str>,
) -> Result<Pulled, String> {
    let wanted = locked.or(reference.digest.as_deref());
    let (url, bytes, digest) = manifest(client, reference, wanted, MANIFEST_TYPE).await?;
    let (layer, size) = layout(&bytes).map_err(|e| format!("{url}: {e}"))?;
    let component = blob(client, reference, &layer, size).await?;
    let signatures = signatures(client, reference, &digest).await?;
    Ok(Pulled {
        manifest: digest,
        manifest_bytes: bytes.to_vec(),
        component_digest: layer,
        component,
        signatures,
    })
}

/// The digest `reference` resolves to, whatever it is (a component, a
/// container image, an index), checked against the bytes served.
pub async fn resolve(client: &Client, reference: &Reference) -> Result<String, String> {
    let accept = [
        MANIFEST_TYPE,
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ]
    .join(", ");
    let wanted = reference.digest.as_deref();
    Ok(manifest(client, reference, wanted, &accept).await?.2)
}

/// The manifest `reference` names (`wanted`: the digest to fetch instead
/// of its tag), as `accept`ed: its URL, bytes and digest, the bytes
/// checked against `wanted` and the digest the registry states.
async fn manifest(
    client: &Client,
    reference: &Reference,
    wanted: Option<&str>,
    accept: &str,
) -> Result<(String, bytes::Bytes, String), String> {
    let at = wanted.or(reference.tag.as_deref()).unwrap_or_default();
    let url = format!("{}/manifests/{at}", reference.base(client));
    let response = ok(
        client
            .send(&Request::get(url.clone()).header("accept", accept))
            .await?,
        &url,
    )?;
    let said = response
        .headers()
        .get("docker-content-digest")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = response.bytes().await.map_err(|e| format!("{url}: {e}"))?;
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(format!("{url}: a manifest over 1 MiB"));
    }
    let digest = sha256(&bytes);
    if let Some(wanted) = wanted
        && digest != wanted
    {
        return Err(format!(
            "{url}: the registry served a manifest whose digest is {digest}, not the {wanted} asked for"
        ));
    }
    if let Some(said) = said
        && said != digest
    {
        return Err(format!(
            "{url}: the registry says the manifest is {said}, its bytes are {digest}"
        ));
    }
    Ok((url, bytes, digest))
}

/// Blob `digest` of `size` bytes, checked.
async fn blob(
    client: &Client,
    reference: &Reference,
    digest: &str,
    size: u64,
) -> Result<Vec<u8>, String> {
    let url = format!("{}/blobs/{digest}", reference.base(client));
    let mut response = ok(client.send(&Request::get(url.clone())).await?, &url)?;
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
        if bytes.len() as u64 + chunk.len() as u64 > size {
            return Err(format!("{url}: more bytes than the manifest says ({size})"));
        }
        bytes.extend_from_slice(&chunk);
    }
    let got = sha256(&bytes);
    if got != digest || bytes.len() as u64 != size {
        return Err(format!(
            "{url}: the blob's bytes are {got}, not the manifest's {digest}"
        ));
    }
    Ok(bytes)
}

/// The cosign signatures of manifest `digest` (none when the registry has
/// no `sha256-<hex>.sig` tag). Whether they verify is the trust policy's
/// question, asked at load.
pub async fn signatures(
    client: &Client,
    reference: &Reference,
    digest: &str,
) -> Result<Vec<super::Signature>, String> {
    let url = format!(
        "{}/manifests/{}",
        reference.base(client),
        cosign::signature_tag(digest)
    );
    let response = client
        .send(&Request::get(url.clone()).header("accept", MANIFEST_TYPE))
        .await?;
    if response.status() == StatusCode::NOT_FOUND {
        return Ok(Vec::new());
    }
    let bytes = ok(response, &url)?
        .bytes()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(format!("{url}: a manifest over 1 MiB"));
    }
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| format!("{url}: not an OCI manifest: {e}"))?;
    let mut found = Vec::new();
    for layer in manifest.layers.iter().take(32) {
        let Some(signature) = layer.annotations.get(cosign::SIGNATURE_ANNOTATION) else {
            continue;
        };
        if layer.media_type != cosign::PAYLOAD_TYPE
            || !is_digest(&layer.digest)
            || layer.size > MAX_PAYLOAD_BYTES
        {
            continue;
        }
        let Ok(signature) = STANDARD.decode(signature) else {
            continue;
        };
        let payload = blob(client, reference, &layer.digest, layer.size).await?;
        found.push((payload, signature));
    }
    Ok(found)
}

/// `response`, if a success; else why not, naming `url`.
pub(super) fn ok(response: reqwest::Response, url: &str) -> Result<reqwest::Response, String> {
    if !response.status().is_success() {
        return Err(format!(
            "{url}: the registry answered {}",
            response.status()
        ));
    }
    Ok(response)
}
