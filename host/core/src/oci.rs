//! Components from OCI registries, in the CNCF wasm layout (an OCI image
//! manifest whose config is `application/vnd.wasm.config.v0+json` and whose
//! one layer is the component, `application/wasm`), as ORAS and `wkg` push
//! them. A reference (`oci://host[:port]/repo:tag` or `…@sha256:…`) is
//! resolved to the manifest's digest once and recorded in a lock file beside
//! the component (`<name>.oci.lock`); from then on the locked digest is
//! what is fetched, whatever the tag points at, until the lock is updated
//! on purpose. Every byte is checked against its digest: the manifest
//! against the one asked for (and the one the registry says), the layer
//! against the manifest's.
//!
//! Loopback registries are spoken to over plain HTTP, every other over
//! HTTPS. Anonymous pulls only, for now.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const CONFIG_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_TYPE: &str = "application/wasm";
/// The largest component pulled.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;
const MAX_MANIFEST_BYTES: usize = 1 << 20;

/// A parsed `oci://` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub registry: String,
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

impl Reference {
    pub fn parse(text: &str) -> Result<Reference, String> {
        let rest = text
            .strip_prefix("oci://")
            .ok_or_else(|| format!("`{text}` is not an oci:// reference"))?;
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| format!("`{text}` names no repository"))?;
        let (path, digest) = match path.split_once('@') {
            Some((p, d)) => (p, Some(d.to_owned())),
            None => (path, None),
        };
        let (repository, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t.to_owned())),
            _ => (path, None),
        };
        let repo_ok = !repository.is_empty()
            && repository.split('/').all(|part| {
                !part.is_empty()
                    && part.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b)
                    })
            });
        if registry.is_empty() || !repo_ok {
            return Err(format!("`{text}`: not a registry and repository"));
        }
        if let Some(d) = &digest
            && !is_digest(d)
        {
            return Err(format!("`{text}`: `{d}` is not a sha256 digest"));
        }
        if tag.as_deref().is_some_and(|t| {
            t.is_empty()
                || t.len() > 128
                || !t
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        }) {
            return Err(format!("`{text}`: not a valid tag"));
        }
        if tag.is_none() && digest.is_none() {
            return Err(format!("`{text}` names neither a tag nor a digest"));
        }
        Ok(Reference {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag,
            digest,
        })
    }

    fn base(&self) -> String {
        let host = self
            .registry
            .rsplit_once(':')
            .map_or(self.registry.as_str(), |(h, _)| h);
        let loopback = matches!(host, "localhost" | "127.0.0.1" | "[::1]");
        let scheme = if loopback { "http" } else { "https" };
        format!("{scheme}://{}/v2/{}", self.registry, self.repository)
    }
}

fn is_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    })
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::text::hex(&Sha256::digest(bytes)))
}

/// What `<name>.oci.lock` records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// The reference as given.
    pub reference: String,
    /// The manifest's digest it resolved to.
    pub digest: String,
    /// The component layer's digest.
    pub component: String,
}

impl Lock {
    pub fn read(path: &Path) -> Result<Option<Lock>, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    pub fn text(&self) -> String {
        format!(
            "# Written by `toolhost pull`: the digest {} resolved to. Pulls fetch this\n\
             # digest until `toolhost pull --update`.\n{}",
            self.reference,
            toml::to_string(self).unwrap_or_default()
        )
    }
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(rename = "mediaType", default)]
    media_type: Option<String>,
    config: Descriptor,
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: String,
    size: u64,
}

/// A pulled component and the digests it was checked against.
pub struct Pulled {
    pub manifest: String,
    pub component_digest: String,
    pub component: Vec<u8>,
}

