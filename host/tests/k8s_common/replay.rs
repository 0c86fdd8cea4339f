//! The replayed Kubernetes API server of the replay tests: answers from a
//! fixture (tests/k8s/recorded/exchange.json), optionally over TLS, logs
//! every request, and serves the pod exec websocket by running the command
//! it was sent (see host/tests/k8s_replay.rs for what is asserted).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::{repo, url_pairs};

/// One request the replay server got.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub body: Value,
    /// The `Authorization` header.
    pub auth: Option<String>,
}

#[derive(Default)]
pub struct State {
    pub seen: Vec<Seen>,
    /// Claims created, in order: name, object as stored.
    pub claims: Vec<(String, Value)>,
    /// (route, claim number) -> answers given.
    pub served: HashMap<(usize, usize), usize>,
    /// Claim numbers whose pod has vanished.
    pub gone: Vec<usize>,
    /// Claim number -> stdin messages its exec got, and how to end it.
    pub execs: HashMap<
        usize,
        (
            Arc<std::sync::atomic::AtomicUsize>,
            Option<tokio::sync::oneshot::Sender<()>>,
        ),
    >,
    /// Every answer body given (validated at the end).
    pub answers: Vec<Value>,
}

pub struct Replay {
    pub fixture: Value,
    pub workspaces: PathBuf,
    pub driver_dir: PathBuf,
    pub state: Mutex<State>,
}

pub fn lock(r: &Replay) -> std::sync::MutexGuard<'_, State> {
    r.state.lock().unwrap()
}

/// `text` with `${n}` and `${claim}` filled for claim number `n`.
pub fn fill(text: &str, n: usize, claim: &str) -> String {
    text.replace("${n}", &n.to_string())
        .replace("${claim}", claim)
}

pub fn fill_value(v: &Value, n: usize, claim: &str) -> Value {
    serde_json::from_str(&fill(&v.to_string(), n, claim)).unwrap()
}

pub fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b.clone(),
    }
}

pub fn json_response(status: u16, body: &Value) -> Response {
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
    pub fn route(&self, method: &str, path: &str) -> Option<(usize, usize)> {
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

    pub async fn handle(self: Arc<Self>, mut req: Request<Body>) -> Response {
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
                this.pod_exec(stream, command, n, &ws, count, stop.1).await;
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
    pub async fn pod_exec(
        &self,
        mut ws: tokio_tungstenite::WebSocketStream<
            hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>,
        >,
        mut command: Vec<String>,
        claim: usize,
        fixture: &Value,
        count: Arc<std::sync::atomic::AtomicUsize>,
        mut stop: tokio::sync::oneshot::Receiver<()>,
    ) {
        assert!(
            command.len() >= 3 && command[0] == "sh" && command[1] == "-c",
            "{command:?}"
        );
        // The pod's mounts, as the kubelet makes them: the whole volume at
        // /workspaces, or (the claim naming its directory) that directory
        // alone at /workspace, the sub-path expanded from the claim's
        // TOOLHOST_WORKSPACE.
        let sub_path = lock(self)
            .claims
            .get(claim.wrapping_sub(1))
            .and_then(|(_, c)| {
                c["spec"]["env"]
                    .as_array()?
                    .iter()
                    .find(|e| e["name"] == "TOOLHOST_WORKSPACE")?["value"]
                    .as_str()
                    .map(str::to_owned)
            });
        let script = match sub_path {
            Some(dir) => command[2].replace(
                "/workspace",
                &self.workspaces.join(dir).display().to_string(),
            ),
            None => command[2].replace("/workspaces", &self.workspaces.display().to_string()),
        };
        command[2] = script.replace("/opt/toolhost", &self.driver_dir.display().to_string());
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
                    // The pod is deleted: its processes die, the stream ends
                    // at once (the kill is not waited for).
                    let _ = child.start_kill();
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
                        let _ = child.start_kill();
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
    pub fn vanish(&self, n: usize) {
        let mut state = lock(self);
        state.gone.push(n);
        if let Some((_, stop)) = state.execs.get_mut(&n)
            && let Some(stop) = stop.take()
        {
            let _ = stop.send(());
        }
    }

    pub fn stdin_messages(&self, n: usize) -> usize {
        lock(self)
            .execs
            .get(&n)
            .map_or(0, |(c, _)| c.load(std::sync::atomic::Ordering::SeqCst))
    }
}

pub fn fixture() -> Value {
    let text = std::fs::read_to_string(repo().join("tests/k8s/recorded/exchange.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

pub async fn start_replay_of(
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
pub struct Tls {
    pub ca_pem: Vec<u8>,
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl Tls {
    pub fn make(dir: &Path) -> Tls {
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

    pub fn server_config(&self) -> rustls::ServerConfig {
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
pub struct TlsListener {
    pub tcp: tokio::net::TcpListener,
    pub acceptor: tokio_rustls::TlsAcceptor,
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
pub const TOKEN: &str = "replay-token-7f3a";

pub fn kubeconfig(dir: &Path, addr: std::net::SocketAddr, tls: Option<&Tls>) -> PathBuf {
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
