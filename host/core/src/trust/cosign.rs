//! Cosign's image signatures ("simple signing"): the signed payload names
//! the manifest digest it vouches for, and the signature artifact is an OCI
//! manifest tagged `sha256-<hex>.sig` in the signed repository, one layer
//! per signature: the payload as the blob, the base64 signature in the
//! layer's `dev.cosignproject.cosign/signature` annotation.

use serde::{Deserialize, Serialize};

pub const PAYLOAD_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
const KIND: &str = "cosign container image signature";

#[derive(Serialize, Deserialize)]
struct Payload {
    critical: Critical,
    optional: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
struct Critical {
    identity: Identity,
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Serialize, Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Serialize, Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// The payload cosign signs for manifest `digest` of `repository`
/// (`host/repo`), in cosign's field order.
pub fn payload(repository: &str, digest: &str) -> Vec<u8> {
    serde_json::to_vec(&Payload {
        critical: Critical {
            identity: Identity {
                docker_reference: repository.to_owned(),
            },
            image: Image {
                docker_manifest_digest: digest.to_owned(),
            },
            kind: KIND.to_owned(),
        },
        optional: None,
    })
    .unwrap_or_default()
}

/// The manifest digest `payload` vouches for, if it is a cosign payload.
pub fn signed_digest(payload: &[u8]) -> Result<String, String> {
    let p: Payload = serde_json::from_slice(payload)
        .map_err(|e| format!("not a cosign signature payload: {e}"))?;
    if p.critical.kind != KIND {
        return Err(format!(
            "a payload of type `{}`, not `{KIND}`",
            p.critical.kind
        ));
    }
    Ok(p.critical.image.docker_manifest_digest)
}

/// The tag of manifest `digest`'s signatures.
pub fn signature_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1) + ".sig"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_name_the_digest_as_cosign_writes_them() {
        let d = format!("sha256:{}", "a".repeat(64));
        let p = payload("127.0.0.1:5000/tools/calc", &d);
        assert_eq!(
            String::from_utf8(p.clone()).unwrap(),
            format!(
                "{{\"critical\":{{\"identity\":{{\"docker-reference\":\"127.0.0.1:5000/tools/calc\"}},\
                 \"image\":{{\"docker-manifest-digest\":\"{d}\"}},\"type\":\"cosign container image signature\"}},\
                 \"optional\":null}}"
            )
        );
        assert_eq!(signed_digest(&p).unwrap(), d);
        assert!(signed_digest(b"{}").is_err());
        let other = String::from_utf8(p)
            .unwrap()
            .replace("cosign container", "other");
        assert!(
            signed_digest(other.as_bytes())
                .unwrap_err()
                .contains("type")
        );
        assert_eq!(signature_tag(&d), format!("sha256-{}.sig", "a".repeat(64)));
    }
}
