//! Components from OCI registries, in the CNCF wasm layout (an OCI image
//! manifest whose config is `application/vnd.wasm.config.v0+json` and whose
//! one layer is the component, `application/wasm`), as ORAS and `wkg` push
//! them. A reference (`oci://host[:port]/repo:tag` or `…@sha256:…`) is
//! resolved to the manifest's digest once and recorded in a lock file beside
//! the component (`<name>.oci.lock`); from then on the locked digest is
//! what is fetched, whatever the tag points at, until the lock is updated
//! on purpose. Every byte is checked against its digest: the manifest
//! against the one asked for (and the one the registry says), the layer
//! against the manifest's. The lock keeps the manifest's bytes and the
//! cosign signatures found for it, so the chain signature → manifest →
//! component is checked again at every load without the registry.
//!
//! [`client`] speaks to the registry (logins included), [`pull`] and
//! [`push`] move components and signatures.

pub mod client;
mod provenance;
mod pull;
mod push;

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use client::{Client, Credentials};
pub use provenance::Provenance;

/// A cosign signature: the payload and the DER signature of it.
pub type Signature = (Vec<u8>, Vec<u8>);
pub use pull::{Pulled, pull, resolve, signatures};
pub use push::{push, push_signature};

pub const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const CONFIG_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_TYPE: &str = "application/wasm";
/// The largest component pulled.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;
const MAX_MANIFEST_BYTES: usize = 1 << 20;
/// The largest signature payload read.
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;

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

    /// `host/repo`: what cosign's payload names as the signed image.
    pub fn repository_path(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// `oci://host/repo`: the source the trust policy judges.
    pub fn source(&self) -> String {
        format!("oci://{}", self.repository_path())
    }

    /// The client's base and the repository: `…/v2/<repo>`.
    fn base(&self, client: &Client) -> String {
        format!("{}/v2/{}", client.base(), self.repository)
    }
}

/// `[oci]` in the server config.
///
/// ```toml
/// [oci.logins."registry.example.com"]
/// username = "ci"
/// secret = "REGISTRY_TOKEN"   # [secrets], else TOOLHOST_SECRET_REGISTRY_TOKEN
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OciConfig {
    pub logins: Registries,
}

/// `[oci.logins."host:port"]`: the login of each registry that needs one.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Registries(pub BTreeMap<String, RegistryLogin>);

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryLogin {
    pub username: String,
    /// The secret holding the password or token (`[secrets]`, else
    /// `TOOLHOST_SECRET_<name>`).
    pub secret: String,
}

impl Registries {
    /// A client of `reference`'s registry, with its login if it has one.
    pub fn client(
        &self,
        reference: &Reference,
        secrets: &crate::credentials::Secrets,
    ) -> Result<Client, String> {
        let credentials = match self.0.get(&reference.registry) {
            Some(login) => Some(Credentials {
                username: login.username.clone(),
                password: secrets
                    .get(&login.secret)
                    .map_err(|e| format!("[oci.logins.\"{}\"]: {e}", reference.registry))?,
            }),
            None => None,
        };
        Client::new(&reference.registry, credentials)
    }
}

pub fn is_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    })
}

pub fn sha256(bytes: &[u8]) -> String {
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
    /// The manifest's bytes, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    /// The cosign signatures the registry had for the manifest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<LockedSignature>,
}

