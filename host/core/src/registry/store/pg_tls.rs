//! TLS to the registry's PostgreSQL, asked for in the URL as libpq reads
//! it: `sslmode=require` (or `verify-ca` / `verify-full`, the same here:
//! the server's certificate is always verified, its name included, against
//! the system's roots or `sslrootcert=<PEM file>`). Without `sslmode`, or
//! with `prefer` / `disable`, the connection is plain TCP as before (never
//! a TLS session that would skip verification).

use std::sync::Arc;

use postgres::{Client, NoTls};

/// How to connect: the URL with the options only libpq knows taken out,
/// and the roots to verify the server with when TLS is asked for.
#[derive(Debug, PartialEq)]
pub struct Target {
    pub url: String,
    /// `Some` when TLS is required: the PEM file of `sslrootcert`, if any.
    pub tls: Option<Option<String>>,
}

/// Read `sslmode` and `sslrootcert` out of `url`.
pub fn target(url: &str) -> Result<Target, String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok(Target {
            url: url.to_owned(),
            tls: None,
        });
    };
    let (mut kept, mut mode, mut root) = (Vec::new(), None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => mode = Some(value.to_owned()),
            "sslrootcert" => root = Some(value.to_owned()),
            _ => kept.push(pair),
        }
    }
    let tls = match mode.as_deref() {
        None | Some("disable" | "allow" | "prefer") => None,
        Some("require" | "verify-ca" | "verify-full") => Some(root),
        Some(other) => {
            return Err(format!(
                "sslmode `{other}` is not one of disable, prefer, require, verify-ca, verify-full"
            ));
        }
    };
    let mut url = base.to_owned();
    if !kept.is_empty() {
        url = format!("{url}?{}", kept.join("&"));
    }
    Ok(Target { url, tls })
}

/// Connect with `config` as `tls` says.
pub fn connect(config: &postgres::Config, tls: &Option<Option<String>>) -> Result<Client, String> {
    let Some(root) = tls else {
        return config
            .connect(NoTls)
            .map_err(|e| super::postgres::detail(&e));
    };
    let mut roots = rustls::RootCertStore::empty();
    match root {
        Some(path) => {
            use rustls::pki_types::pem::PemObject;
            let certs = rustls::pki_types::CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("sslrootcert {path}: {e}"))?;
            for cert in certs {
                let cert = cert.map_err(|e| format!("sslrootcert {path}: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("sslrootcert {path}: {e}"))?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut config = config.clone();
    config.ssl_mode(postgres::config::SslMode::Require);
    config
        .connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
        .map_err(|e| super::postgres::detail(&e))
}

#[cfg(test)]
mod tests {
    use super::super::testing::Postgres;
    use super::*;

    fn open(url: &str) -> Result<Client, String> {
        super::super::postgres::connect(url, None)
    }

    fn refused(url: &str) -> String {
        open(url).err().expect("the connection is refused")
    }

    #[test]
    fn tls_is_verified_against_the_given_roots_and_the_servers_name() {
        let Some((pg, ca)) = Postgres::start_tls() else {
            return;
        };
        let ca = ca.display();
        let mut client = open(&format!("{}?sslmode=verify-full&sslrootcert={ca}", pg.url)).unwrap();
        let row = client
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .unwrap();
        assert!(row.get::<_, bool>(0), "the session is encrypted");
        // The store itself, over TLS.
        let url = format!("{}?sslmode=require&sslrootcert={ca}", pg.url);
        let mut store = super::super::PostgresStore::open(&url, None, "r1").unwrap();
        assert!(store.load().is_ok());
        // Without the CA the certificate is refused, with the reason.
        let err = refused(&format!("{}?sslmode=require", pg.url));
        assert!(err.contains("UnknownIssuer"), "{err}");
        // A name the certificate does not carry is refused too.
        let other = pg.url.replace("127.0.0.1", "localhost");
        let err = refused(&format!("{other}?sslmode=verify-full&sslrootcert={ca}"));
        assert!(err.contains("not valid for name \"localhost\""), "{err}");
        // A bad root file is named.
        let err = refused(&format!(
            "{}?sslmode=require&sslrootcert=/nonexistent.pem",
            pg.url
        ));
        assert!(err.contains("/nonexistent.pem"), "{err}");
        // Without sslmode: plain TCP, as before.
        let mut plain = open(&pg.url).unwrap();
        let row = plain
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .unwrap();
        assert!(!row.get::<_, bool>(0));
    }

    #[test]
    fn tls_required_of_a_server_without_it_is_refused() {
        let Some(pg) = Postgres::start() else {
            return;
        };
        let err = refused(&format!("{}?sslmode=require", pg.url));
        assert!(err.to_lowercase().contains("tls"), "{err}");
    }

    #[test]
    fn sslmode_and_sslrootcert_are_read_out_of_the_url() {
        let plain = target("postgres://u@h/db").unwrap();
        assert_eq!(plain.tls, None);
        let t =
            target("postgres://u@h/db?sslmode=verify-full&sslrootcert=/ca.pem&application_name=x")
                .unwrap();
        assert_eq!(t.url, "postgres://u@h/db?application_name=x");
        assert_eq!(t.tls, Some(Some("/ca.pem".into())));
        let t = target("postgres://u@h/db?sslmode=require").unwrap();
        assert_eq!((t.url.as_str(), t.tls), ("postgres://u@h/db", Some(None)));
        assert_eq!(
            target("postgres://u@h/db?sslmode=prefer").unwrap().tls,
            None
        );
        let err = target("postgres://u@h/db?sslmode=always").unwrap_err();
        assert!(err.contains("sslmode `always`"), "{err}");
    }
}
