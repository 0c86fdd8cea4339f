//! Container images judged by the trust policy before a node starts (#38
//! item 3): the node image pushed to Debian's `docker-registry` on a
//! loopback port by the Docker engine itself, signed there by `toolhost
//! sign` (cosign's format), and a Docker toolkit naming it by digest served
//! under a `require` policy; named by tag, or signed by a key the policy
//! does not trust, refused with the reason and no node started (a stdio MCP
//! server's image too).

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::registry::Registry;
use toolhost_e2e::*;

fn toolhost(args: &[&str]) -> String {
    let (ok, text) = run_toolhost(args, &[]);
    assert!(ok, "toolhost {args:?}: {text}");
    text
}

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The shell toolkit with `image` as its image.
fn shell(image: &str) -> PluginsDir {
    let image = image.to_owned();
    PluginsDir::new().add_toolkit_with("shell", move |t| {
        t.replace(
            "image = \"toolhost-node:latest\"",
            &format!("image = \"{image}\""),
        )
    })
}

fn state(s: &Server) -> Value {
    let mut last = Value::Null;
    wait_for(Duration::from_secs(30), || {
        last = s.plugin("shell")?;
        (last["state"] != "compiling").then_some(())
    });
    last
}

#[test]
fn a_toolkits_image_is_checked_before_its_nodes_start() {
    if !require_docker() {
        return;
    }
    let Some(reg) = Registry::start(false) else {
        return;
    };
    let tag = format!("127.0.0.1:{}/toolhost-node:trust-test", reg.port);
    docker(&["tag", "toolhost-node:latest", &tag]);
    docker(&["push", "-q", &tag]);
    let repo_digest = docker(&[
        "inspect",
        "--format",
        "{{range .RepoDigests}}{{println .}}{{end}}",
        &tag,
    ])
    .lines()
    .find(|l| l.starts_with(&format!("127.0.0.1:{}/", reg.port)))
    .unwrap()
    .to_owned();
    let keys = tempfile::tempdir().unwrap();
    for name in ["acme", "other"] {
        toolhost(&["keygen", keys.path().join(name).to_str().unwrap()]);
    }
    let signed = toolhost(&[
        "sign",
        "--key",
        keys.path().join("acme.key").to_str().unwrap(),
        &format!("oci://{tag}"),
    ]);
    let digest = repo_digest.split_once('@').unwrap().1;
    assert!(signed.contains(digest), "{signed}");
    let config = |key: &str| {
        format!(
            "[[trust.sources]]\nprefix = \"oci://127.0.0.1:{}/\"\npolicy = \"require\"\nkeys = [{:?}]\n",
            reg.port,
            keys.path().join(format!("{key}.pub"))
        )
    };

    // By digest, signed by the trusted key: served, and a call starts a
    // node from exactly that image.
    let s = Server::start_with(shell(&repo_digest), Some(&config("acme"))).unwrap();
    let p = state(&s);
    assert_eq!(p["state"], "ready", "{p:#}\n{}", s.log());
    assert_eq!(p["provenance"]["trust"]["policy"], "require", "{p:#}");
    assert_eq!(
        p["provenance"]["trust"]["signed_by"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let (status, body) = s.invoke("shell_run", json!({"command": "echo from-a-signed-image"}));
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("from-a-signed-image"), "{body}");
    drop(s);

    // By tag: refused, no node.
    let s = Server::start_with(shell(&tag), Some(&config("acme"))).unwrap();
    let p = state(&s);
    assert_eq!(p["state"], "failed", "{p:#}");
    assert!(
        p["error"]
            .as_str()
            .unwrap()
            .contains("not referenced by digest"),
        "{p:#}"
    );
    assert_eq!(s.invoke("shell_run", json!({"command": "true"})).0, 404);
    assert!(s.containers().is_empty());
    drop(s);

    // Signed, but not by a key this policy trusts: refused.
    let s = Server::start_with(shell(&repo_digest), Some(&config("other"))).unwrap();
    let p = state(&s);
    assert_eq!(p["state"], "failed", "{p:#}");
    assert!(
        p["error"]
            .as_str()
            .unwrap()
            .contains("no trusted key verifies"),
        "{p:#}"
    );
    assert!(s.containers().is_empty());
    drop(s);
    let _ = Command::new("docker").args(["rmi", &tag]).output();
}
