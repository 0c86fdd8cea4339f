//! Sigstore bundles side by side with the reference client: every case of
//! Sigstore's conformance bundles (`tests/fixtures/sigstore`) checked by
//! `toolhost verify` (the server's trust policy, as a command) and by
//! sigstore-python's own verifier, offline against the same trusted roots.
//! toolhost must give the suite's verdict on every case; sigstore-python
//! must agree with it wherever it can verify the case at all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use toolhost_e2e::*;

const IDENTITY: &str = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
const ISSUER: &str = "https://token.actions.githubusercontent.com";

/// Cases sigstore-python 4.5.1 gets wrong, as upstream's conformance
/// workflow lists them for it (checked still wrong, so the list stays true).
const PYTHON_KNOWN_WRONG: &[&str] = &["intoto-with-custom-trust-root"];

fn fixtures() -> PathBuf {
    repo_root().join("tests/fixtures/sigstore")
}

fn toolhost_verdict(case: &Path) -> (bool, String) {
    let read = |f: &str| {
        std::fs::read_to_string(case.join(f))
            .ok()
            .map(|t| t.trim().to_owned())
    };
    let mut cmd = Command::new(binary());
    cmd.arg("verify").env("RUST_BACKTRACE", "0");
    let artifact = case.join("artifact");
    cmd.arg(if artifact.is_file() {
        artifact
    } else {
        fixtures().join("a.txt")
    });
    cmd.arg("--bundle").arg(case.join("bundle.sigstore.json"));
    let root = case.join("trusted_root.json");
    cmd.arg("--trusted-root").arg(if root.is_file() {
        root
    } else {
        fixtures().join("trusted_root.production.json")
    });
    if case.join("key.pub").is_file() {
        cmd.arg("--key").arg(case.join("key.pub"));
    } else {
        cmd.arg("--certificate-identity")
            .arg(read("identity").unwrap_or_else(|| IDENTITY.into()))
            .arg("--certificate-oidc-issuer")
            .arg(read("issuer").unwrap_or_else(|| ISSUER.into()));
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn bundles_get_the_suites_verdict_and_the_reference_clients() {
    let python = python_venv("tests/sigstore/requirements.txt");
    let (ok, out) = run_python(
        &python,
        "tests/sigstore/verify.py",
        &[fixtures().as_os_str()],
    );
    assert!(ok, "sigstore-python: {out}");
    let theirs: BTreeMap<String, String> =
        serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures().join("bundle-verify"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    let mut wrong = Vec::new();
    let mut compared = 0;
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let expected = !name.ends_with("_fail");
        let (ours, said) = toolhost_verdict(case);
        if ours != expected {
            wrong.push(format!("toolhost on {name}: {said}"));
        }
        if ours {
            assert!(said.starts_with("OK: "), "{name}: {said}");
        }
        let their = theirs.get(&name).map(String::as_str).unwrap_or("missing");
        if their.starts_with("unsupported") {
            continue;
        }
        compared += 1;
        let agrees = (their == "ok") == ours;
        let known = PYTHON_KNOWN_WRONG.contains(&name.as_str());
        if agrees == known {
            wrong.push(format!(
                "sigstore-python on {name}: {their} (toolhost: {ours}; known wrong: {known})"
            ));
        }
    }
    assert!(compared >= 14, "only {compared} cases compared");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
