//! What a component is trusted for: where it came from (its *source*) and
//! who signed it, judged by the policy of that source.
//!
//! ```toml
//! [trust]
//! policy = "off"                  # for sources no [[trust.sources]] names
//! [[trust.sources]]
//! prefix = "oci://registry.example.com/tools/"   # the longest prefix wins
//! policy = "require"              # require | warn | off
//! keys = ["/etc/toolhost/acme.pub"]   # PEM public keys (cosign.pub)
//! identities = [{ subject = "https://github.com/acme/tools/.github/workflows/release.yml@refs/heads/main",
//!                 issuer = "https://token.actions.githubusercontent.com" }]   # keyless signers
//! trusted_root = "/etc/toolhost/trusted_root.json"   # default: the public-good root of this build
//! [[trust.sources]]
//! prefix = "file:"                # components dropped into the directory
//! policy = "warn"
//! keys = ["/etc/toolhost/team.pub"]
//! ```
//!
//! A component pulled from a registry has the source
//! `oci://<registry>/<repository>` and is vouched for by cosign image
//! signatures ([`cosign`]) recorded in its lock; one dropped into the
//! plugins directory or uploaded has the source `file:<name>` and is vouched
//! for by `<name>.wasm.sig`, a signature of its bytes (`cosign sign-blob`,
//! `toolhost sign`), or `<name>.wasm.sigstore.json`, a Sigstore bundle
//! ([`sigstore`]: keyless, checked against `identities`, or key-based). `require`: no signature by a trusted key, no load (the
//! version serving keeps serving, the reason in `GET /plugins`); `warn`:
//! loaded, the reason among its warnings; `off`: not checked.

pub mod cosign;
pub mod keys;
pub mod sigstore;

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use keys::{PublicKey, SigningKey};
pub use sigstore::Identity;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Require,
    Warn,
    #[default]
    Off,
}

/// `[trust]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustConfig {
    /// The policy of sources no rule names.
    #[serde(default)]
    pub policy: Policy,
    /// The keys that policy trusts.
    #[serde(default)]
    pub keys: Vec<PathBuf>,
    /// The keyless signers it trusts (Sigstore bundles).
    #[serde(default)]
    pub identities: Vec<Identity>,
    /// The Sigstore trusted root bundles are checked against.
    #[serde(default)]
    pub trusted_root: Option<PathBuf>,
    #[serde(default)]
    pub sources: Vec<SourceConfig>,
}

/// `[[trust.sources]]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Sources starting with this (`oci://host/repo`, `file:`).
    pub prefix: String,
    pub policy: Policy,
    #[serde(default)]
    pub keys: Vec<PathBuf>,
    #[serde(default)]
    pub identities: Vec<Identity>,
    #[serde(default)]
    pub trusted_root: Option<PathBuf>,
}

struct Rule {
    prefix: String,
    policy: Policy,
    keys: Vec<PublicKey>,
    identities: Vec<Identity>,
    /// Loaded for rules that check anything.
    root: Option<Arc<sigstore::Root>>,
}

/// The policies, their keys read.
pub struct Trust {
    /// Longest prefix first; the last is the default (prefix "").
    rules: Vec<Rule>,
}

impl Default for Trust {
    fn default() -> Self {
        Trust {
            rules: vec![Rule {
                prefix: String::new(),
                policy: Policy::Off,
                keys: Vec::new(),
                identities: Vec::new(),
                root: None,
            }],
        }
    }
}

/// What vouches for a component.
pub enum Evidence<'a> {
    /// A signature of the component's bytes (`cosign sign-blob`).
    Blob {
        component: &'a [u8],
        signature: &'a [u8],
    },
    /// A cosign image signature of `payload`, which must name `digest`
    /// (the manifest the component is the layer of).
    Image {
        payload: &'a [u8],
        signature: &'a [u8],
        digest: &'a str,
    },
    /// A Sigstore bundle (JSON) over the component's bytes.
    Bundle {
        component: &'a [u8],
        bundle: &'a str,
    },
}

/// What the policy found: shown in `GET /plugins` as the plugin's
/// `provenance`.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub source: String,
    pub policy: Policy,
    /// The trusted keys whose signatures verified.
    pub signed_by: Vec<String>,
    /// Under `warn`: why it would have been refused.
    #[serde(skip)]
    pub warning: Option<String>,
}

