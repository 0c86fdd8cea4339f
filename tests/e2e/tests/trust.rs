//! Where components come from and who signed them (#38 items 1, 2, 5),
//! against real parts: Debian's `docker-registry` (with and without an
//! htpasswd login), ORAS reading what `toolhost push` wrote, and OpenSSL
//! making and checking cosign's blob-signature format. The server resolves
//! `source = "oci://…"` itself, locks the digest, refuses a component its
//! lock does not name or its trust policy does not accept (the version
//! serving keeps serving), and re-fetches by the locked digest.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::registry::{PASSWORD, Registry, USER, oras_pull, oras_push};
use toolhost_e2e::*;

fn wasm(name: &str) -> PathBuf {
    component(name).0
}

/// The manifest of example plugin `name` with `source` added.
fn sourced(name: &str, reference: &str) -> String {
    let own = component(name)
        .1
        .map(|p| std::fs::read_to_string(p).unwrap())
        .unwrap_or_default();
    format!("source = \"{reference}\"\n{own}")
}

/// Wait until plugin `name`'s status satisfies `ok`; the last status.
fn wait_status(s: &Server, name: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    let found = wait_for(Duration::from_secs(30), || {
        last = s.plugin(name).unwrap_or(Value::Null);
        ok(&last).then_some(())
    });
    assert!(found.is_some(), "{name}: {last:#}\n{}", s.log());
    last
}

fn error_of(p: &Value) -> &str {
    p["error"].as_str().unwrap_or_default()
}

