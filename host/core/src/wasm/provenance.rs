//! Where a component comes from, checked before it is compiled.
//!
//! An entry of the plugins directory is `<name>.wasm` with, beside it, any
//! of: its manifest `<name>.toml` (whose `source = "oci://…"` names the
//! registry it comes from), the lock `<name>.oci.lock` (`toolhost pull`
//! writes it, and the server when it resolves a `source` itself), and
//! `<name>.wasm.sig` (a signature of its bytes, `cosign sign-blob` /
//! `toolhost sign`), `<name>.wasm.sigstore.json` (a Sigstore bundle over
//! its bytes: `cosign sign-blob --bundle`, `sigstore sign`). With a reference (the manifest's, else the lock's):
//!
//! - no lock yet, or one of another reference: the reference is resolved
//!   and pulled, and the lock written;
//! - a lock and no `<name>.wasm`: the locked digest is pulled;
//! - a lock and `<name>.wasm`: the file must be the locked component, by
//!   the chain the lock records (refused otherwise, never overwritten).
//!
//! Then the trust policy of the source judges the signatures (the lock's
//! cosign signatures for a registry source, `<name>.wasm.sig` for a file).

use std::path::Path;

pub use crate::oci::Provenance;
use crate::oci::{Lock, Reference};
use crate::trust::{Evidence, Verdict};

/// The files of an entry that say where its component comes from.
#[derive(Default)]
pub(super) struct Parts {
    pub component: Option<Vec<u8>>,
    pub manifest: Option<String>,
    pub lock: Option<Vec<u8>>,
    pub signature: Option<Vec<u8>>,
    pub bundle: Option<Vec<u8>>,
}

/// The lock file of entry `name`.
pub fn lock_file(dir: &Path, name: &str) -> std::path::PathBuf {
    dir.join(format!("{name}.oci.lock"))
}

/// The blob signature file of entry `name`.
pub fn signature_file(dir: &Path, name: &str) -> std::path::PathBuf {
    dir.join(format!("{name}.wasm.sig"))
}

/// The Sigstore bundle file of entry `name`.
pub fn bundle_file(dir: &Path, name: &str) -> std::path::PathBuf {
    dir.join(format!("{name}.wasm.sigstore.json"))
}

/// The `source` a manifest names, if any (read without the rest of the
/// manifest, which is checked when the component loads).
pub fn manifest_source(text: &str) -> Option<String> {
    let table: toml::Table = text.parse().ok()?;
    table.get("source")?.as_str().map(str::to_owned)
}

/// The component an entry's provenance check lets load.
#[derive(Debug)]
pub(super) struct Checked {
    pub component: Vec<u8>,
    /// Fetched from a registry (not the entry's own `.wasm`).
    pub pulled: bool,
    /// The trust policy's verdict on it.
    pub verdict: Verdict,
}

