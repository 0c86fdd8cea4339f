//! ECDSA P-256 keys as cosign uses them: a signature is ASN.1 DER over
//! SHA-256 of the message, public keys are PEM `PUBLIC KEY`
//! (SubjectPublicKeyInfo, what `cosign generate-key-pair` writes to
//! `cosign.pub` and `openssl ec -pubout` prints), private keys unencrypted
//! PKCS#8 PEM `PRIVATE KEY` (what `toolhost keygen` and `openssl genpkey`
//! write). Cosign's own password-encrypted private keys are not read: sign
//! with cosign itself, or with a PKCS#8 key.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair,
    UnparsedPublicKey,
};
use sha2::{Digest, Sha256};

/// SubjectPublicKeyInfo of a P-256 key up to its point: SEQUENCE {
/// SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING (65 bytes) }.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// A public key signatures are checked against.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// The uncompressed point (65 bytes, `04 || x || y`).
    point: Vec<u8>,
    /// `sha256:` and the hex SHA-256 of the SubjectPublicKeyInfo: how
    /// `GET /plugins` names the key a component is signed with.
    pub id: String,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.id)
    }
}

impl PublicKey {
    /// A PEM `PUBLIC KEY` of a P-256 key.
    pub fn from_pem(text: &str) -> Result<PublicKey, String> {
        let der = pem_decode(text, "PUBLIC KEY")?;
        Self::from_spki(&der)
    }

    fn from_spki(der: &[u8]) -> Result<PublicKey, String> {
        let point = der
            .strip_prefix(&P256_SPKI_PREFIX[..])
            .filter(|p| p.len() == 65 && p[0] == 4)
            .ok_or("not an ECDSA P-256 public key (the only kind cosign keys are)")?;
        Ok(PublicKey {
            point: point.to_vec(),
            id: format!("sha256:{}", crate::text::hex(&Sha256::digest(der))),
        })
    }

    /// Whether `signature` (ASN.1 DER) signs `message` under this key.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(message, signature)
            .is_ok()
    }

    pub fn pem(&self) -> String {
        let mut der = P256_SPKI_PREFIX.to_vec();
        der.extend_from_slice(&self.point);
        pem_encode("PUBLIC KEY", &der)
    }
}

/// A private key to sign with.
pub struct SigningKey {
    pair: EcdsaKeyPair,
}

impl SigningKey {
    /// A PEM `PRIVATE KEY` (PKCS#8) of a P-256 key.
    pub fn from_pem(text: &str) -> Result<SigningKey, String> {
        if text.contains("ENCRYPTED SIGSTORE PRIVATE KEY") || text.contains("ENCRYPTED COSIGN") {
            return Err(
                "a cosign password-encrypted key: sign with cosign, or use an \
                        unencrypted PKCS#8 key (`toolhost keygen`)"
                    .into(),
            );
        }
        if text.contains("BEGIN EC PRIVATE KEY") {
            return Err("a SEC1 `EC PRIVATE KEY`: convert it to PKCS#8 with \
                        `openssl pkcs8 -topk8 -nocrypt`"
                .into());
        }
        let der = pem_decode(text, "PRIVATE KEY")?;
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &der, &SystemRandom::new())
                .map_err(|e| format!("not an ECDSA P-256 PKCS#8 key: {e}"))?;
        Ok(SigningKey { pair })
    }

    /// A new key, as PEM.
    pub fn generate() -> Result<String, String> {
        let doc =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &SystemRandom::new())
                .map_err(|_| "no randomness to make a key with".to_owned())?;
        Ok(pem_encode("PRIVATE KEY", doc.as_ref()))
    }

    /// The ASN.1 DER signature of `message`.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, String> {
        self.pair
            .sign(&SystemRandom::new(), message)
            .map(|s| s.as_ref().to_vec())
            .map_err(|_| "signing failed".to_owned())
    }

    pub fn public(&self) -> PublicKey {
        let mut der = P256_SPKI_PREFIX.to_vec();
        der.extend_from_slice(self.pair.public_key().as_ref());
        PublicKey::from_spki(&der).expect("a P-256 key's own point")
    }
}

