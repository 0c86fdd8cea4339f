//! Opening a connection to a URL's host under an allow-list: its name
//! resolved by the host with internal addresses kept out unless the list
//! names the host exactly ([`super::usable`]), each address tried in turn
//! within the connect timeout, TLS for `https` (rustls on ring; the webpki
//! roots and the system's own, read once).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;
use url::{Host, Url};

use super::HttpPolicy;
use super::link::Stream;

/// A stream open to `url`'s host and port (TLS for `https`), or why not.
pub async fn connect(
    policy: &HttpPolicy,
    url: &Url,
    within: Duration,
) -> Result<Box<dyn Stream>, String> {
    connect_with(policy, url, within, tls).await
}

/// [`connect`] with TLS from `tls` (the tests' own roots).
async fn connect_with(
    policy: &HttpPolicy,
    url: &Url,
    within: Duration,
    tls: impl FnOnce() -> Result<TlsConnector, String>,
) -> Result<Box<dyn Stream>, String> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| format!("no port for scheme `{}`", url.scheme()))?;
    // An address is reached only when the list names it (a wildcard never
    // matches one): the allow-list check before said so. A name is
    // resolved under the list.
    let ip: Option<IpAddr> = match url.host() {
        Some(Host::Domain(_)) => None,
        Some(Host::Ipv4(ip)) => Some(ip.into()),
        Some(Host::Ipv6(ip)) => Some(ip.into()),
        None => return Err("the URL has no host".into()),
    };
    let name = url.host_str().unwrap_or("");
    let addrs = match ip {
        Some(ip) => vec![SocketAddr::new(ip, port)],
        None => super::PolicyResolver::resolve_with(policy, name)
            .await?
            .into_iter()
            .map(|a| SocketAddr::new(a.ip(), port))
            .collect(),
    };
    let tcp = tokio::time::timeout(within, first_to_answer(&addrs))
        .await
        .map_err(|_| format!("connect timed out after {} ms", within.as_millis()))??;
    let _ = tcp.set_nodelay(true);
    if url.scheme() != "https" {
        return Ok(Box::new(tcp));
    }
    let name = match ip {
        Some(ip) => rustls::pki_types::ServerName::IpAddress(ip.into()),
        None => rustls::pki_types::ServerName::try_from(name.to_owned())
            .map_err(|e| format!("TLS name {name}: {e}"))?,
    };
    let tls = tokio::time::timeout(within, tls()?.connect(name, tcp))
        .await
        .map_err(|_| format!("TLS handshake timed out after {} ms", within.as_millis()))?
        .map_err(|e| format!("TLS handshake: {e}"))?;
    Ok(Box::new(tls))
}

/// A connection to the first of `addrs` that takes one.
async fn first_to_answer(addrs: &[SocketAddr]) -> Result<TcpStream, String> {
    let mut last = String::from("no address");
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(tcp) => return Ok(tcp),
            Err(e) => last = format!("{addr}: {e}"),
        }
    }
    Err(last)
}

/// The TLS client every API toolkit shares, made on first use.
fn tls() -> Result<TlsConnector, String> {
    static CONNECTOR: OnceLock<Result<TlsConnector, String>> = OnceLock::new();
    CONNECTOR
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
            tls_with(roots)
        })
        .clone()
}

/// A TLS client trusting `roots`, speaking HTTP/1.1.
fn tls_with(roots: rustls::RootCertStore) -> Result<TlsConnector, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
#[path = "connect_tests.rs"]
mod tests;
