//! The server image (`deploy/image/build.sh`, `make image`): built from this
//! build's binary and plugins on a Debian rootfs with no registry, it runs as
//! its own unprivileged user, serves its plugins from the precompiled entries
//! made at build time (nothing compiled at start) and answers calls; reached
//! inside its own network namespace (`nsenter -n`), never over a bridge.

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::*;

fn docker(args: &[&str]) -> (bool, String) {
    let out = Command::new("docker").args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
            + &String::from_utf8_lossy(&out.stderr),
    )
}

/// `curl` inside the network namespace of process `pid`: status, body.
fn curl_in(pid: &str, args: &[&str]) -> (u16, Value) {
    let out = Command::new("nsenter")
        .args([
            "-t",
            pid,
            "-n",
            "curl",
            "-s",
            "-m",
            "10",
            "-w",
            "\n%{http_code}",
        ])
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (
        code.trim().parse().unwrap_or(0),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// Removes the container and the image, on failure too.
struct Cleanup(String, String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        docker(&["rm", "-f", &self.0]);
        docker(&["rmi", "-f", &self.1]);
    }
}

#[test]
fn the_server_image_runs_unprivileged_and_serves_its_precompiled_plugins() {
    if !require_docker() {
        return;
    }
    let plugins = PluginsDir::new().add("calc", "calc");
    let tag = format!("toolhost-server-test:{}", std::process::id());
    let name = format!("toolhost-server-test-{}", std::process::id());
    let _cleanup = Cleanup(name.clone(), tag.clone());
    let built = Command::new(repo_root().join("deploy/image/build.sh"))
        .arg(binary())
        .arg(plugins.path())
        .arg(&tag)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "deploy/image/build.sh: {}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    let (ok, out) = docker(&[
        "run",
        "-d",
        "--network",
        "none",
        "--name",
        &name,
        "-e",
        "TOOLHOST_TOKEN=caller-caller-caller",
        &tag,
    ]);
    assert!(ok, "docker run: {out}");
    let (_, pid) = docker(&["inspect", "-f", "{{.State.Pid}}", &name]);
    let up = wait_for(Duration::from_secs(60), || {
        (curl_in(&pid, &["http://127.0.0.1:8001/health"]).0 == 200).then_some(())
    });
    assert!(up.is_some(), "not serving: {}", docker(&["logs", &name]).1);
    let (_, uid) = docker(&["exec", &name, "id", "-u"]);
    assert_eq!(uid, "10001", "the server runs as its own user");
    let auth = "authorization: Bearer caller-caller-caller";
    let (status, plugins) = curl_in(&pid, &["-H", auth, "http://127.0.0.1:8001/plugins"]);
    assert_eq!(status, 200, "{plugins}");
    let calc = plugins["plugins"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "calc"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(calc["state"], "ready", "{plugins}");
    assert_eq!(calc["source"], "cache", "precompiled in the image: {calc}");
    let body = json!({"params": {"expression": "6*7"}}).to_string();
    let (status, answer) = curl_in(
        &pid,
        &[
            "-H",
            auth,
            "-H",
            "content-type: application/json",
            "-d",
            &body,
            "http://127.0.0.1:8001/tools/calc_evaluate/invoke",
        ],
    );
    assert_eq!(status, 200, "{answer}");
    assert!(answer.to_string().contains("42"), "{answer}");
}