#[test]
fn pushes_are_read_by_oras_and_registry_logins_come_from_secrets() {
    let Some(reg) = Registry::start(true) else {
        return;
    };
    let target = format!("127.0.0.1:{}/tools/calc:1.0", reg.port);
    let reference = format!("oci://{target}");
    let calc = wasm("calc");
    let calc_bytes = std::fs::read(&calc).unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("toolhost.toml");
    std::fs::write(
        &config,
        format!(
            "[oci.logins.\"127.0.0.1:{}\"]\nusername = \"{USER}\"\nsecret = \"REG_PASSWORD\"\n",
            reg.port
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let login = [("TOOLHOST_SECRET_REG_PASSWORD", PASSWORD)];

    // No login: refused, and the message says where a login goes.
    let (ok, out) = run_toolhost(&["push", &reference, calc.to_str().unwrap()], &[]);
    assert!(!ok && out.contains("[oci.logins"), "{out}");
    // A login whose secret is not set says which secret.
    let push = [
        "push",
        &reference,
        calc.to_str().unwrap(),
        "--config",
        config,
    ];
    let (ok, out) = run_toolhost(&push, &[]);
    assert!(!ok && out.contains("TOOLHOST_SECRET_REG_PASSWORD"), "{out}");
    let (ok, out) = run_toolhost(&push, &login);
    assert!(ok && out.contains("sha256:"), "{out}");

    // ORAS, logged in, reads exactly the component; anonymous, nothing.
    assert_eq!(oras_pull(&target).unwrap(), calc_bytes);
    let anonymous = reqwest::blocking::get(format!(
        "http://127.0.0.1:{}/v2/tools/calc/manifests/1.0",
        reg.port
    ))
    .unwrap();
    assert_eq!(anonymous.status(), 401);

    // toolhost pull with the login.
    let plugins = work.path().join("plugins");
    let (ok, out) = run_toolhost(
        &[
            "pull",
            &reference,
            "--plugins",
            plugins.to_str().unwrap(),
            "--config",
            config,
        ],
        &login,
    );
    assert!(ok, "{out}");
    assert_eq!(
        std::fs::read(plugins.join("calc.wasm")).unwrap(),
        calc_bytes
    );

    // The server resolves `source` itself, with the login from [secrets].
    let dir = PluginsDir::new().write("calc.toml", sourced("calc", &reference));
    let server_config = format!(
        "[oci.logins.\"127.0.0.1:{}\"]\nusername = \"{USER}\"\nsecret = \"REG_PASSWORD\"\n\
         [secrets]\nREG_PASSWORD = \"{PASSWORD}\"\n",
        reg.port
    );
    let s = Server::start_with(dir, Some(&server_config)).unwrap();
    let p = wait_status(&s, "calc", |p| p["state"] == "ready");
    assert_eq!(p["version"], sha256_hex(&calc_bytes));
    let (status, body) = s.invoke("calc_evaluate", json!({"expression": "6*7"}));
    assert_eq!(status, 200, "{body}");
    assert!(s.plugins_dir().join("calc.oci.lock").is_file());
    drop(s);

    // A wrong password: refused, with the reason, and no component written.
    let dir = PluginsDir::new().write("calc.toml", sourced("calc", &reference));
    let wrong = server_config.replace(PASSWORD, "not-the-password");
    let s = Server::start_with(dir, Some(&wrong)).unwrap();
    let p = wait_status(&s, "calc", |p| p["state"] == "failed");
    assert!(error_of(&p).contains("refused the login"), "{p:#}");
    assert!(!s.plugins_dir().join("calc.wasm").exists());
}

/// `toolhost keygen` in `dir`: the private key's path and the key's id.
fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let base = dir.join(name);
    let (ok, out) = run_toolhost(&["keygen", base.to_str().unwrap()], &[]);
    assert!(ok, "{out}");
    let id = out.trim().rsplit(' ').next().unwrap().to_owned();
    assert!(id.starts_with("sha256:"), "{out}");
    (base.with_extension("key"), id)
}

fn sign(target: &str, key: &Path) {
    let (ok, out) = run_toolhost(&["sign", "--key", key.to_str().unwrap(), target], &[]);
    assert!(ok, "{out}");
}

#[test]
fn the_trust_policy_decides_what_is_served() {
    let Some(reg) = Registry::start(false) else {
        return;
    };
    let keys = tempfile::tempdir().unwrap();
    let (acme, acme_id) = keygen(keys.path(), "acme");
    let (other, _) = keygen(keys.path(), "other");
    let acme_pub = keys.path().join("acme.pub");
    let at = |repo: &str| format!("oci://127.0.0.1:{}/tools/{repo}:1.0", reg.port);
    let (calc, checksum) = (wasm("calc"), wasm("checksum"));
    let calc_bytes = std::fs::read(&calc).unwrap();
    let checksum_bytes = std::fs::read(&checksum).unwrap();
    let (ok, out) = run_toolhost(&["push", &at("calc"), calc.to_str().unwrap()], &[]);
    assert!(ok, "{out}");
    sign(&at("calc"), &acme);
    // A component a real client pushed, signed with toolhost later.
    oras_push(&at("checksum")["oci://".len()..], &checksum);

    let config = format!(
        "[trust]\npolicy = \"off\"\n\
         [[trust.sources]]\nprefix = \"oci://127.0.0.1:{port}/tools/\"\npolicy = \"require\"\nkeys = [{acme_pub:?}]\n\
         [[trust.sources]]\nprefix = \"file:\"\npolicy = \"require\"\nkeys = [{acme_pub:?}]\n",
        port = reg.port
    );
    let dir = PluginsDir::new()
        .write("calc.toml", sourced("calc", &at("calc")))
        .write("checksum.toml", sourced("checksum", &at("checksum")));
    let s = Server::start_with(dir, Some(&config)).unwrap();
    let p = wait_status(&s, "calc", |p| p["state"] == "ready");
    assert_eq!(p["provenance"]["signed_by"], json!([acme_id]), "{p:#}");
    assert_eq!(p["provenance"]["policy"], "require");
    let p = wait_status(&s, "checksum", |p| p["state"] == "failed");
    assert!(error_of(&p).contains("not signed"), "{p:#}");
    assert!(!s.plugins_dir().join("checksum.wasm").exists());
    assert!(!s.tool_ids().iter().any(|t| t.starts_with("checksum_")));

    // Signed by a key the policy does not trust: still refused.
    sign(&at("checksum"), &other);
    let touch = |name: &str, reference: &str| {
        write_then_rename(
            &s.plugins_dir().join(format!("{name}.toml")),
            format!(
                "{}# {:?}\n",
                sourced(name, reference),
                std::time::Instant::now()
            )
            .as_bytes(),
        )
    };
    touch("checksum", &at("checksum"));
    wait_status(&s, "checksum", |p| {
        error_of(p).contains("no trusted key verifies")
    });
    // Signed by the trusted key too: served.
    sign(&at("checksum"), &acme);
    touch("checksum", &at("checksum"));
    let p = wait_status(&s, "checksum", |p| p["state"] == "ready");
    assert_eq!(p["provenance"]["signed_by"], json!([acme_id]));

    // calc.wasm replaced by other bytes: refused, the locked version serves.
    write_then_rename(&s.plugins_dir().join("calc.wasm"), &checksum_bytes);
    let p = wait_status(&s, "calc", |p| p["state"] == "failed");
    assert!(
        error_of(&p).contains("is not what calc.oci.lock locks"),
        "{p:#}"
    );
    let (status, body) = s.invoke("calc_evaluate", json!({"expression": "6*7"}));
    assert_eq!(status, 200, "{body}");

    // The tag moves; calc.wasm removed: the locked digest is fetched again.
    oras_push(&at("calc")["oci://".len()..], &checksum);
    std::fs::remove_file(s.plugins_dir().join("calc.wasm")).unwrap();
    touch("calc", &at("calc"));
    let p = wait_status(&s, "calc", |p| {
        p["state"] == "ready" && p["error"].is_null()
    });
    assert_eq!(p["version"], sha256_hex(&calc_bytes));
    assert_eq!(
        std::fs::read(s.plugins_dir().join("calc.wasm")).unwrap(),
        calc_bytes
    );

    // A file dropped in: unsigned, refused; signed by OpenSSL in cosign's
    // blob format, served.
    let sums = s.plugins_dir().join("sums.wasm");
    write_then_rename(&sums, &checksum_bytes);
    let p = wait_status(&s, "sums", |p| p["state"] == "failed");
    assert!(error_of(&p).contains("file:sums"), "{p:#}");
    let der = Command::new("openssl")
        .args(["dgst", "-sha256", "-sign"])
        .arg(&acme)
        .arg(&sums)
        .output()
        .unwrap();
    assert!(der.status.success());
    let b64 = Command::new("base64")
        .arg("-w0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(&der.stdout)?;
            c.wait_with_output()
        })
        .unwrap();
    std::fs::write(s.plugins_dir().join("sums.wasm.sig"), &b64.stdout).unwrap();
    let p = wait_status(&s, "sums", |p| p["state"] == "ready");
    assert_eq!(p["provenance"]["source"], "file:sums");

    // And OpenSSL verifies what `toolhost sign` writes for a file.
    let file = keys.path().join("c.wasm");
    std::fs::write(&file, &calc_bytes).unwrap();
    sign(file.to_str().unwrap(), &acme);
    let sig = std::fs::read_to_string(keys.path().join("c.wasm.sig")).unwrap();
    let der_path = keys.path().join("c.der");
    std::fs::write(&der_path, base64_decode(&sig)).unwrap();
    let verified = Command::new("openssl")
        .args(["dgst", "-sha256", "-verify"])
        .arg(&acme_pub)
        .arg("-signature")
        .arg(&der_path)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&verified.stdout).contains("Verified OK"),
        "{verified:?}"
    );
}

