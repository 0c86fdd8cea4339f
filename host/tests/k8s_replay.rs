//! The Kubernetes node provider against a replayed API server: toolhost,
//! configured with `[kubernetes]` and a kubeconfig written here, runs the
//! shell toolkit's calls through create (apply) -> claim -> exec -> delete
//! against a server on 127.0.0.1 that answers from the fixtures in
//! tests/k8s/recorded/exchange.json (see its `about`: built from the
//! published API, not captured from a cluster).
//!
//! The exec websocket (`v5.channel.k8s.io`: channel 0 stdin, 1 stdout,
//! 2 stderr, 3 status) is served by running the command toolhost sent, as
//! the pod would, with the pod's two mounts mapped to local directories:
//! `/workspaces` to the server's workspaces and `/opt/toolhost` to the shell
//! toolkit's folder. So a real driver answers a real call over it.
//!
//! Asserted: the requests (method, path, query), every body sent valid
//! against the vendored schemas (and every fixture answer too), a call's
//! round trip, a pod vanishing mid-call answered `node_lost`, the next call
//! on a fresh claim, and every claim deleted.

mod k8s_common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use k8s_common::replay::{Replay, Seen, TOKEN, Tls, fixture, kubeconfig, lock, start_replay_of};
use k8s_common::{check_object, repo, url_pairs};
use toolhost::config::Config;
use toolhost::nodes::kubernetes::config::KubernetesConfig;
use toolhost::server::Server;

