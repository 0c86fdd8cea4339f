use super::*;
use crate::outbound::link::Link;
use bytes::Bytes;
use http_body_util::Full;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/tls")
        .join(name)
}

/// A TLS server on loopback address `ip` (the fixture's certificate, for
/// `localhost` and 127.0.0.1) answering each request with `hello`; its port.
async fn tls_server(ip: &str) -> u16 {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(fixture("server.pem"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = tls
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello")
                    .await;
                let _ = tls.flush().await;
            });
        }
    });
    port
}

/// Why a connect that must fail failed.
async fn refusal(connecting: impl Future<Output = Result<Box<dyn Stream>, String>>) -> String {
    match connecting.await {
        Ok(_) => panic!("connected where it must not"),
        Err(e) => e,
    }
}

fn policy(allow: &str) -> HttpPolicy {
    HttpPolicy::parse(&[allow.to_owned()], &["GET".to_owned()]).unwrap()
}

fn test_roots() -> Result<TlsConnector, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(fixture("ca.pem")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    tls_with(roots)
}

#[tokio::test]
async fn https_is_spoken_with_the_certificate_checked_by_name_or_address() {
    let port = tls_server("127.0.0.1").await;
    for host in ["localhost", "127.0.0.1"] {
        let url = Url::parse(&format!("https://{host}:{port}/x")).unwrap();
        let stream = connect_with(
            &policy(&format!("{host}:{port}")),
            &url,
            Duration::from_secs(5),
            test_roots,
        )
        .await
        .unwrap_or_else(|e| panic!("{host}: {e}"));
        let mut link = Link::open(stream).await.unwrap();
        let request = hyper::Request::builder()
            .uri("/x")
            .header("host", host)
            .body(Full::new(Bytes::new()))
            .unwrap();
        let answer = link
            .exchange(request, 1024)
            .await
            .map_err(|e| e.to_string())
            .unwrap();
        assert_eq!(answer.body, "hello", "{host}");
    }
}

#[tokio::test]
async fn a_certificate_from_an_unknown_authority_is_refused() {
    let port = tls_server("127.0.0.1").await;
    let url = Url::parse(&format!("https://localhost:{port}/x")).unwrap();
    // The shipped roots (webpki's and the system's) do not hold the test CA.
    let refused = refusal(connect(
        &policy(&format!("localhost:{port}")),
        &url,
        Duration::from_secs(5),
    ))
    .await;
    assert!(
        refused.starts_with("TLS handshake") && refused.contains("UnknownIssuer"),
        "{refused}"
    );
    // An address the certificate is not for (127.0.0.2 is loopback too).
    let port = tls_server("127.0.0.2").await;
    let url = Url::parse(&format!("https://127.0.0.2:{port}/x")).unwrap();
    let refused = refusal(connect_with(
        &policy(&format!("127.0.0.2:{port}")),
        &url,
        Duration::from_secs(5),
        test_roots,
    ))
    .await;
    assert!(refused.contains("not valid for name"), "{refused}");
}

#[tokio::test]
async fn an_internal_name_on_the_list_only_by_a_wildcard_is_not_connected() {
    // `localhost` resolves to loopback: reached only when the list names it
    // exactly (here a wildcard of its subdomains stands there instead).
    let url = Url::parse("http://localhost:9/").unwrap();
    let refused = refusal(connect(
        &policy("*.localhost:*"),
        &url,
        Duration::from_secs(2),
    ))
    .await;
    assert!(refused.contains("internal addresses"), "{refused}");
}