impl Trust {
    /// The policies of `config`, every key file read and checked.
    pub fn from_config(config: &TrustConfig) -> Result<Trust, String> {
        let read = |paths: &[PathBuf], at: &str| -> Result<Vec<PublicKey>, String> {
            paths
                .iter()
                .map(|p| {
                    let text = std::fs::read_to_string(p)
                        .map_err(|e| format!("{at} key {}: {e}", p.display()))?;
                    PublicKey::from_pem(&text).map_err(|e| format!("{at} key {}: {e}", p.display()))
                })
                .collect()
        };
        let mut public_good: Option<Arc<sigstore::Root>> = None;
        let mut root = |policy: Policy, path: &Option<PathBuf>, at: &str| {
            if policy == Policy::Off {
                return Ok(None);
            }
            let loaded = match path {
                Some(p) => {
                    Arc::new(sigstore::Root::load(Some(p)).map_err(|e| format!("{at}: {e}"))?)
                }
                None => match &public_good {
                    Some(r) => r.clone(),
                    None => {
                        let r = Arc::new(sigstore::Root::load(None)?);
                        public_good = Some(r.clone());
                        r
                    }
                },
            };
            Ok::<_, String>(Some(loaded))
        };
        let mut rules = Vec::new();
        for s in &config.sources {
            if s.prefix.is_empty() {
                return Err(
                    "[[trust.sources]] prefix: empty (the default is [trust] policy)".into(),
                );
            }
            let at = format!("[[trust.sources]] `{}`", s.prefix);
            rules.push(Rule {
                prefix: s.prefix.clone(),
                policy: s.policy,
                keys: read(&s.keys, &at)?,
                identities: s.identities.clone(),
                root: root(s.policy, &s.trusted_root, &at)?,
            });
        }
        rules.sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
        rules.push(Rule {
            prefix: String::new(),
            policy: config.policy,
            keys: read(&config.keys, "[trust]")?,
            identities: config.identities.clone(),
            root: root(config.policy, &config.trusted_root, "[trust]")?,
        });
        for r in &rules {
            if r.policy != Policy::Off && r.keys.is_empty() && r.identities.is_empty() {
                let name = if r.prefix.is_empty() {
                    "[trust] policy"
                } else {
                    &r.prefix
                };
                return Err(format!(
                    "{name}: {} with no keys or identities to trust",
                    format!("{:?}", r.policy).to_lowercase()
                ));
            }
        }
        Ok(Trust { rules })
    }

    fn rule(&self, source: &str) -> &Rule {
        self.rules
            .iter()
            .find(|r| source.starts_with(&r.prefix))
            .unwrap_or_else(|| self.rules.last().expect("the default rule"))
    }

    /// The policy of `source`.
    pub fn policy(&self, source: &str) -> Policy {
        self.rule(source).policy
    }

