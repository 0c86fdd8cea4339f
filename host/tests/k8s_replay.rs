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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;
use tower::ServiceExt;

use k8s_common::{check_object, repo};
use toolhost::config::{Config, KubernetesConfig};
use toolhost::server::Server;

/// One request the replay server got.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: String,
    body: Value,
    /// The `Authorization` header.
    auth: Option<String>,
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    /// Claims created, in order: name, object as stored.
    claims: Vec<(String, Value)>,
    /// (route, claim number) -> answers given.
    served: HashMap<(usize, usize), usize>,
    /// Claim numbers whose pod has vanished.
    gone: Vec<usize>,
    /// Claim number -> stdin messages its exec got, and how to end it.
    execs: HashMap<
        usize,
        (
            Arc<std::sync::atomic::AtomicUsize>,
            Option<tokio::sync::oneshot::Sender<()>>,
        ),
    >,
    /// Every answer body given (validated at the end).
    answers: Vec<Value>,
}

struct Replay {
    fixture: Value,
    workspaces: PathBuf,
    driver_dir: PathBuf,
    state: Mutex<State>,
}

fn lock(r: &Replay) -> std::sync::MutexGuard<'_, State> {
    r.state.lock().unwrap()
}

/// `text` with `${n}` and `${claim}` filled for claim number `n`.
fn fill(text: &str, n: usize, claim: &str) -> String {
    text.replace("${n}", &n.to_string())
        .replace("${claim}", claim)
}

fn fill_value(v: &Value, n: usize, claim: &str) -> Value {
    serde_json::from_str(&fill(&v.to_string(), n, claim)).unwrap()
}

fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b.clone(),
    }
}