fn base64_decode(text: &str) -> Vec<u8> {
    let out = Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(text.trim().as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    out.stdout
}

#[test]
fn uploads_carry_their_signature_and_deletes_take_the_lock() {
    use reqwest::blocking::multipart;
    const TOKEN: &str = "test-admin-token-0123456789";
    let keys = tempfile::tempdir().unwrap();
    let (acme, _) = keygen(keys.path(), "acme");
    let (other, _) = keygen(keys.path(), "other");
    let acme_pub = keys.path().join("acme.pub");
    let calc = wasm("calc");
    let calc_bytes = std::fs::read(&calc).unwrap();
    let signed = keys.path().join("calc.wasm");
    std::fs::write(&signed, &calc_bytes).unwrap();
    let config = format!(
        "[trust]\npolicy = \"off\"\n\
         [[trust.sources]]\nprefix = \"file:\"\npolicy = \"require\"\nkeys = [{acme_pub:?}]\n"
    );
    let s = Server::start_env(
        PluginsDir::new(),
        Some(&config),
        &[("TOOLHOST_ADMIN_TOKEN", TOKEN)],
    )
    .unwrap();
    let client = reqwest::blocking::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let upload = |signature: Option<&Path>| {
        let mut form = multipart::Form::new().part(
            "component",
            multipart::Part::bytes(calc_bytes.clone()).file_name("maths.wasm"),
        );
        if let Some(sig) = signature {
            form = form.part(
                "signature",
                multipart::Part::bytes(std::fs::read(sig).unwrap()),
            );
        }
        let r = client
            .put(s.url("/plugins/maths"))
            .bearer_auth(TOKEN)
            .multipart(form)
            .send()
            .unwrap();
        (
            r.status().as_u16(),
            r.json::<Value>().unwrap_or(Value::Null),
        )
    };
    // Unsigned, then signed by an untrusted key: refused, nothing written.
    let (status, body) = upload(None);
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("not signed"), "{body}");
    sign(signed.to_str().unwrap(), &other);
    let (status, body) = upload(Some(&keys.path().join("calc.wasm.sig")));
    assert_eq!(status, 422, "{body}");
    assert!(
        body.to_string().contains("no trusted key verifies"),
        "{body}"
    );
    assert!(!s.plugins_dir().join("maths.wasm").exists());
    // Signed by the trusted key: served, the signature kept beside it.
    sign(signed.to_str().unwrap(), &acme);
    let (status, body) = upload(Some(&keys.path().join("calc.wasm.sig")));
    assert_eq!(status, 201, "{body}");
    assert!(s.plugins_dir().join("maths.wasm.sig").is_file());
    let (status, out) = s.invoke("maths_evaluate", json!({"expression": "2+2"}));
    assert_eq!(status, 200, "{out}");
    // A manifest naming a registry source is refused: the component comes
    // from there.
    let form = multipart::Form::new()
        .part("component", multipart::Part::bytes(calc_bytes.clone()))
        .text("manifest", "source = \"oci://127.0.0.1:1/tools/calc:1\"\n");
    let r = client
        .put(s.url("/plugins/maths"))
        .bearer_auth(TOKEN)
        .multipart(form)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 422);
    // Deleted: the component and what vouched for it.
    std::fs::write(
        s.plugins_dir().join("maths.oci.lock"),
        "left = \"behind\"\n",
    )
    .unwrap();
    let r = client
        .delete(s.url("/plugins/maths"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text());
    for f in ["maths.wasm", "maths.wasm.sig", "maths.oci.lock"] {
        assert!(!s.plugins_dir().join(f).exists(), "{f} left behind");
    }
}

