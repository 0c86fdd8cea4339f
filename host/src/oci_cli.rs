//! The commands that move components between registries and the plugins
//! directory, sign them and check them: `toolhost pull`, `push`, `sign`,
//! `verify`, `keygen`; and `mcp-install`, which installs a stdio MCP
//! server's packages from their locks.
//! Registry logins, secrets and the trust policy come from the server's
//! config file when one is given (`--config` / `TOOLHOST_CONFIG`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Subcommand;

use toolhost::config::Config;
use toolhost::credentials::Secrets;
use toolhost::oci::{Client, Lock, Reference};
use toolhost::trust::{Evidence, SigningKey, Trust};

#[derive(Subcommand)]
pub enum OciCommand {
    /// Pull a component from an OCI registry (`oci://host/repo:tag` or
    /// `…@sha256:…`, the CNCF wasm layout) into the plugins directory as
    /// `<name>.wasm`, every byte checked against its digest. The digest the
    /// reference resolved to is recorded in `<name>.oci.lock`, with the
    /// manifest and its cosign signatures; later pulls fetch that digest,
    /// wherever the tag has moved, until `--update`. The config's trust
    /// policy is applied: a component it refuses is not written.
    Pull {
        /// The reference.
        reference: String,
        /// The plugins directory.
        #[arg(long, env = "TOOLHOST_PLUGINS", default_value = "plugins")]
        plugins: PathBuf,
        /// The plugin's name [default: the repository's last part].
        #[arg(long)]
        name: Option<String>,
        /// Resolve the reference again and rewrite the lock.
        #[arg(long)]
        update: bool,
        /// The server's config file: `[oci.logins]`, `[secrets]`, `[trust]`.
        #[arg(long, env = "TOOLHOST_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Push a component to an OCI registry in the CNCF wasm layout (what
    /// ORAS, `wkg` and `toolhost pull` read); prints the manifest's digest.
    Push {
        /// `oci://host/repo:tag`.
        reference: String,
        /// The component.
        component: PathBuf,
        /// The config file with the registry's login (`[oci.logins]`).
        #[arg(long, env = "TOOLHOST_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Sign a component or a container image with an ECDSA P-256 key, as
    /// cosign does: a file gets `<file>.sig` (`cosign sign-blob`'s format),
    /// a registry reference (a component or an image) a cosign image
    /// signature of the digest it resolves to (the `sha256-<hex>.sig` tag,
    /// `cosign sign --key`'s format).
    Sign {
        /// A `.wasm` file or an `oci://` reference.
        target: String,
        /// The private key (PKCS#8 PEM: `toolhost keygen`, or `openssl
        /// genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`).
        #[arg(long)]
        key: PathBuf,
        /// The config file with the registry's login (`[oci.logins]`).
        #[arg(long, env = "TOOLHOST_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Check a component's signature as a server's `require` policy would,
    /// offline: a Sigstore bundle (keyless: against an identity and issuer;
    /// key-based: against `--key`) or a cosign blob signature (`--key`).
    /// Prints who signed it, or why it is refused (exit status 1).
    Verify {
        /// The file signed.
        file: PathBuf,
        /// A Sigstore bundle (`*.sigstore.json`) [default:
        /// `<file>.sigstore.json`, else `<file>.sig` as a blob signature].
        #[arg(long)]
        bundle: Option<PathBuf>,
        /// A cosign blob signature (base64) instead of a bundle.
        #[arg(long, conflicts_with = "bundle")]
        signature: Option<PathBuf>,
        /// The signer's certificate identity (SAN), exactly.
        #[arg(long, requires = "certificate_oidc_issuer")]
        certificate_identity: Option<String>,
        /// The OIDC issuer of that identity.
        #[arg(long, requires = "certificate_identity")]
        certificate_oidc_issuer: Option<String>,
        /// A trusted public key (PEM, ECDSA P-256).
        #[arg(long)]
        key: Option<PathBuf>,
        /// The Sigstore trusted root [default: the public-good root of
        /// this build].
        #[arg(long)]
        trusted_root: Option<PathBuf>,
    },
    /// Install the packages of a stdio MCP server's mount directory from
    /// its locks: `npm ci` from `package-lock.json` (every package with an
    /// integrity hash) and `pip install --require-hashes` from
    /// `requirements.txt` (into `python/`), then record what was installed
    /// in `.toolhost-mount.lock`, which the server checks before the server
    /// starts.
    McpInstall {
        /// The mount directory.
        dir: PathBuf,
        /// The Python whose pip installs (the node's minor version, for
        /// compiled wheels).
        #[arg(long, default_value = "python3")]
        python: String,
    },
    /// Make a signing key pair: `<name>.key` (private, mode 0600) and
    /// `<name>.pub` (the public key `[trust]` lists, as cosign.pub is).
    Keygen {
        /// The path and base name of the two files.
        name: PathBuf,
    },
}

fn config(path: Option<&Path>) -> anyhow::Result<Config> {
    Ok(match path {
        Some(p) => Config::from_file(p)?,
        None => Config::default(),
    })
}

fn client(config: &Config, reference: &Reference) -> anyhow::Result<Client> {
    let secrets = Secrets::new(config.secrets.0.clone());
    config
        .oci
        .logins
        .client(reference, &secrets)
        .map_err(anyhow::Error::msg)
}

pub async fn run(command: OciCommand) -> anyhow::Result<()> {
    match command {
        OciCommand::Pull {
            reference,
            plugins,
            name,
            update,
            config: path,
        } => {
            pull(
                &reference,
                &plugins,
                name,
                update,
                &config(path.as_deref())?,
            )
            .await
        }
        OciCommand::Push {
            reference,
            component,
            config: path,
        } => {
            let config = config(path.as_deref())?;
            let parsed = Reference::parse(&reference).map_err(anyhow::Error::msg)?;
            let bytes = std::fs::read(&component)
                .with_context(|| format!("failed to read {}", component.display()))?;
            anyhow::ensure!(
                bytes.starts_with(b"\0asm"),
                "{} is not a WebAssembly file",
                component.display()
            );
            let title = component
                .file_name()
                .map_or("component.wasm".into(), |n| n.to_string_lossy());
            let digest = toolhost::oci::push(&client(&config, &parsed)?, &parsed, &bytes, &title)
                .await
                .map_err(anyhow::Error::msg)?;
            println!("pushed {} to {reference}: {digest}", component.display());
            Ok(())
        }
        OciCommand::Sign {
            target,
            key,
            config: path,
        } => {
            let text = std::fs::read_to_string(&key)
                .with_context(|| format!("failed to read {}", key.display()))?;
            let key = SigningKey::from_pem(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", key.display()))?;
            sign(&target, &key, &config(path.as_deref())?).await
        }
        OciCommand::Verify {
            file,
            bundle,
            signature,
            certificate_identity,
            certificate_oidc_issuer,
            key,
            trusted_root,
        } => {
            let config = toolhost::trust::TrustConfig {
                policy: toolhost::trust::Policy::Require,
                keys: key.into_iter().collect(),
                identities: certificate_identity
                    .zip(certificate_oidc_issuer)
                    .map(|(subject, issuer)| toolhost::trust::Identity { subject, issuer })
                    .into_iter()
                    .collect(),
                trusted_root,
                sources: Vec::new(),
            };
            let trust = Trust::from_config(&config).map_err(anyhow::Error::msg)?;
            let bytes = std::fs::read(&file)
                .with_context(|| format!("failed to read {}", file.display()))?;
            let with = |ext: &str| PathBuf::from(format!("{}.{ext}", file.display()));
            let (bundle, signature) = match (bundle, signature) {
                (None, None) if !with("sigstore.json").is_file() => (None, Some(with("sig"))),
                (None, None) => (Some(with("sigstore.json")), None),
                given => given,
            };
            let read = |p: &Path| {
                std::fs::read_to_string(p)
                    .with_context(|| format!("failed to read {}", p.display()))
            };
            let bundle = bundle.as_deref().map(read).transpose()?;
            let signature = signature
                .as_deref()
                .map(read)
                .transpose()?
                .map(|t| toolhost::trust::keys::base64_decode(&t))
                .transpose()
                .map_err(anyhow::Error::msg)?;
            let evidence: Vec<Evidence> = match (&bundle, &signature) {
                (Some(bundle), _) => vec![Evidence::Bundle {
                    component: &bytes,
                    bundle,
                }],
                (_, Some(signature)) => vec![Evidence::Blob {
                    component: &bytes,
                    signature,
                }],
                _ => Vec::new(),
            };
            let verdict = trust
                .judge(&format!("file:{}", file.display()), &evidence)
                .map_err(anyhow::Error::msg)?;
            println!(
                "OK: {} signed by {}",
                file.display(),
                verdict.signed_by.join(", ")
            );
            Ok(())
        }
        OciCommand::McpInstall { dir, python } => {
            let record =
                toolhost::mcpserver::mount::install(&dir, &python).map_err(anyhow::Error::msg)?;
            println!(
                "{}: {} files installed from {}; recorded in {}",
                dir.display(),
                record.files,
                [
                    record.npm_lock.as_ref().map(|_| "package-lock.json"),
                    record.pip_lock.as_ref().map(|_| "requirements.txt"),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" and "),
                toolhost::mcpserver::mount::RECORD
            );
            Ok(())
        }
        OciCommand::Keygen { name } => {
            let private = name.with_extension("key");
            let public = name.with_extension("pub");
            anyhow::ensure!(
                !private.exists(),
                "{} exists: not overwritten",
                private.display()
            );
            let pem = SigningKey::generate().map_err(anyhow::Error::msg)?;
            let key = SigningKey::from_pem(&pem).map_err(anyhow::Error::msg)?;
            {
                use std::io::Write;
                use std::os::unix::fs::OpenOptionsExt;
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&private)?;
                f.write_all(pem.as_bytes())?;
            }
            std::fs::write(&public, key.public().pem())?;
            println!(
                "{} (keep it secret) and {}: {}",
                private.display(),
                public.display(),
                key.public().id
            );
            Ok(())
        }
    }
}

async fn sign(target: &str, key: &SigningKey, config: &Config) -> anyhow::Result<()> {
    use toolhost::trust::keys::base64 as b64;
    if !target.starts_with("oci://") {
        let bytes = std::fs::read(target).with_context(|| format!("failed to read {target}"))?;
        let signature = key.sign(&bytes).map_err(anyhow::Error::msg)?;
        let out = format!("{target}.sig");
        std::fs::write(&out, b64(&signature))?;
        println!("{out}: signed by {}", key.public().id);
        return Ok(());
    }
    let reference = Reference::parse(target).map_err(anyhow::Error::msg)?;
    let client = client(config, &reference)?;
    // What is signed is the digest the reference resolves to, checked
    // against the bytes the registry served (a component or an image).
    let digest = toolhost::oci::resolve(&client, &reference)
        .await
        .map_err(anyhow::Error::msg)?;
    let payload = toolhost::trust::cosign::payload(&reference.repository_path(), &digest);
    let signature = key.sign(&payload).map_err(anyhow::Error::msg)?;
    toolhost::oci::push_signature(&client, &reference, &digest, &payload, &b64(&signature))
        .await
        .map_err(anyhow::Error::msg)?;
    println!(
        "{}@{digest}: signed by {}",
        reference.source(),
        key.public().id
    );
    Ok(())
}

async fn pull(
    text: &str,
    plugins: &Path,
    name: Option<String>,
    update: bool,
    config: &Config,
) -> anyhow::Result<()> {
    let reference = Reference::parse(text).map_err(anyhow::Error::msg)?;
    let name = name.unwrap_or_else(|| {
        reference
            .repository
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned()
    });
    anyhow::ensure!(
        toolhost::tool::is_valid_plugin_name(&name),
        "`{name}` is not a plugin name: give one with --name"
    );
    let lock_path = plugins.join(format!("{name}.oci.lock"));
    let lock = Lock::read(&lock_path).map_err(anyhow::Error::msg)?;
    let locked = match &lock {
        Some(l) if !update && l.reference == text => Some(l.digest.clone()),
        Some(l) if !update => anyhow::bail!(
            "{} locks {name} to {}, not {text}: pull with --update to change it",
            lock_path.display(),
            l.reference
        ),
        _ => None,
    };
    let pulled = toolhost::oci::pull(&client(config, &reference)?, &reference, locked.as_deref())
        .await
        .map_err(anyhow::Error::msg)?;
    let trust = Trust::from_config(&config.trust).map_err(anyhow::Error::msg)?;
    let verdict = trust
        .judge_signed(&reference.source(), &pulled.manifest, &pulled.signatures)
        .map_err(|e| anyhow::anyhow!("refused, nothing written: {e}"))?;
    std::fs::create_dir_all(plugins)?;
    // Written aside and renamed into place: the server hot-loads the whole
    // file. The lock first: a server seeing the new component checks it
    // against the new lock.
    let lock = Lock::of(text, &pulled);
    let part = plugins.join(format!(".{name}.oci.lock.part"));
    std::fs::write(&part, lock.text())?;
    std::fs::rename(&part, &lock_path)?;
    let part = plugins.join(format!(".{name}.wasm.part"));
    std::fs::write(&part, &pulled.component)?;
    std::fs::rename(&part, plugins.join(format!("{name}.wasm")))?;
    println!(
        "{name}.wasm: {} bytes from {text} ({}), locked in {}; {}",
        pulled.component.len(),
        pulled.manifest,
        lock_path.display(),
        match (verdict.signed_by.as_slice(), &verdict.warning) {
            (_, Some(w)) => format!("warning: {w}"),
            ([], None) => format!("{} signature(s), not checked", pulled.signatures.len()),
            (by, None) => format!("signed by {}", by.join(", ")),
        }
    );
    Ok(())
}