/// A cosign signature: its payload and signature, base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedSignature {
    pub payload: String,
    pub signature: String,
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

    /// The lock of what `pulled` from `reference` (as given).
    pub fn of(reference: &str, pulled: &Pulled) -> Lock {
        Lock {
            reference: reference.to_owned(),
            digest: pulled.manifest.clone(),
            component: pulled.component_digest.clone(),
            manifest: Some(STANDARD.encode(&pulled.manifest_bytes)),
            signatures: Vec::new(),
        }
        .with_signatures(&pulled.signatures)
    }

    /// This lock with `signatures` (payload, signature) instead of its own.
    pub fn with_signatures(&self, signatures: &[Signature]) -> Lock {
        Lock {
            signatures: signatures
                .iter()
                .map(|(payload, signature)| LockedSignature {
                    payload: STANDARD.encode(payload),
                    signature: STANDARD.encode(signature),
                })
                .collect(),
            ..self.clone()
        }
    }

    pub fn text(&self) -> String {
        format!(
            "# Written by toolhost: the digest {} resolved to. Components are\n\
             # fetched by this digest until `toolhost pull --update`.\n{}",
            self.reference,
            toml::to_string(self).unwrap_or_default()
        )
    }

    /// Whether `component` is the one this lock names, through the chain
    /// the signatures vouch for: its digest is the manifest's one layer, and
    /// the manifest's bytes are the locked digest. The signatures, decoded.
    pub fn check(&self, component: &[u8]) -> Result<Vec<Signature>, String> {
        let got = sha256(component);
        if got != self.component {
            return Err(format!(
                "the component is {got}, not the {} its lock names",
                self.component
            ));
        }
        let manifest = self
            .manifest
            .as_deref()
            .map(|m| STANDARD.decode(m))
            .transpose()
            .map_err(|_| "the lock's manifest is not base64".to_owned())?;
        if let Some(manifest) = manifest {
            if sha256(&manifest) != self.digest {
                return Err("the lock's manifest is not the digest it locks".into());
            }
            let layer = pull::component_layer(&manifest)
                .map_err(|e| format!("the lock's manifest: {e}"))?;
            if layer != self.component {
                return Err("the lock's manifest names another component".into());
            }
        } else if !self.signatures.is_empty() {
            return Err("the lock has signatures but not the manifest they sign".into());
        }
        self.signatures
            .iter()
            .map(|s| {
                Ok((
                    STANDARD
                        .decode(&s.payload)
                        .map_err(|_| "a lock signature is not base64")?,
                    STANDARD
                        .decode(&s.signature)
                        .map_err(|_| "a lock signature is not base64")?,
                ))
            })
            .collect::<Result<_, &str>>()
            .map_err(str::to_owned)
    }
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
        let c = Client::new(&r.registry, None).unwrap();
        assert_eq!(r.base(&c), "http://127.0.0.1:5000/v2/tools/calc");
        assert_eq!(r.source(), "oci://127.0.0.1:5000/tools/calc");
        let d = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse(&format!("oci://ghcr.io/acme/calc@{d}")).unwrap();
        assert_eq!(r.digest.as_deref(), Some(d.as_str()));
        let c = Client::new(&r.registry, None).unwrap();
        assert_eq!(r.base(&c), "https://ghcr.io/v2/acme/calc");
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
            manifest: None,
            signatures: Vec::new(),
        };
        std::fs::write(&path, lock.text()).unwrap();
        assert_eq!(Lock::read(&path).unwrap(), Some(lock));
        std::fs::write(&path, "nonsense = 1").unwrap();
        assert!(Lock::read(&path).is_err());
    }

    #[test]
    fn a_lock_checks_the_chain_from_component_to_manifest() {
        let component = b"\0asm\x0d\0\x01\0 a component".to_vec();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": CONFIG_TYPE, "digest": sha256(b"{}"), "size": 2},
            "layers": [{"mediaType": LAYER_TYPE, "digest": sha256(&component), "size": component.len()}],
        }))
        .unwrap();
        let signature = (b"payload".to_vec(), b"sig".to_vec());
        let lock = Lock::of(
            "oci://r/tools/calc:1",
            &Pulled {
                manifest: sha256(&manifest),
                manifest_bytes: manifest.clone(),
                component_digest: sha256(&component),
                component: component.clone(),
                signatures: vec![signature.clone()],
            },
        );
        assert_eq!(lock.check(&component).unwrap(), vec![signature]);
        assert!(lock.check(b"other").unwrap_err().contains("not the"));
        // A lock whose manifest is not its digest, or names another layer.
        let forged = Lock {
            digest: sha256(b"elsewhere"),
            ..lock.clone()
        };
        assert!(
            forged
                .check(&component)
                .unwrap_err()
                .contains("not the digest")
        );
        let other = b"\0asm other".to_vec();
        let swapped = Lock {
            component: sha256(&other),
            ..lock.clone()
        };
        assert!(
            swapped
                .check(&other)
                .unwrap_err()
                .contains("another component")
        );
        // Text and back.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("calc.oci.lock");
        std::fs::write(&path, lock.text()).unwrap();
        assert_eq!(Lock::read(&path).unwrap(), Some(lock));
    }
}