/// A stdio MCP server's packages: installed from their locks by `toolhost
/// mcp-install` (tests/mcpservers/install.sh), checked before the server
/// starts. A copy of that install with one file of a package changed, a
/// file added, or its lock changed is refused with the reason (no node is
/// started for it; the version serving keeps serving); the same copy
/// restored loads again (Docker needed only for a version to serve).
#[test]
fn a_stdio_servers_packages_are_checked_against_their_locks() {
    let install = toolhost_e2e::services::mcp_servers_bin()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_owned();
    let copy = tempfile::tempdir().unwrap();
    let mount = copy.path().join("mcp");
    let ok = Command::new("cp")
        .arg("-a")
        .arg(&install)
        .arg(&mount)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let manifest = format!(
        "[mcp]\ncommand = [\"node\", \"/opt/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js\", \"stdio\"]\n\
         mount = \"{}\"\n{CONTAINER_INIT_TIMEOUT}",
        mount.display()
    );
    let s = Server::start(PluginsDir::new().folder("evs", &[("evs.toml", &manifest)]));
    let index = mount.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let original = std::fs::read(&index).unwrap();
    let reload = |n: u32| {
        write_then_rename(
            &s.plugins_dir().join("evs/evs.toml"),
            format!("{manifest}# {n}\n").as_bytes(),
        )
    };
    let nodes = s.containers().len();
    // A package's file changed.
    let mut changed = original.clone();
    changed.extend_from_slice(b"\n// planted\n");
    std::fs::write(&index, &changed).unwrap();
    reload(1);
    let record = std::fs::read_to_string(mount.join(".toolhost-mount.lock")).unwrap();
    let files: u64 = record
        .lines()
        .find_map(|l| l.strip_prefix("files = "))
        .unwrap()
        .parse()
        .unwrap();
    let same = format!("installed files ({files})");
    // Settled: a load queued behind the refused one shows its error while
    // it is `compiling`.
    let p = wait_status(&s, "evs", |p| {
        error_of(p).contains(&same) && p["state"] != "compiling"
    });
    assert_eq!(p["state"], "failed", "{p}");
    // No node started for it (the version serving keeps its own).
    assert_eq!(
        s.containers().len(),
        nodes,
        "a node started for a refused mount"
    );
    // Restored, then a file added.
    std::fs::write(&index, &original).unwrap();
    std::fs::write(mount.join("node_modules/planted.js"), "x").unwrap();
    reload(2);
    let added = format!("installed files ({})", files + 1);
    wait_status(&s, "evs", |p| error_of(p).contains(&added));
    std::fs::remove_file(mount.join("node_modules/planted.js")).unwrap();
    // The lock changed since the install.
    let lock = mount.join("package-lock.json");
    let text = std::fs::read_to_string(&lock).unwrap();
    std::fs::write(&lock, format!("{text}\n")).unwrap();
    reload(3);
    wait_status(&s, "evs", |p| {
        error_of(p).contains("package-lock.json changed")
    });
    std::fs::write(&lock, text).unwrap();
    if !require_docker() {
        return;
    }
    reload(4);
    let p = wait_status(&s, "evs", |p| p["state"] == "ready" && p["error"].is_null());
    assert!(
        p["provenance"]["installed_from_locks"]["tree"].is_string(),
        "{p}"
    );
}
