//! Sigstore's published conformance bundles (`tests/fixtures/sigstore`: real
//! Fulcio certificates, Rekor entries, checkpoints and timestamps) judged by
//! the trust policy offline, each case's verdict the suite's: a case named
//! `*_fail` refused, every other accepted, under a `require` policy naming
//! the case's identity (or key) and trusted root.

use std::path::{Path, PathBuf};

use toolhost::trust::{Evidence, Identity, Policy, Trust, TrustConfig};

const IDENTITY: &str = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
const ISSUER: &str = "https://token.actions.githubusercontent.com";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/sigstore")
}

fn read(case: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(case.join(file))
        .ok()
        .map(|t| t.trim().to_owned())
}

/// The policy a case asks for, and its artifact.
fn case(dir: &Path) -> (TrustConfig, Vec<u8>) {
    let key = dir.join("key.pub");
    let root = dir.join("trusted_root.json");
    let config = TrustConfig {
        policy: Policy::Require,
        keys: if key.is_file() {
            vec![key.clone()]
        } else {
            Vec::new()
        },
        identities: if key.is_file() {
            Vec::new()
        } else {
            vec![Identity {
                subject: read(dir, "identity").unwrap_or_else(|| IDENTITY.into()),
                issuer: read(dir, "issuer").unwrap_or_else(|| ISSUER.into()),
            }]
        },
        trusted_root: Some(if root.is_file() {
            root
        } else {
            fixtures().join("trusted_root.production.json")
        }),
        sources: Vec::new(),
    };
    let artifact = std::fs::read(dir.join("artifact"))
        .unwrap_or_else(|_| std::fs::read(fixtures().join("a.txt")).unwrap());
    (config, artifact)
}

#[test]
fn every_conformance_case_gets_the_suites_verdict() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures().join("bundle-verify"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 17, "{} cases", cases.len());
    let mut wrong = Vec::new();
    for dir in &cases {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let (config, artifact) = case(dir);
        let trust = Trust::from_config(&config).unwrap();
        let bundle = std::fs::read_to_string(dir.join("bundle.sigstore.json")).unwrap();
        let verdict = trust.judge(
            "file:case",
            &[Evidence::Bundle {
                component: &artifact,
                bundle: &bundle,
            }],
        );
        let expected = !name.ends_with("_fail");
        match &verdict {
            Ok(v) => assert!(!v.signed_by.is_empty(), "{name}: {v:?}"),
            Err(e) => assert!(e.contains("file:case"), "{name}: {e}"),
        }
        if verdict.is_ok() != expected {
            wrong.push(format!("{name}: {verdict:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "verdicts unlike the suite's:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_happy_bundle_proves_nothing_for_other_bytes_or_another_policy() {
    let dir = fixtures().join("bundle-verify/happy-path-v0.3-new-mediaType");
    let (config, artifact) = case(&dir);
    let bundle = std::fs::read_to_string(dir.join("bundle.sigstore.json")).unwrap();
    let trust = Trust::from_config(&config).unwrap();
    let judge = |trust: &Trust, bytes: &[u8]| {
        trust.judge(
            "file:x",
            &[Evidence::Bundle {
                component: bytes,
                bundle: &bundle,
            }],
        )
    };
    let v = judge(&trust, &artifact).unwrap();
    assert_eq!(v.signed_by, vec![format!("{IDENTITY} ({ISSUER})")]);
    let mut other = artifact.clone();
    other[0] ^= 1;
    assert!(
        judge(&trust, &other)
            .unwrap_err()
            .contains("does not verify")
    );
    // Against the embedded public-good root (what a config without
    // `trusted_root` uses) the same bundle verifies too.
    let embedded = Trust::from_config(&TrustConfig {
        trusted_root: None,
        ..config.clone()
    })
    .unwrap();
    assert!(judge(&embedded, &artifact).is_ok());
    // A policy trusting only keys does not accept a keyless bundle.
    let keys_only = TrustConfig {
        identities: Vec::new(),
        keys: vec![fixtures().join("bundle-verify/managed-key-happy-path/key.pub")],
        ..config
    };
    let refused = judge(&Trust::from_config(&keys_only).unwrap(), &artifact).unwrap_err();
    assert!(refused.contains("does not verify"), "{refused}");
    // Not a bundle at all.
    let junk = Trust::from_config(&TrustConfig::default()).unwrap();
    assert!(judge(&junk, &artifact).is_ok(), "policy off: not looked at");
}