fn json_response(status: u16, body: &Value) -> Response {
    (
        StatusCode::from_u16(status).unwrap(),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

impl Replay {
    /// The route matching `method` `path`, and the claim number it is for
    /// (0: none).
    fn route(&self, method: &str, path: &str) -> Option<(usize, usize)> {
        let claims: Vec<String> = lock(self).claims.iter().map(|c| c.0.clone()).collect();
        let routes = self.fixture["routes"].as_array().unwrap();
        for (i, r) in routes.iter().enumerate() {
            if r["method"] != method {
                continue;
            }
            let template = r["path"].as_str().unwrap();
            if !template.contains("${") {
                if template == path {
                    return Some((i, 0));
                }
                continue;
            }
            for (n, name) in claims.iter().enumerate() {
                if fill(template, n + 1, name) == path {
                    return Some((i, n + 1));
                }
            }
        }
        None
    }

    async fn handle(self: Arc<Self>, mut req: Request<Body>) -> Response {
        let method = req.method().as_str().to_owned();
        let path = req.uri().path().to_owned();
        let query = req.uri().query().unwrap_or_default().to_owned();
        let upgrade = req.headers().contains_key("upgrade");
        let protocols = req
            .headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let key = req.headers().get("sec-websocket-key").cloned();
        let auth = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let on_upgrade = hyper::upgrade::on(&mut req);
        let bytes = req.into_body().collect().await.unwrap().to_bytes();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        lock(&self).seen.push(Seen {
            method: method.clone(),
            path: path.clone(),
            query: query.clone(),
            body: body.clone(),
            auth,
        });
        let Some((i, mut n)) = self.route(&method, &path) else {
            return json_response(
                404,
                &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "message": format!("no fixture for {method} {path}")}),
            );
        };
        let route = self.fixture["routes"][i].clone();
        if let Some(ws) = route.get("websocket") {
            assert!(upgrade, "exec without a websocket upgrade");
            let protocol = ws["protocol"].as_str().unwrap();
            assert!(protocols.contains(protocol), "offered: {protocols}");
            let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(
                key.expect("a websocket key").as_bytes(),
            );
            let command: Vec<String> = url_pairs(&query)
                .into_iter()
                .filter(|(k, _)| k == "command")
                .map(|(_, v)| v)
                .collect();
            let (count, stop) = (Arc::default(), tokio::sync::oneshot::channel());
            lock(&self)
                .execs
                .insert(n, (Arc::clone(&count), Some(stop.0)));
            let this = self.clone();
            let ws = ws.clone();
            tokio::spawn(async move {
                let upgraded = on_upgrade.await.expect("upgraded");
                let stream = tokio_tungstenite::WebSocketStream::from_raw_socket(
                    hyper_util::rt::TokioIo::new(upgraded),
                    Role::Server,
                    None,
                )
                .await;
                this.pod_exec(stream, command, &ws, count, stop.1).await;
            });
            return Response::builder()
                .status(StatusCode::SWITCHING_PROTOCOLS)
                .header("upgrade", "websocket")
                .header("connection", "Upgrade")
                .header("sec-websocket-accept", accept)
                .header("sec-websocket-protocol", protocol)
                .body(Body::empty())
                .unwrap();
        }
        let is_post_claim = method == "POST" && path.ends_with("/sandboxclaims");
        let mut state = lock(&self);
        if is_post_claim {
            n = state.claims.len() + 1;
        }
        let claim_name = if is_post_claim {
            body["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        } else if n > 0 {
            state.claims[n - 1].0.clone()
        } else {
            String::new()
        };
        let answer = if route.get("gone").is_some() && state.gone.contains(&n) {
            route["gone"].clone()
        } else {
            let answers = route["responses"].as_array().unwrap();
            let count = state.served.entry((i, n)).or_default();
            let a = answers[(*count).min(answers.len() - 1)].clone();
            *count += 1;
            a
        };
        let mut out = match &answer["body"] {
            Value::String(s) if s == "$request" => body.clone(),
            Value::String(s) if s == "$claim" => state.claims[n - 1].1.clone(),
            other => fill_value(other, n, &claim_name),
        };
        if let Some(m) = answer.get("merge") {
            merge(&mut out, &fill_value(m, n, &claim_name));
        }
        if is_post_claim {
            state.claims.push((claim_name, out.clone()));
        }
        state.answers.push(out.clone());
        json_response(answer["status"].as_u64().unwrap() as u16, &out)
    }

    /// Be the pod: run `command` with the pod's mounts mapped here, its
    /// stdio on the websocket's channels, until it exits (status on
    /// channel 3) or the pod vanishes (`stop`: the stream just ends).
    async fn pod_exec(
        &self,
        mut ws: tokio_tungstenite::WebSocketStream<
            hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>,
        >,
        mut command: Vec<String>,
        fixture: &Value,
        count: Arc<std::sync::atomic::AtomicUsize>,
        mut stop: tokio::sync::oneshot::Receiver<()>,
    ) {
        assert!(
            command.len() >= 3 && command[0] == "sh" && command[1] == "-c",
            "{command:?}"
        );
        command[2] = command[2]
            .replace("/workspaces", &self.workspaces.display().to_string())
            .replace("/opt/toolhost", &self.driver_dir.display().to_string());
        let mut child = tokio::process::Command::new(&command[0])
            .args(&command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take();
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (mut out_buf, mut err_buf) = (vec![0u8; 65536], vec![0u8; 65536]);
        let (mut out_open, mut err_open) = (true, true);
        loop {
            tokio::select! {
                _ = &mut stop => {
                    // The pod is deleted: its processes die, the stream ends.
                    let _ = child.kill().await;
                    let _ = ws.close(None).await;
                    return;
                }
                msg = ws.next() => match msg {
                    Some(Ok(Message::Binary(b))) if b.first() == Some(&0) => {
                        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        if let Some(i) = stdin.as_mut() {
                            let _ = i.write_all(&b[1..]).await;
                            let _ = i.flush().await;
                        }
                    }
                    // v5: the client closed stdin.
                    Some(Ok(Message::Binary(b))) if b.as_ref() == [255, 0] => stdin = None,
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => {
                        let _ = child.kill().await;
                        return;
                    }
                },
                r = stdout.read(&mut out_buf), if out_open => match r {
                    Ok(0) | Err(_) => out_open = false,
                    Ok(k) => {
                        let mut m = vec![1u8];
                        m.extend_from_slice(&out_buf[..k]);
                        if ws.send(Message::binary(m)).await.is_err() { return; }
                    }
                },
                r = stderr.read(&mut err_buf), if err_open => match r {
                    Ok(0) | Err(_) => err_open = false,
                    Ok(k) => {
                        let mut m = vec![2u8];
                        m.extend_from_slice(&err_buf[..k]);
                        if ws.send(Message::binary(m)).await.is_err() { return; }
                    }
                },
                status = child.wait(), if !out_open && !err_open => {
                    let ok = status.map(|s| s.success()).unwrap_or(false);
                    let body = if ok { &fixture["exit"] } else { &fixture["exit_failure"] };
                    let mut m = vec![3u8];
                    m.extend_from_slice(body.to_string().as_bytes());
                    let _ = ws.send(Message::binary(m)).await;
                    let _ = ws.close(None).await;
                    return;
                }
            }
        }
    }

    /// The pod of claim `n` is deleted: its exec stream ends, and it is
    /// not found from now on.
    fn vanish(&self, n: usize) {
        let mut state = lock(self);
        state.gone.push(n);
        if let Some((_, stop)) = state.execs.get_mut(&n)
            && let Some(stop) = stop.take()
        {
            let _ = stop.send(());
        }
    }

    fn stdin_messages(&self, n: usize) -> usize {
        lock(self)
            .execs
            .get(&n)
            .map_or(0, |(c, _)| c.load(std::sync::atomic::Ordering::SeqCst))
    }
}

fn url_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let dec = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (dec(k), dec(v))
        })
        .collect()
}

