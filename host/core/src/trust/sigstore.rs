//! Sigstore bundles (`*.sigstore.json`, versions 0.1 to 0.3: what `cosign
//! sign-blob --bundle` and `sigstore sign` write), verified offline against
//! a pinned trusted root: the certificate chain to Fulcio at the logged
//! time, its SCT, the transparency-log entry (SET, inclusion proof,
//! checkpoint), the signature over the artifact, and the signer's identity
//! (certificate SAN and OIDC issuer, matched exactly). Key-based bundles
//! (a public-key hint instead of a certificate) verify against the policy's
//! keys. The verifier is sigstore-rust's `sigstore-verify`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sigstore_trust_root::TrustedRoot;
use sigstore_types::{Bundle, DerPublicKey};
use sigstore_verify::{PublicKeyVerificationPolicy, VerificationPolicy, Verifier};

use super::PublicKey;

/// A signer a keyless bundle may name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// The certificate's subject alternative name, exactly (an e-mail, or a
    /// workflow URI: `https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main`).
    pub subject: String,
    /// The OIDC issuer that vouched for it
    /// (`https://token.actions.githubusercontent.com`).
    pub issuer: String,
}

/// A trusted root and the verifier made from it.
pub struct Root {
    verifier: Verifier,
}

impl Root {
    /// The root in `path` (a `trusted_root.json`), or the Sigstore
    /// public-good root embedded in this build when none is given.
    pub fn load(path: Option<&Path>) -> Result<Root, String> {
        let root = match path {
            Some(p) => TrustedRoot::from_file(p).map_err(|e| format!("{}: {e}", p.display()))?,
            None => TrustedRoot::from_json(sigstore_trust_root::SIGSTORE_PRODUCTION_TRUSTED_ROOT)
                .map_err(|e| format!("the embedded Sigstore root: {e}"))?,
        };
        let verifier = Verifier::new(&root).map_err(|e| format!("the trusted root: {e}"))?;
        Ok(Root { verifier })
    }

    /// Who signed `artifact`, if `bundle` (JSON) proves one of `identities`
    /// or `keys` did: `subject (issuer)`, or the key's id; else why not.
    pub fn verify(
        &self,
        artifact: &[u8],
        bundle: &str,
        identities: &[Identity],
        keys: &[PublicKey],
    ) -> Result<String, String> {
        let bundle =
            Bundle::from_json(bundle).map_err(|e| format!("not a Sigstore bundle: {e}"))?;
        let mut last = None;
        for key in keys {
            let der = DerPublicKey::from_pem(&key.pem()).map_err(|e| e.to_string())?;
            match self
                .verifier
                .verify(artifact, &bundle, &PublicKeyVerificationPolicy::new(der))
            {
                Ok(_) => return Ok(key.id.clone()),
                Err(e) => last = Some(e.to_string()),
            }
        }
        for who in identities {
            let policy = VerificationPolicy::new(who.subject.as_str(), who.issuer.clone());
            match self.verifier.verify(artifact, &bundle, &policy) {
                Ok(_) => return Ok(format!("{} ({})", who.subject, who.issuer)),
                Err(e) => last = Some(e.to_string()),
            }
        }
        Err(match last {
            Some(e) => format!("a Sigstore bundle that does not verify: {e}"),
            None => "a Sigstore bundle, and no identity or key to check it against".into(),
        })
    }
}