    /// Judge what `source` serves as manifest `digest` by the cosign
    /// signatures (payload, signature) found for it.
    pub fn judge_signed(
        &self,
        source: &str,
        digest: &str,
        signatures: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<Verdict, String> {
        let evidence: Vec<Evidence> = signatures
            .iter()
            .map(|(payload, signature)| Evidence::Image {
                payload,
                signature,
                digest,
            })
            .collect();
        self.judge(source, &evidence)
    }

    /// Judge a component of `source` by what vouches for it: the verdict,
    /// or why it is refused.
    pub fn judge(&self, source: &str, evidence: &[Evidence]) -> Result<Verdict, String> {
        let rule = self.rule(source);
        let mut signed_by = Vec::new();
        let mut problems = Vec::new();
        for e in evidence {
            if let Evidence::Bundle { component, bundle } = e {
                let Some(root) = &rule.root else { continue };
                match root.verify(component, bundle, &rule.identities, &rule.keys) {
                    Ok(who) if !signed_by.contains(&who) => signed_by.push(who),
                    Ok(_) => {}
                    Err(e) => problems.push(e),
                }
                continue;
            }
            let (message, signature) = match e {
                Evidence::Blob {
                    component,
                    signature,
                } => (*component, *signature),
                Evidence::Bundle { .. } => continue,
                Evidence::Image {
                    payload,
                    signature,
                    digest,
                } => {
                    match cosign::signed_digest(payload) {
                        Ok(d) if d == *digest => {}
                        Ok(d) => {
                            problems.push(format!("a signature of another manifest ({d})"));
                            continue;
                        }
                        Err(e) => {
                            problems.push(e);
                            continue;
                        }
                    }
                    (*payload, *signature)
                }
            };
            let by: Vec<&PublicKey> = rule
                .keys
                .iter()
                .filter(|k| k.verifies(message, signature))
                .collect();
            if by.is_empty() {
                problems.push("a signature no trusted key verifies".into());
            }
            for k in by {
                if !signed_by.contains(&k.id) {
                    signed_by.push(k.id.clone());
                }
            }
        }
        let mut verdict = Verdict {
            source: source.to_owned(),
            policy: rule.policy,
            signed_by,
            warning: None,
        };
        if rule.policy == Policy::Off || !verdict.signed_by.is_empty() {
            return Ok(verdict);
        }
        let why = if evidence.is_empty() {
            "it is not signed".to_owned()
        } else {
            problems.join("; ")
        };
        let reason = format!(
            "{source}: the trust policy {} a signature by one of its {} trusted key(s) \
             or identities, and {why}",
            if rule.policy == Policy::Require {
                "requires"
            } else {
                "asks for"
            },
            rule.keys.len() + rule.identities.len()
        );
        match rule.policy {
            Policy::Require => Err(reason),
            _ => {
                verdict.warning = Some(reason);
                Ok(verdict)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_file(dir: &std::path::Path, name: &str) -> (SigningKey, PathBuf) {
        let key = SigningKey::from_pem(&SigningKey::generate().unwrap()).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, key.public().pem()).unwrap();
        (key, path)
    }

    #[test]
    fn the_longest_prefix_decides_and_refusals_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let (acme, acme_pub) = key_file(dir.path(), "acme.pub");
        let (team, team_pub) = key_file(dir.path(), "team.pub");
        let config: TrustConfig = toml::from_str(&format!(
            "policy = \"off\"\n\
             [[sources]]\nprefix = \"oci://r/\"\npolicy = \"warn\"\nkeys = [{team:?}]\n\
             [[sources]]\nprefix = \"oci://r/tools/\"\npolicy = \"require\"\nkeys = [{acme:?}]\n",
            team = team_pub,
            acme = acme_pub
        ))
        .unwrap();
        let trust = Trust::from_config(&config).unwrap();
        assert_eq!(trust.policy("oci://r/tools/calc"), Policy::Require);
        assert_eq!(trust.policy("oci://r/other"), Policy::Warn);
        assert_eq!(trust.policy("file:calc"), Policy::Off);

        let bytes = b"\0asm component";
        let good = acme.sign(bytes).unwrap();
        let v = trust
            .judge(
                "oci://r/tools/calc",
                &[Evidence::Blob {
                    component: bytes,
                    signature: &good,
                }],
            )
            .unwrap();
        assert_eq!(v.signed_by, vec![acme.public().id]);
        let unsigned = trust.judge("oci://r/tools/calc", &[]).unwrap_err();
        assert!(
            unsigned.contains("requires") && unsigned.contains("not signed"),
            "{unsigned}"
        );
        let by_team = team.sign(bytes).unwrap();
        let wrong = trust
            .judge(
                "oci://r/tools/calc",
                &[Evidence::Blob {
                    component: bytes,
                    signature: &by_team,
                }],
            )
            .unwrap_err();
        assert!(wrong.contains("no trusted key verifies"), "{wrong}");
        let tampered = trust
            .judge(
                "oci://r/tools/calc",
                &[Evidence::Blob {
                    component: b"\0asm componenT",
                    signature: &good,
                }],
            )
            .unwrap_err();
        assert!(tampered.contains("no trusted key verifies"), "{tampered}");
        let warned = trust.judge("oci://r/other", &[]).unwrap();
        assert!(warned.warning.unwrap().contains("asks for"));
        assert!(trust.judge("file:calc", &[]).unwrap().warning.is_none());
    }

    #[test]
    fn image_signatures_must_name_the_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let (acme, acme_pub) = key_file(dir.path(), "acme.pub");
        let trust = Trust::from_config(&TrustConfig {
            policy: Policy::Require,
            keys: vec![acme_pub],
            ..Default::default()
        })
        .unwrap();
        let digest = format!("sha256:{}", "1".repeat(64));
        let payload = cosign::payload("r/tools/calc", &digest);
        let sig = acme.sign(&payload).unwrap();
        let image = |d: &str| {
            trust.judge(
                "oci://r/tools/calc",
                &[Evidence::Image {
                    payload: &payload,
                    signature: &sig,
                    digest: d,
                }],
            )
        };
        assert!(image(&digest).is_ok());
        let other = format!("sha256:{}", "2".repeat(64));
        assert!(image(&other).unwrap_err().contains("another manifest"));
    }

    #[test]
    fn a_policy_with_no_keys_or_an_unreadable_key_is_refused() {
        let none = Trust::from_config(&TrustConfig {
            policy: Policy::Require,
            ..Default::default()
        });
        assert!(none.err().unwrap().contains("no keys"));
        let missing = Trust::from_config(&TrustConfig {
            policy: Policy::Warn,
            keys: vec!["/nonexistent/k.pub".into()],
            ..Default::default()
        });
        assert!(missing.err().unwrap().contains("/nonexistent/k.pub"));
    }
}