fn fixture() -> Value {
    let text = std::fs::read_to_string(repo().join("tests/k8s/recorded/exchange.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

async fn start_replay_of(
    fixture: Value,
    workspaces: &Path,
    driver_dir: &Path,
    tls: Option<&Tls>,
) -> (Arc<Replay>, std::net::SocketAddr) {
    let replay = Arc::new(Replay {
        fixture,
        workspaces: workspaces.to_owned(),
        driver_dir: driver_dir.to_owned(),
        state: Mutex::default(),
    });
    let app = axum::Router::new().fallback({
        let replay = replay.clone();
        move |req: Request<Body>| replay.clone().handle(req)
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    match tls {
        Some(tls) => {
            let listener = TlsListener {
                tcp: listener,
                acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(tls.server_config())),
            };
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        }
        None => {
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        }
    }
    (replay, addr)
}

/// A certificate authority and a server certificate for 127.0.0.1 signed by
/// it, made by the `openssl` command for this test run.
struct Tls {
    ca_pem: Vec<u8>,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl Tls {
    fn make(dir: &Path) -> Tls {
        let run = |args: &[&str]| {
            let out = std::process::Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .output()
                .expect("the openssl command");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut ca = vec![
            "req",
            "-x509",
            "-days",
            "2",
            "-subj",
            "/CN=replay-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ];
        ca.extend(ec);
        ca.extend([
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
        ]);
        run(&ca);
        let mut csr = vec![
            "req",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ];
        csr.extend(ec);
        run(&csr);
        std::fs::write(
            dir.join("ext.cnf"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature\n",
        )
        .unwrap();
        run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.pem",
        ]);
        let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
        Tls {
            ca_pem: read("ca.pem"),
            cert_pem: read("server.pem"),
            key_pem: read("server.key"),
        }
    }

    fn server_config(&self) -> rustls::ServerConfig {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&self.cert_pem)
            .collect::<Result<_, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(&self.key_pem).unwrap();
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap()
    }
}

/// The replay's TCP listener behind TLS (a failed handshake is skipped).
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// The bearer token of the kubeconfig: sent with every request.
const TOKEN: &str = "replay-token-7f3a";

fn kubeconfig(dir: &Path, addr: std::net::SocketAddr, tls: Option<&Tls>) -> PathBuf {
    use base64::Engine as _;
    let path = dir.join("kubeconfig");
    let cluster = match tls {
        Some(tls) => format!(
            "    server: https://{addr}\n    certificate-authority-data: {}\n",
            base64::engine::general_purpose::STANDARD.encode(&tls.ca_pem)
        ),
        None => format!("    server: http://{addr}\n"),
    };
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: replay\n  cluster:\n{cluster}users:\n- name: replay\n  user:\n    token: {TOKEN}\ncontexts:\n- name: replay\n  context:\n    cluster: replay\n    user: replay\n    namespace: toolhost\ncurrent-context: replay\n"
        ),
    )
    .unwrap();
    path
}

async fn invoke(app: &axum::Router, command: &str) -> (StatusCode, Value) {
    let req = Request::post("/tools/shell_run/invoke")
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

async fn setup(fixture: Value, ready_timeout_s: u64, tls: bool) -> Setup {
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
            warm_pool: 1,
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
    } = setup(fixture(), 20, true).await;

    // 1. A call: the toolkit's objects applied, a claim made and polled
    // until ready, the driver exec'd, the command run in the session's
    // directory of the workspaces volume.
    let (status, body) = invoke(&app, "echo hello from the pod; pwd").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let text = body.to_string();
    assert!(text.contains("hello from the pod"), "{text}");
    let s1 = std::fs::canonicalize(workspaces.join("s1")).unwrap();
    assert!(text.contains(&s1.display().to_string()), "{text}");
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
        .oneshot(Request::delete("/sessions/s1").body(Body::empty()).unwrap())
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
    } = setup(fixture, 2, false).await;
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
    let s = setup(fixture, 20, false).await;
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
