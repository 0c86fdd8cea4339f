//! The tool registry (`<data>/registry.db`): statuses and statistics
//! survive a crash (SIGKILL) and a restart; a damaged registry, or one
//! another server holds, stops the start with the reason and is left as it
//! was.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_e2e::*;

const ADMIN: &str = "admin-admin-admin-admin";
const CONFIG: &str =
    "[registry]\nflush_ms = 100\n[auth]\nadmin_token = \"admin-admin-admin-admin\"\n";

#[test]
fn statuses_and_statistics_survive_a_crash() {
    let mut s = Server::start_with(
        PluginsDir::new()
            .add("calc", "calc")
            .add("hostile", "hostile"),
        Some(CONFIG),
    )
    .unwrap();
    for expression in ["1+1", "2*3", "nope("] {
        s.invoke("calc_evaluate", json!({ "expression": expression }));
    }
    assert_eq!(s.set_status(ADMIN, "hostile_spin", "inactive").0, 200);
    let (_, before) = s.get("/tools/calc_evaluate");
    assert_eq!(before["stats"]["call_count"], 3, "{before}");
    // Past a flush, the process is killed: no shutdown, no last flush.
    std::thread::sleep(Duration::from_millis(600));
    s.restart().unwrap();

    let (_, after) = s.get("/tools/calc_evaluate");
    assert_eq!(after["stats"], before["stats"], "{after}");
    assert_eq!(after["stats"]["error_count"], 1);
    assert!(after["stats"]["p95_latency_ms"].is_number(), "{after}");
    let (status, body) = s.get("/tools/hostile_spin");
    assert_eq!(
        (status, &body["status"]),
        (200, &json!("inactive")),
        "{body}"
    );
    let (status, body) = s.invoke("hostile_spin", json!({}));
    assert_eq!((status, kind(&body)), (409, "not_active"), "{body}");
    assert!(!s.tool_ids().iter().any(|t| t == "hostile_spin"));

    // New calls add to what was there.
    s.invoke("calc_evaluate", json!({ "expression": "4" }));
    let (_, now) = s.get("/tools/calc_evaluate");
    assert_eq!(now["stats"]["call_count"], 4, "{now}");

    // The audit log is in the registry: the change made before the crash
    // is still there; a change refused as a conflict is no action taken.
    assert_eq!(s.set_status(ADMIN, "hostile_spin", "building").0, 409);
    assert_eq!(s.set_status(ADMIN, "hostile_spin", "active").0, 200);
    let audit = |query: &str, token: Option<&str>| {
        let mut r = s.client().get(s.url(&format!("/admin/audit{query}")));
        if let Some(token) = token {
            r = r.bearer_auth(token);
        }
        let r = r.send().unwrap();
        (r.status().as_u16(), r.json::<serde_json::Value>().unwrap())
    };
    let (status, log) = audit("", Some(ADMIN));
    assert_eq!(status, 200, "{log}");
    let changes: Vec<_> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["args"]["to"].as_str().unwrap(),
                e["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(changes, [("inactive", "ok"), ("active", "ok")], "{log}");
    let (status, last) = audit("?limit=1", Some(ADMIN));
    assert_eq!(
        (status, &last["entries"][0]["args"]["to"]),
        (200, &json!("active"))
    );
    assert_eq!(last["entries"].as_array().unwrap().len(), 1);
    // Bad input: a limit that is not a number, and no admin token.
    let (status, body) = audit("?limit=many", Some(ADMIN));
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("limit"),
        "{body}"
    );
    assert_eq!(audit("", None).0, 401);
}

