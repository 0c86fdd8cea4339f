//! Components from an OCI registry (`toolhost pull`, #38 item 1) against
//! real parts: Debian's `docker-registry` (the CNCF distribution registry)
//! on a loopback port and components pushed to it by ORAS in the CNCF wasm
//! layout. The digest a tag resolves to is locked; a moved tag changes
//! nothing until `--update`; a registry serving other bytes than the lock's
//! digest, or a layer other than the manifest's, is refused and the
//! component in place is kept.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use toolhost_e2e::registry::{Registry, oras_push};
use toolhost_e2e::*;

fn registry() -> Option<Registry> {
    Registry::start(false)
}

fn push(target: &str, component: &Path) {
    oras_push(target, component)
}

/// `toolhost pull` with `args`: (ok, stdout + stderr).
fn pull(args: &[&str], plugins: &Path) -> (bool, String) {
    let plugins = plugins.to_str().unwrap();
    run_toolhost(&[&["pull"], args, &["--plugins", plugins]].concat(), &[])
}

fn wasm(name: &str) -> PathBuf {
    component(name).0
}

/// A registry that answers every manifest request with `manifest` and
/// every blob request with `blob` (a registry gone bad), until the test ends.
fn bad_registry(manifest: Vec<u8>, blob: Vec<u8>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut buf = [0u8; 8192];
            let n = conn.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]);
            let (body, kind) = if head.contains("/manifests/") {
                (&manifest, "application/vnd.oci.image.manifest.v1+json")
            } else {
                (&blob, "application/octet-stream")
            };
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(body);
        }
    });
    port
}

#[test]
fn components_are_pulled_by_a_locked_digest() {
    let Some(reg) = registry() else { return };
    let target = format!("127.0.0.1:{}/tools/calc:1.0", reg.port);
    let reference = format!("oci://{target}");
    push(&target, &wasm("calc"));

    let plugins = tempfile::tempdir().unwrap();
    let (ok, out) = pull(&[&reference], plugins.path());
    assert!(ok, "{out}");
    let calc = std::fs::read(wasm("calc")).unwrap();
    assert_eq!(
        std::fs::read(plugins.path().join("calc.wasm")).unwrap(),
        calc
    );
    let lock = std::fs::read_to_string(plugins.path().join("calc.oci.lock")).unwrap();
    assert!(
        lock.contains(&reference) && lock.contains("digest = \"sha256:"),
        "{lock}"
    );

    // Served, with the lock file beside the component (it is no plugin).
    let dir = PluginsDir::new();
    for f in ["calc.wasm", "calc.oci.lock"] {
        std::fs::copy(plugins.path().join(f), dir.path().join(f)).unwrap();
    }
    if let Some(toml) = component("calc").1 {
        std::fs::copy(toml, dir.path().join("calc.toml")).unwrap();
    }
    let s = Server::start(dir);
    let (status, body) = s.invoke("calc_evaluate", json!({"expression": "6*7"}));
    assert_eq!(status, 200, "{body}");
    let listed = s.get("/plugins").1["plugins"].as_array().unwrap().len();
    assert_eq!(listed, 1);
    drop(s);

    // The tag moves to another component: the lock holds.
    push(&target, &wasm("checksum"));
    let (ok, out) = pull(&[&reference], plugins.path());
    assert!(ok, "{out}");
    assert_eq!(
        std::fs::read(plugins.path().join("calc.wasm")).unwrap(),
        calc
    );
    // Until updated on purpose.
    let (ok, out) = pull(&[&reference, "--update"], plugins.path());
    assert!(ok, "{out}");
    let checksum = std::fs::read(wasm("checksum")).unwrap();
    assert_eq!(
        std::fs::read(plugins.path().join("calc.wasm")).unwrap(),
        checksum
    );
    // Another reference under the same name needs --update too.
    let other = format!("oci://127.0.0.1:{}/tools/x:1", reg.port);
    let (ok, out) = pull(&[&other, "--name", "calc"], plugins.path());
    assert!(!ok && out.contains("--update"), "{out}");

    // A registry gone bad, under a lock naming the real manifest: other
    // manifest bytes, then the right manifest with other layer bytes.
    let real = lock
        .lines()
        .find_map(|l| l.strip_prefix("digest = \""))
        .unwrap()
        .trim_end_matches('"')
        .to_owned();
    let manifest_bytes = Command::new("curl")
        .args([
            "-s",
            "-H",
            "Accept: application/vnd.oci.image.manifest.v1+json",
        ])
        .arg(format!(
            "http://127.0.0.1:{}/v2/tools/calc/manifests/{real}",
            reg.port
        ))
        .output()
        .unwrap()
        .stdout;
    for (manifest, blob, says) in [
        (
            [manifest_bytes.clone(), b" ".to_vec()].concat(),
            calc.clone(),
            "not the",
        ),
        (
            manifest_bytes.clone(),
            checksum.clone(),
            "not the manifest's",
        ),
    ] {
        let port = bad_registry(manifest, blob);
        let bad = tempfile::tempdir().unwrap();
        let reference = format!("oci://127.0.0.1:{port}/tools/calc:1.0");
        std::fs::write(bad.path().join("calc.wasm"), b"kept").unwrap();
        std::fs::write(
            bad.path().join("calc.oci.lock"),
            format!("reference = \"{reference}\"\ndigest = \"{real}\"\ncomponent = \"{real}\"\n"),
        )
        .unwrap();
        let (ok, out) = pull(&[&reference], bad.path());
        assert!(!ok && out.contains(says), "{out}");
        assert_eq!(
            std::fs::read(bad.path().join("calc.wasm")).unwrap(),
            b"kept"
        );
    }
}
