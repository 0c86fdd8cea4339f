//! What the server trusts and how it reaches registries, shared by the
//! backends whose code comes from somewhere: wasm components
//! (`wasm::provenance`) and the container images of Docker toolkits,
//! services and stdio MCP servers ([`Provenance::judge_image`]).

use crate::credentials::Secrets;
use crate::trust::{Policy, Trust, Verdict};

use super::{Reference, Registries, is_digest};

#[derive(Default)]
pub struct Provenance {
    pub trust: Trust,
    pub registries: Registries,
    pub secrets: Secrets,
}

/// An image reference's parts: (`host/repo` or a local name, the pinned
/// digest if any, whether its first part names a registry).
fn image_parts(image: &str) -> (&str, Option<&str>, bool) {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    // A tag after the last `/` is not part of the repository.
    let repo = match name.rsplit_once(':') {
        Some((r, tag)) if !tag.contains('/') => r,
        _ => name,
    };
    let first = repo.split('/').next().unwrap_or_default();
    let registry =
        repo.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    (repo, digest, registry)
}

impl Provenance {
    /// The source the trust policy judges image `image` as: `oci://host/repo`
    /// for an image of a registry, `image:<name>` for a local one.
    pub fn image_source(image: &str) -> String {
        match image_parts(image) {
            (repo, _, true) => format!("oci://{repo}"),
            (repo, _, false) => format!("image:{repo}"),
        }
    }

    /// Judge container image `image` (a toolkit's, before any node of it
    /// starts): under a policy that checks, it must be referenced by digest
    /// (`host/repo@sha256:…`, which the engine runs exactly) and signed
    /// (cosign, `sha256-<hex>.sig` in its repository) by a trusted key.
    pub async fn judge_image(&self, image: &str) -> Result<Verdict, String> {
        let source = Self::image_source(image);
        let policy = self.trust.policy(&source);
        let (repo, digest, registry) = image_parts(image);
        if policy == Policy::Off {
            return self.trust.judge(&source, &[]);
        }
        let refuse = |why: String| {
            let reason = format!(
                "{source}: the trust policy {} a signed image, and {why}",
                if policy == Policy::Require {
                    "requires"
                } else {
                    "asks for"
                }
            );
            match policy {
                Policy::Require => Err(reason),
                _ => self.trust.judge(&source, &[]).map(|mut v| {
                    v.warning = Some(reason);
                    v
                }),
            }
        };
        let Some(digest) = digest.filter(|d| is_digest(d)) else {
            return refuse(format!(
                "`{image}` is not referenced by digest (`{repo}@sha256:…`)"
            ));
        };
        if !registry {
            return refuse(format!(
                "`{repo}` is a local image: its signatures live in a registry"
            ));
        }
        let reference = Reference::parse(&format!("oci://{repo}@{digest}"))?;
        let client = self.registries.client(&reference, &self.secrets)?;
        let found = match super::signatures(&client, &reference, digest).await {
            Ok(found) => found,
            Err(e) => return refuse(format!("its signatures could not be read: {e}")),
        };
        self.trust.judge_signed(&source, digest, &found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_sources() {
        assert_eq!(
            Provenance::image_source("127.0.0.1:5000/toolhost-node@sha256:ab"),
            "oci://127.0.0.1:5000/toolhost-node"
        );
        assert_eq!(
            Provenance::image_source("ghcr.io/acme/node:1.2"),
            "oci://ghcr.io/acme/node"
        );
        assert_eq!(
            Provenance::image_source("toolhost-node:latest"),
            "image:toolhost-node"
        );
        assert_eq!(
            Provenance::image_source("library/python"),
            "image:library/python"
        );
    }

    #[tokio::test]
    async fn images_under_a_checking_policy_need_a_digest_and_a_registry() {
        let dir = tempfile::tempdir().unwrap();
        let key =
            crate::trust::SigningKey::from_pem(&crate::trust::SigningKey::generate().unwrap())
                .unwrap();
        let path = dir.path().join("k.pub");
        std::fs::write(&path, key.public().pem()).unwrap();
        let trust = Trust::from_config(&crate::trust::TrustConfig {
            policy: Policy::Require,
            keys: vec![path],
            ..Default::default()
        })
        .unwrap();
        let p = Provenance {
            trust,
            ..Default::default()
        };
        let tag = p.judge_image("toolhost-node:latest").await.unwrap_err();
        assert!(tag.contains("not referenced by digest"), "{tag}");
        let local = format!("toolhost-node@sha256:{}", "a".repeat(64));
        assert!(
            p.judge_image(&local)
                .await
                .unwrap_err()
                .contains("local image")
        );
        // Off: not looked at.
        let off = Provenance::default();
        assert!(off.judge_image("toolhost-node:latest").await.is_ok());
    }
}
