//! The Docker daemon stopped and started again under a running server: heavy
//! tools answer `backend_unavailable` while it is down and recover, on a fresh
//! node, when it is back. Its own test binary, so no other test shares the
//! daemon's outage, and run with no other binary beside it (`lanes: alone`,
//! tests/lanes.py).

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use toolhost_e2e::{
    PluginsDir, Server, docker_available, kind, repo_root, require_docker, wait_for,
};

#[test]
fn heavy_tools_recover_when_the_daemon_comes_back() {
    if !require_docker() {
        return;
    }
    let s = Server::start(
        PluginsDir::new()
            .add("calc", "calc")
            .add_toolkit_with("shell", |m| {
                m.replace("scheduling = \"hot\"", "scheduling = \"cold\"")
            }),
    );
    let (status, body) = s.invoke_in("d", "shell_run", json!({"command": "export A=1; echo up"}));
    assert_eq!(status, 200, "{body}");

    // Stop the daemon (its containers stop with it).
    let stopped = Command::new("pkill")
        .args(["-TERM", "-x", "dockerd"])
        .status()
        .unwrap();
    assert!(stopped.success(), "no dockerd to stop");
    // Wait for the process to be gone, not just the API: dockerd stops its
    // containers on the way out.
    let gone = || {
        let running = Command::new("pgrep")
            .args(["-x", "dockerd"])
            .output()
            .unwrap();
        (!docker_available() && !running.status.success()).then_some(())
    };
    assert!(
        wait_for(Duration::from_secs(60), gone).is_some(),
        "dockerd did not stop"
    );

    let (status, body) = s.invoke_in("d", "shell_run", json!({"command": "echo ${A:-gone}"}));
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    let (status, _) = s.invoke("calc_evaluate", json!({"expression": "1+1"}));
    assert_eq!(status, 200, "wasm tools do not care");

    // Start it again: the next call gets a fresh node and says so.
    let started = Command::new(repo_root().join("plugins/node/ensure-docker.sh"))
        .status()
        .unwrap();
    assert!(started.success(), "ensure-docker.sh failed");
    let body = wait_for(Duration::from_secs(60), || {
        let (status, body) = s.invoke_in("d", "shell_run", json!({"command": "echo ${A:-gone}"}));
        (status == 200).then_some(body)
    })
    .unwrap_or_else(|| panic!("no recovery:\n{}", s.log()));
    let text = body["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("fresh node"), "{body}");
    assert_eq!(body["content"][1]["json"]["stdout"], "gone\n", "{body}");
    // The node the outage stopped could not be removed while the engine was
    // down; the monitor removes it now: only the fresh node is left.
    let settled = wait_for(Duration::from_secs(30), || {
        (s.containers().len() == 1).then_some(())
    });
    assert!(settled.is_some(), "{:?}", s.containers());
}