async fn invoke(app: &axum::Router, command: &str) -> (StatusCode, Value) {
    let req = Request::post("/tools/shell_run/invoke")
        .header("host", "127.0.0.1:8001")
        .header("content-type", "application/json")
        .header("x-toolhost-session", "s1")
        .body(Body::from(
            json!({"params": {"command": command, "timeout_s": 20}}).to_string(),
        ))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The request log with claim, sandbox and pod names made generic.
fn shape(seen: &[Seen], claims: &[String]) -> Vec<String> {
    seen.iter()
        .map(|s| {
            let mut p = s.path.clone();
            for (i, c) in claims.iter().enumerate() {
                p = p.replace(c, &format!("<claim{}>", i + 1));
            }
            format!("{} {p}", s.method)
        })
        .collect()
}

/// A server with `[kubernetes]` pointed at a replay of `fixture`, the shell
/// toolkit in its plugins directory; its router, the replay, and the
/// directories (kept alive with it).
struct Setup {
    server: Server,
    app: axum::Router,
    replay: Arc<Replay>,
    workspaces: PathBuf,
    _dirs: [tempfile::TempDir; 3],
}

/// `shared`: `shared_workspaces` with a warm pool of one; else the default,
/// each sandbox mounting its session's directory alone.
async fn setup(fixture: Value, ready_timeout_s: u64, tls: bool, shared: bool) -> Setup {
    let plugins = tempfile::tempdir().unwrap();
    let shell = plugins.path().join("shell");
    std::fs::create_dir(&shell).unwrap();
    for f in ["shell.toml", "driver.py"] {
        std::fs::copy(repo().join("plugins/shell").join(f), shell.join(f)).unwrap();
    }
    let data = tempfile::tempdir().unwrap();
    let workspaces = data.path().join("workspaces");
    std::fs::create_dir_all(&workspaces).unwrap();
    let kube_dir = tempfile::tempdir().unwrap();
    let tls = tls.then(|| Tls::make(kube_dir.path()));
    let (replay, addr) = start_replay_of(fixture, &workspaces, &shell, tls.as_ref()).await;
    let config = Config {
        kubernetes: Some(KubernetesConfig {
            namespace: "toolhost".into(),
            kubeconfig: Some(kubeconfig(kube_dir.path(), addr, tls.as_ref())),
            instance: Some("toolhost-test".into()),
            workspace_pvc: "toolhost-workspaces".into(),
            warm_pool: u32::from(shared),
            shared_workspaces: shared,
            ready_timeout_s,
            ..Default::default()
        }),
        ..Default::default()
    };
    let server = Server::start(&config, plugins.path(), data.path())
        .await
        .unwrap();
    server.loaded().await;
    let app = server.router(&config);
    Setup {
        server,
        app,
        replay,
        workspaces,
        _dirs: [plugins, data, kube_dir],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_claim_exec_delete_against_a_replayed_api_server() {
    let Setup {
        server,
        app,
        replay,
        workspaces,
        _dirs,
    } = setup(fixture(), 20, true, false).await;

    // 1. A call: the toolkit's objects applied, a claim made and polled
    // until ready, the driver exec'd, the command run in the session's
    // directory of the workspaces volume.
    let (status, body) = invoke(&app, "echo hello from the pod; pwd").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let text = body.to_string();
    assert!(text.contains("hello from the pod"), "{text}");
    let s1 = std::fs::canonicalize(workspaces.join("s1")).unwrap();
    assert!(text.contains(&s1.display().to_string()), "{text}");
    // The claim names the session's directory, which its sandbox mounts
    // alone (the replay mounts it as the kubelet would).
    let claim = lock(&replay)
        .seen
        .iter()
        .find(|s| s.method == "POST" && s.path.ends_with("/sandboxclaims"))
        .map(|s| s.body.clone())
        .expect("a claim");
    assert_eq!(
        claim["spec"]["env"],
        json!([{"name": "TOOLHOST_WORKSPACE", "value": "s1"}]),
        "{claim:#}"
    );
    // State survives between calls (one driver, one bash).
    let (status, body) = invoke(&app, "export K=kept; true").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let (_, body) = invoke(&app, "echo $K").await;
    assert!(body.to_string().contains("kept"), "{body}");

    // 2. The pod vanishes while a call runs: `node_lost`.
    let before = replay.stdin_messages(1);
    let call = tokio::spawn({
        let app = app.clone();
        async move { invoke(&app, "sleep 15; echo never").await }
    });
    for _ in 0..200 {
        if replay.stdin_messages(1) > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        replay.stdin_messages(1) > before,
        "the call never reached the pod"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    replay.vanish(1);
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the call ends when its pod goes")
        .unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body:#}");
    assert_eq!(body["error"]["kind"], "node_lost", "{body:#}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Kubernetes sandbox"),
        "{body:#}"
    );

    // 3. The next call gets a fresh claim, and is told why.
    let (status, body) = invoke(&app, "echo again").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert!(body.to_string().contains("again"), "{body}");
    assert!(body.to_string().contains("lost"), "{body}");

    // 4. The session closes: its claim is deleted.
    let resp = app
        .clone()
        .oneshot(
            Request::delete("/sessions/s1")
                .header("host", "127.0.0.1:8001")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    server.shutdown().await;

    let state = lock(&replay);
    let claims: Vec<String> = state.claims.iter().map(|c| c.0.clone()).collect();
    assert_eq!(claims.len(), 2, "{claims:?}");
    let shape = shape(&state.seen, &claims);
    let base = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/toolhost";
    let core = "/api/v1/namespaces/toolhost";
    // The order of one node's exchange.
    let expected_first = vec![
        format!("PATCH {core}/configmaps/toolhost-shell"),
        format!("PATCH {base}/sandboxtemplates/toolhost-shell"),
        format!("PATCH {base}/sandboxwarmpools/toolhost-shell"),
        format!("POST {base}/sandboxclaims"),
        format!("GET {base}/sandboxclaims/<claim1>"),
        format!("GET {base}/sandboxclaims/<claim1>"),
        "GET /apis/agents.x-k8s.io/v1beta1/namespaces/toolhost/sandboxes/toolhost-shell-x7k2p1"
            .into(),
        format!("GET {core}/pods/toolhost-shell-pod-q9w8e1/exec"),
    ];
    let node_requests: Vec<String> = shape
        .iter()
        .filter(|s| !s.ends_with("/sandboxclaims") || s.starts_with("POST"))
        .take(expected_first.len())
        .cloned()
        .collect();
    assert_eq!(node_requests, expected_first, "{shape:#?}");
    // The lost pod was looked up (404), its claim deleted; the second
    // node claimed and exec'd; both claims deleted in the end.
    for line in [
        format!("GET {core}/pods/toolhost-shell-pod-q9w8e1"),
        format!("DELETE {base}/sandboxclaims/<claim1>"),
        format!("GET {core}/pods/toolhost-shell-pod-q9w8e2/exec"),
        format!("DELETE {base}/sandboxclaims/<claim2>"),
    ] {
        assert!(shape.contains(&line), "missing {line}: {shape:#?}");
    }
    // The toolkit's objects are applied once.
    assert_eq!(
        shape
            .iter()
            .filter(|s| s.contains("sandboxtemplates"))
            .count(),
        1,
        "{shape:#?}"
    );
    // Start-up swept this instance's leftover claims by label.
    let sweep = state
        .seen
        .iter()
        .find(|s| s.method == "DELETE" && s.path.ends_with("/sandboxclaims"))
        .expect("a sweep");
    let pairs = url_pairs(&sweep.query);
    assert!(
        pairs.contains(&(
            "labelSelector".into(),
            "app.kubernetes.io/managed-by=toolhost,toolhost.dev/instance=toolhost-test".into()
        )),
        "{pairs:?}"
    );
    // Applies are server-side applies by toolhost.
    for s in state.seen.iter().filter(|s| s.method == "PATCH") {
        let q = url_pairs(&s.query);
        assert!(
            q.contains(&("fieldManager".into(), "toolhost".into())),
            "{q:?}"
        );
        assert!(q.contains(&("force".into(), "true".into())), "{q:?}");
    }
    // Exec: the declared parameters, the session's directory.
    let exec = state
        .seen
        .iter()
        .find(|s| s.path.ends_with("/exec"))
        .unwrap();
    let q = url_pairs(&exec.query);
    for p in [
        ("container", "node"),
        ("stdin", "true"),
        ("stdout", "true"),
        ("stderr", "true"),
    ] {
        assert!(q.contains(&(p.0.into(), p.1.into())), "{q:?}");
    }
    assert_eq!(q.last().unwrap(), &("command".to_owned(), "s1".to_owned()));
    // Every request carries the kubeconfig's credentials (the exec too).
    for x in &state.seen {
        assert_eq!(
            x.auth.as_deref(),
            Some(&*format!("Bearer {TOKEN}")),
            "{} {}",
            x.method,
            x.path
        );
    }
    // Every body sent is valid against the schemas; so is every answer
    // the fixtures gave.
    let delete_options =
        k8s_common::definition("io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions");
    let mut checked = 0;
    for s in state.seen.iter().filter(|s| s.body.is_object()) {
        let found = if s.method == "DELETE" {
            k8s_common::errors(&delete_options, &s.body)
        } else {
            checked += 1;
            check_object(&s.body)
        };
        assert!(
            found.is_empty(),
            "{} {}: {found:#?}\n{:#}",
            s.method,
            s.path,
            s.body
        );
    }
    assert_eq!(checked, 5, "3 applies and 2 claims");
    for a in &state.answers {
        let kind = a["kind"].as_str().unwrap_or_default();
        if kind.ends_with("List") || kind == "Status" {
            continue;
        }
        let found = if kind == "Pod" {
            k8s_common::errors(&k8s_common::definition("io.k8s.api.core.v1.Pod"), a)
        } else {
            check_object(a)
        };
        assert!(found.is_empty(), "answer {kind}: {found:#?}\n{a:#}");
    }
    // The claims carried their owner labels.
    let labels = &state.claims[0].1["metadata"]["labels"];
    assert_eq!(labels["toolhost.dev/instance"], "toolhost-test");
    assert_eq!(labels["toolhost.dev/session"], "s1");
    assert_eq!(labels["toolhost.dev/toolkit"], "shell");
}

#[tokio::test]
async fn a_kubeconfig_that_cannot_be_read_stops_the_start_with_a_clear_error() {
    let plugins = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let config = Config {
        kubernetes: Some(KubernetesConfig {
            kubeconfig: Some(data.path().join("no-such-kubeconfig")),
            workspace_pvc: "toolhost-workspaces".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let e = match Server::start(&config, plugins.path(), data.path()).await {
        Ok(_) => panic!("started without a kubeconfig"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        e.contains("[kubernetes]") && e.contains("no-such-kubeconfig"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_never_ready_fails_the_call_clearly_and_is_deleted() {
    // The same exchange, but the controller never makes the claim ready.
    let mut fixture = fixture();
    for route in fixture["routes"].as_array_mut().unwrap() {
        if route["method"] == "GET" && route["path"].as_str().unwrap().contains("sandboxclaims/") {
            route["responses"].as_array_mut().unwrap().truncate(1);
        }
    }
    // (`_dirs` bound: the directories live as long as the test.)
    let Setup {
        server,
        app,
        replay,
        _dirs,
        ..
    } = setup(fixture, 2, false, false).await;
    let (status, body) = invoke(&app, "echo never").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body:#}");
    assert_eq!(body["error"]["kind"], "backend_unavailable", "{body:#}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("was not ready within 2s")
            && message.contains("SandboxNotReady: Sandbox is not ready"),
        "{message}"
    );
    server.shutdown().await;
    let state = lock(&replay);
    let claim = &state.claims[0].0;
    assert!(
        state
            .seen
            .iter()
            .any(|s| s.method == "DELETE" && s.path.ends_with(&format!("/sandboxclaims/{claim}"))),
        "the claim that never got ready was not deleted"
    );
    assert!(
        !state.seen.iter().any(|s| s.path.ends_with("/exec")),
        "no exec before the claim is ready"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_speaking_only_v4_channels_works_too() {
    // Older API servers answer the exec with v4.channel.k8s.io (no stdin
    // close signal): the driver protocol does not need it.
    let mut fixture = fixture();
    for route in fixture["routes"].as_array_mut().unwrap() {
        if let Some(ws) = route.get_mut("websocket") {
            ws["protocol"] = json!("v4.channel.k8s.io");
        }
    }
    // (With shared workspaces and a warm pool, the other way to run.)
    let s = setup(fixture, 20, false, true).await;
    let (status, body) = invoke(&s.app, "echo over v4").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert!(body.to_string().contains("over v4"), "{body}");
    s.server.shutdown().await;
    let state = lock(&s.replay);
    let claim = &state.claims[0].0;
    assert!(
        state
            .seen
            .iter()
            .any(|x| x.method == "DELETE" && x.path.ends_with(&format!("/sandboxclaims/{claim}")))
    );
}