impl Provenance {
    /// The component of entry `name` (in `dir`), fetched if it must be, and
    /// the trust policy's verdict on it; or why it is refused.
    pub(super) async fn check(
        &self,
        name: &str,
        dir: Option<&Path>,
        parts: Parts,
        report: &(dyn Fn(&'static str) + Sync),
    ) -> Result<Checked, String> {
        let lock = parts
            .lock
            .as_deref()
            .map(|bytes| {
                toml::from_str::<Lock>(&String::from_utf8_lossy(bytes))
                    .map_err(|e| format!("{name}.oci.lock: {e}"))
            })
            .transpose()?;
        let named = parts.manifest.as_deref().and_then(manifest_source);
        let Some(text) = named.or_else(|| lock.as_ref().map(|l| l.reference.clone())) else {
            let component = parts.component.ok_or_else(|| format!("no {name}.wasm"))?;
            let evidence: Vec<Vec<u8>> = parts
                .signature
                .iter()
                .filter_map(|s| blob_signature(s))
                .collect();
            let bundle = parts.bundle.as_deref().map(String::from_utf8_lossy);
            let evidence: Vec<Evidence> = evidence
                .iter()
                .map(|signature| Evidence::Blob {
                    component: &component,
                    signature,
                })
                .chain(bundle.as_deref().map(|bundle| Evidence::Bundle {
                    component: &component,
                    bundle,
                }))
                .collect();
            let verdict = self.trust.judge(&format!("file:{name}"), &evidence)?;
            return Ok(Checked {
                component,
                pulled: false,
                verdict,
            });
        };
        let reference = Reference::parse(&text).map_err(|e| format!("{name}.toml source: {e}"))?;
        let lock = lock.filter(|l| l.reference == text);
        let source = reference.source();
        // The component and the signatures of its manifest, its bytes
        // hashed once: checked against the lock, or checked as pulled.
        let (component, mut lock, signatures, fresh) = match (parts.component, lock) {
            (Some(component), Some(lock)) => {
                let signatures = lock.check(&component).map_err(|e| {
                    format!(
                        "{name}.wasm is not what {name}.oci.lock locks ({e}): remove {name}.wasm \
                         to fetch the locked component, or `toolhost pull --update`"
                    )
                })?;
                (component, lock, signatures, false)
            }
            (_, lock) => {
                report("fetching");
                let client = self.registries.client(&reference, &self.secrets)?;
                let locked = lock.as_ref().map(|l| l.digest.as_str());
                let pulled = crate::oci::pull(&client, &reference, locked).await?;
                let lock = Lock::of(&text, &pulled);
                (pulled.component, lock, pulled.signatures, true)
            }
        };
        let mut judged = self.trust.judge_signed(&source, &lock.digest, &signatures);
        if !fresh && judged.as_ref().map_or(true, |v| v.warning.is_some()) {
            // Signed since it was locked? The registry may say so now.
            if let Some(found) = self.newer_signatures(&reference, &lock).await {
                lock = lock.with_signatures(&found);
                judged = self.trust.judge_signed(&source, &lock.digest, &found);
                if judged.is_ok()
                    && let Some(dir) = dir
                {
                    keep(dir, name, None, &lock);
                }
            }
        }
        let verdict = judged?;
        if fresh && let Some(dir) = dir {
            keep(dir, name, Some(&component), &lock);
        }
        Ok(Checked {
            component,
            pulled: fresh,
            verdict,
        })
    }

    /// The signatures the registry has for `lock`'s digest now, if they
    /// are others than the lock records (none when it cannot be asked).
    async fn newer_signatures(
        &self,
        reference: &Reference,
        lock: &Lock,
    ) -> Option<Vec<crate::oci::Signature>> {
        let client = self.registries.client(reference, &self.secrets).ok()?;
        let found = crate::oci::signatures(&client, reference, &lock.digest)
            .await
            .inspect_err(|e| tracing::warn!("signatures of {}: {e}", lock.reference))
            .ok()?;
        (lock.with_signatures(&found) != *lock).then_some(found)
    }
}

/// A `cosign sign-blob` signature file: base64 of the DER signature.
fn blob_signature(text: &[u8]) -> Option<Vec<u8>> {
    crate::trust::keys::base64_decode(&String::from_utf8_lossy(text)).ok()
}

/// Write what was pulled into the plugins directory (aside, then renamed;
/// the lock first, so a component is never seen without its lock), so the
/// next start needs no registry; a directory the server cannot write (a
/// read-only volume) only costs a pull per start.
fn keep(dir: &Path, name: &str, component: Option<&[u8]>, lock: &Lock) {
    let write = || -> std::io::Result<()> {
        let part = dir.join(format!(".{name}.oci.lock.part"));
        std::fs::write(&part, lock.text())?;
        std::fs::rename(&part, lock_file(dir, name))?;
        if let Some(component) = component {
            let part = dir.join(format!(".{name}.wasm.part"));
            std::fs::write(&part, component)?;
            std::fs::rename(&part, dir.join(format!("{name}.wasm")))?;
        }
        Ok(())
    };
    if let Err(e) = write() {
        tracing::warn!(plugin = name, "the pulled component was not kept: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::{Identity, Policy, Trust, TrustConfig};

    fn fixtures() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/sigstore")
    }

    /// A `file:` entry with a Sigstore bundle beside it (a conformance case's
    /// artifact standing in for a component: the check comes before the
    /// compile) is judged by the bundle; a `.sig` of other bytes is not.
    #[tokio::test]
    async fn a_files_bundle_or_signature_is_judged_by_the_policy() {
        let case = fixtures().join("bundle-verify/happy-path-v0.3-new-mediaType");
        let identity = Identity {
            subject: "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main".into(),
            issuer: "https://token.actions.githubusercontent.com".into(),
        };
        let trust = Trust::from_config(&TrustConfig {
            policy: Policy::Require,
            identities: vec![identity.clone()],
            trusted_root: Some(fixtures().join("trusted_root.production.json")),
            ..Default::default()
        })
        .unwrap();
        let provenance = Provenance {
            trust,
            ..Default::default()
        };
        let artifact = std::fs::read(fixtures().join("a.txt")).unwrap();
        let bundle = std::fs::read(case.join("bundle.sigstore.json")).unwrap();
        let parts = |bundle: Option<Vec<u8>>, signature: Option<Vec<u8>>| Parts {
            component: Some(artifact.clone()),
            bundle,
            signature,
            ..Default::default()
        };
        let Checked {
            component,
            pulled,
            verdict,
        } = provenance
            .check("a", None, parts(Some(bundle), None), &|_| {})
            .await
            .unwrap();
        assert_eq!(component, artifact);
        assert!(!pulled);
        assert_eq!(verdict.source, "file:a");
        assert_eq!(
            verdict.signed_by,
            vec![format!("{} ({})", identity.subject, identity.issuer)]
        );
        let unsigned = provenance
            .check("a", None, parts(None, None), &|_| {})
            .await
            .unwrap_err();
        assert!(unsigned.contains("not signed"), "{unsigned}");
        let junk = provenance
            .check(
                "a",
                None,
                parts(None, Some(b"bm90IGEgc2lnbmF0dXJl".to_vec())),
                &|_| {},
            )
            .await
            .unwrap_err();
        assert!(junk.contains("no trusted key verifies"), "{junk}");
    }
}