/// Base64 (standard, padded): how cosign writes signatures.
pub fn base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// The bytes of base64 `text` (whitespace ignored): a cosign signature.
pub fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let text: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    STANDARD
        .decode(text)
        .map_err(|e| format!("not base64: {e}"))
}

/// The DER inside the one PEM block labelled `label` of `text`.
pub fn pem_decode(text: &str, label: &str) -> Result<Vec<u8>, String> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text
        .find(&begin)
        .ok_or_else(|| format!("no PEM `{label}` block"))?
        + begin.len();
    let stop = text[start..]
        .find(&end)
        .ok_or_else(|| format!("the PEM `{label}` block does not end"))?
        + start;
    let body: String = text[start..stop]
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    STANDARD
        .decode(body)
        .map_err(|e| format!("the PEM `{label}` block is not base64: {e}"))
}

pub fn pem_encode(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_signs_what_its_public_key_verifies() {
        let key = SigningKey::from_pem(&SigningKey::generate().unwrap()).unwrap();
        let public = PublicKey::from_pem(&key.public().pem()).unwrap();
        assert_eq!(public, key.public());
        let sig = key.sign(b"component bytes").unwrap();
        assert!(public.verifies(b"component bytes", &sig));
        assert!(!public.verifies(b"component bytez", &sig));
        let other = SigningKey::from_pem(&SigningKey::generate().unwrap()).unwrap();
        assert!(!other.public().verifies(b"component bytes", &sig));
        assert_ne!(other.public().id, public.id);
    }

    #[test]
    fn an_openssl_key_reads() {
        // `openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8
        // -topk8 -nocrypt`, and its `openssl ec -pubout`.
        let private = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgWW7ePjjfJ8NsbBBQ
wsXmey/jD5o/L9t763NUCloDBwihRANCAARypletVFL9F+SHBxijTNh0kJ+gudUA
5bMmDmUez3V36zttoXefsLwILkDggpOuKvVgq5cbLNg3iGGikc/1+o5E
-----END PRIVATE KEY-----
";
        let public = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEcqZXrVRS/RfkhwcYo0zYdJCfoLnV
AOWzJg5lHs91d+s7baF3n7C8CC5A4IKTrir1YKuXGyzYN4hhopHP9fqORA==
-----END PUBLIC KEY-----
";
        let key = SigningKey::from_pem(private).unwrap();
        let public = PublicKey::from_pem(public).unwrap();
        assert_eq!(key.public(), public);
        // `openssl dgst -sha256 -sign` (what `cosign sign-blob` makes, base64).
        let sig = STANDARD
            .decode("MEUCIFHJHuL4JYDZGMPRtH5/ioNlIg0m6O3+wE5ugnCJrE/RAiEAgGnrJRixg6LGnXpzVFUKkalaTnR7fX91RAhZRVdxnQE=")
            .unwrap();
        assert!(public.verifies(b"component bytes", &sig));
        assert!(!public.verifies(b"component bytes!", &sig));
    }

    #[test]
    fn other_keys_are_refused_with_the_reason() {
        let rsa = pem_encode("PUBLIC KEY", &[0x30, 0x82, 0x01, 0x22, 0x30, 0x0d]);
        assert!(PublicKey::from_pem(&rsa).unwrap_err().contains("P-256"));
        assert!(
            PublicKey::from_pem("nothing")
                .unwrap_err()
                .contains("no PEM")
        );
        let sec1 = "-----BEGIN EC PRIVATE KEY-----\nAA==\n-----END EC PRIVATE KEY-----\n";
        assert!(SigningKey::from_pem(sec1).err().unwrap().contains("PKCS#8"));
        let cosign = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAA==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
        assert!(
            SigningKey::from_pem(cosign)
                .err()
                .unwrap()
                .contains("cosign")
        );
    }
}