/// Run `toolhost serve` on `data` and expect it to stop by itself within
/// 30 s: its exit code and what it wrote to stderr.
fn serve_expecting_exit(
    plugins: &std::path::Path,
    data: &std::path::Path,
) -> (Option<i32>, String) {
    let mut child = Command::new(binary())
        .args(["serve", "--bind", "127.0.0.1:0", "--plugins"])
        .arg(plugins)
        .arg("--data")
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the server did not stop by itself");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_damaged_or_taken_registry_stops_the_start_with_the_reason() {
    let plugins = PluginsDir::new().add("calc", "calc");
    let data = tempfile::tempdir().unwrap();
    let garbage = vec![0x5au8; 16384];
    std::fs::write(data.path().join("registry.db"), &garbage).unwrap();
    let (code, log) = serve_expecting_exit(plugins.path(), data.path());
    assert_ne!(code, Some(0), "{log}");
    assert!(
        log.contains("registry.db")
            && log.contains("not a sound SQLite database")
            && log.contains("move it away"),
        "{log}"
    );
    assert_eq!(
        std::fs::read(data.path().join("registry.db")).unwrap(),
        garbage,
        "never reset silently"
    );

    // A second server on a running server's data directory.
    let s = Server::start(PluginsDir::new().add("calc", "calc"));
    let (code, log) = serve_expecting_exit(plugins.path(), &s.data.path().join("data"));
    assert_ne!(code, Some(0), "{log}");
    assert!(log.contains("locked by another process"), "{log}");
    // The first one serves on.
    assert_eq!(s.invoke("calc_evaluate", json!({"expression": "1"})).0, 200);
}

/// The registry on PostgreSQL (`[registry] url`): a status set through one
/// server is there for another server on the same database (another data
/// directory: a replica) when it starts, and after a crash of the first;
/// while both run, each follows the other's changes;
/// the password travels apart from the URL; a database that cannot be
/// reached stops the start with the reason, never a private SQLite file.
#[test]
fn the_registry_on_postgresql_is_shared_by_servers() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let config = CONFIG.replace(
        "[registry]\n",
        &format!(
            "[secrets]\nPG_PASSWORD = \"unused-under-trust\"\n\
             [registry]\nurl = \"{}\"\npassword_secret = \"PG_PASSWORD\"\n",
            pg.url
        ),
    );
    let mut a = Server::start_with(
        PluginsDir::new()
            .add("calc", "calc")
            .add("hostile", "hostile"),
        Some(&config),
    )
    .unwrap();
    assert_eq!(a.set_status(ADMIN, "hostile_spin", "inactive").0, 200);
    assert!(
        !a.data.path().join("registry.db").exists(),
        "a private SQLite file"
    );
    let b = Server::start_with(
        PluginsDir::new()
            .add("calc", "calc")
            .add("hostile", "hostile"),
        Some(&config),
    )
    .unwrap();
    let (status, body) = b.invoke("hostile_spin", json!({}));
    assert_eq!((status, kind(&body)), (409, "not_active"), "{body}");
    // While both run, a change through either reaches the other
    // (LISTEN/NOTIFY), both ways.
    let status_on = |s: &Server| s.get("/tools/hostile_spin").1["status"].clone();
    assert_eq!(b.set_status(ADMIN, "hostile_spin", "active").0, 200);
    let seen = wait_for(Duration::from_secs(5), || {
        (status_on(&a) == json!("active")).then_some(())
    });
    assert!(
        seen.is_some(),
        "replica A did not follow B: {}",
        status_on(&a)
    );
    assert!(a.tool_ids().iter().any(|t| t == "hostile_spin"));
    assert_eq!(a.set_status(ADMIN, "hostile_spin", "inactive").0, 200);
    let seen = wait_for(Duration::from_secs(5), || {
        (status_on(&b) == json!("inactive")).then_some(())
    });
    assert!(
        seen.is_some(),
        "replica B did not follow A: {}",
        status_on(&b)
    );
    assert!(!b.tool_ids().iter().any(|t| t == "hostile_spin"));
    drop(b);
    a.restart().unwrap();
    let (_, body) = a.get("/tools/hostile_spin");
    assert_eq!(body["status"], "inactive", "{body}");
    drop(a);

    // No database there: refused at start, named, nothing made instead.
    let gone = "[registry]\nurl = \"postgres://toolhost:s3cret@127.0.0.1:1/postgres\"\n";
    let err = Server::start_with(PluginsDir::new(), Some(gone))
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("cannot open the tool registry postgres://toolhost@127.0.0.1:1/postgres"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
}