/// Pull `reference`'s component; `locked`: the manifest digest to fetch
/// instead of resolving the tag.
pub async fn pull(reference: &Reference, locked: Option<&str>) -> Result<Pulled, String> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| e.to_string())?;
    let wanted = locked.or(reference.digest.as_deref());
    let at = wanted.or(reference.tag.as_deref()).unwrap_or_default();
    let url = format!("{}/manifests/{at}", reference.base());
    let response = fetch(
        http.get(&url)
            .header(reqwest::header::ACCEPT, MANIFEST_TYPE),
        &url,
    )
    .await?;
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
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| format!("{url}: not an OCI manifest: {e}"))?;
    if manifest
        .media_type
        .as_deref()
        .is_some_and(|t| t != MANIFEST_TYPE)
    {
        return Err(format!("{url}: not an OCI image manifest"));
    }
    if manifest.config.media_type != CONFIG_TYPE {
        return Err(format!(
            "{url}: not a wasm component artifact (config {}, not {CONFIG_TYPE})",
            manifest.config.media_type
        ));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(format!("{url}: {} layers, not one", manifest.layers.len()));
    };
    if layer.media_type != LAYER_TYPE {
        return Err(format!(
            "{url}: the layer is {}, not {LAYER_TYPE}",
            layer.media_type
        ));
    }
    if !is_digest(&layer.digest) {
        return Err(format!("{url}: the layer's digest is not sha256"));
    }
    if layer.size > MAX_COMPONENT_BYTES {
        return Err(format!(
            "{url}: a component of {} bytes is over the limit",
            layer.size
        ));
    }
    let blob = format!("{}/blobs/{}", reference.base(), layer.digest);
    let mut response = fetch(http.get(&blob), &blob).await?;
    let mut component = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("{blob}: {e}"))? {
        if component.len() as u64 + chunk.len() as u64 > layer.size {
            return Err(format!(
                "{blob}: more bytes than the manifest says ({})",
                layer.size
            ));
        }
        component.extend_from_slice(&chunk);
    }
    let got = sha256(&component);
    if got != layer.digest || component.len() as u64 != layer.size {
        return Err(format!(
            "{blob}: the component's bytes are {got}, not the manifest's {}",
            layer.digest
        ));
    }
    Ok(Pulled {
        manifest: digest,
        component_digest: got,
        component,
    })
}

/// `request`'s answer, if a success; else why not, naming `url`.
async fn fetch(request: reqwest::RequestBuilder, url: &str) -> Result<reqwest::Response, String> {
    let response = request.send().await.map_err(|e| format!("{url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!(
            "{url}: the registry answered {}",
            response.status()
        ));
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references() {
        let r = Reference::parse("oci://127.0.0.1:5000/tools/calc:1.0").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "tools/calc");
        assert_eq!(r.tag.as_deref(), Some("1.0"));
        assert_eq!(r.base(), "http://127.0.0.1:5000/v2/tools/calc");
        let d = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse(&format!("oci://ghcr.io/acme/calc@{d}")).unwrap();
        assert_eq!(r.digest.as_deref(), Some(d.as_str()));
        assert_eq!(r.base(), "https://ghcr.io/v2/acme/calc");
        for bad in [
            "ghcr.io/acme/calc:1",
            "oci://ghcr.io",
            "oci://ghcr.io/acme/calc",
            "oci://ghcr.io/Acme/calc:1",
            "oci://ghcr.io/acme/calc@sha256:xyz",
            "oci://ghcr.io/acme//calc:1",
            "oci://ghcr.io/acme/calc:bad tag",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_lock_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("calc.oci.lock");
        assert_eq!(Lock::read(&path).unwrap(), None);
        let lock = Lock {
            reference: "oci://127.0.0.1:5000/tools/calc:1.0".into(),
            digest: format!("sha256:{}", "b".repeat(64)),
            component: format!("sha256:{}", "c".repeat(64)),
        };
        std::fs::write(&path, lock.text()).unwrap();
        assert_eq!(Lock::read(&path).unwrap(), Some(lock));
        std::fs::write(&path, "nonsense = 1").unwrap();
        assert!(Lock::read(&path).is_err());
    }
}
