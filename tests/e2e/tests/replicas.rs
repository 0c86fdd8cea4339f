//! Replicas on one PostgreSQL registry: their call statistics add up,
//! and the database going away and coming back loses nothing: calls go
//! on, a status change is refused (503, not changed) rather than kept on
//! one replica, the writes that waited are saved when it is back, and the
//! replicas follow each other again. Their node containers share one label
//! scope: no replica removes another's while it is alive, and the others
//! remove what a killed one left.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::sources::request_wordcount;
use toolhost_e2e::*;

const ADMIN: &str = "admin-admin-admin-admin";

fn replica_with(pg: &pg::Postgres, plugins: PluginsDir) -> Server {
    replica_configured(pg, plugins, "")
}

fn replica_configured(pg: &pg::Postgres, plugins: PluginsDir, extra: &str) -> Server {
    let config = format!(
        "[registry]\nflush_ms = 100\nurl = \"{}\"\n[auth]\nadmin_token = \"{ADMIN}\"\n{extra}",
        pg.url
    );
    Server::start_with(plugins, Some(&config)).unwrap()
}

fn replica(pg: &pg::Postgres) -> Server {
    replica_with(pg, PluginsDir::new().add("calc", "calc"))
}

fn calls_on(s: &Server) -> u64 {
    s.get("/tools/calc_evaluate").1["stats"]["call_count"]
        .as_u64()
        .unwrap_or(0)
}

fn evaluate(s: &Server, n: u64) {
    for i in 0..n {
        let (status, body) = s.invoke("calc_evaluate", json!({ "expression": format!("{i} + 1") }));
        assert_eq!(status, 200, "{body}");
    }
}

/// Whether `check` holds within 10 s.
fn soon(check: impl Fn() -> bool) -> bool {
    wait_for(Duration::from_secs(10), || check().then_some(())).is_some()
}

#[test]
fn replicas_add_up_their_statistics_and_ride_out_the_database_going_away() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let a = replica(&pg);
    let b = replica(&pg);
    evaluate(&a, 7);
    evaluate(&b, 5);
    // Each shows every replica's calls once the flushes have gone through.
    assert!(soon(|| calls_on(&a) == 12), "A shows {}", calls_on(&a));
    assert!(soon(|| calls_on(&b) == 12), "B shows {}", calls_on(&b));
    let (_, tool) = a.get("/tools/calc_evaluate");
    assert!(tool["stats"]["p50_latency_ms"].as_f64().is_some(), "{tool}");

    // The database goes away.
    pg.stop();
    // Calls never wait on it.
    evaluate(&a, 3);
    evaluate(&b, 2);
    assert!(
        soon(|| calls_on(&a) == 15),
        "A's own calls count: {}",
        calls_on(&a)
    );
    // A status change that cannot be saved is refused, and not made.
    let (status, body) = a.set_status(ADMIN, "calc_evaluate", "inactive");
    assert_eq!(
        (status, kind(&body)),
        (503, "registry_unavailable"),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("stays active")),
        "{body}"
    );
    assert_eq!(a.get("/tools/calc_evaluate").1["status"], "active");
    assert_eq!(a.invoke("calc_evaluate", json!({"expression": "1"})).0, 200);
    // So is an approval of a plugin's definitions.
    let r = a
        .client()
        .post(a.url("/plugins/calc/changes/approve"))
        .bearer_auth(ADMIN)
        .json(&json!({}))
        .send()
        .unwrap();
    let (status, body) = (
        r.status().as_u16(),
        r.json::<Value>().unwrap_or(Value::Null),
    );
    assert_eq!(
        (status, kind(&body)),
        (503, "registry_unavailable"),
        "{body}"
    );
    assert!(
        body.to_string().contains("the approval is not saved"),
        "{body}"
    );

    // Back: what waited is saved, and the replicas agree again.
    pg.resume();
    assert!(
        soon(|| calls_on(&b) == 18),
        "B shows {} (want 18)",
        calls_on(&b)
    );
    assert!(
        soon(|| calls_on(&a) == 18),
        "A shows {} (want 18)",
        calls_on(&a)
    );
    assert!(
        soon(|| a.set_status(ADMIN, "calc_evaluate", "inactive").0 == 200),
        "the status change is taken again"
    );
    assert!(
        soon(|| b.get("/tools/calc_evaluate").1["status"] == "inactive"),
        "B follows A again: {}",
        b.get("/tools/calc_evaluate").1["status"]
    );

    // The audit log is shared: B shows A's status changes, the refused one
    // (kept while the database was away) before the one saved, both named
    // with A's replica id; the database holds nothing else.
    let audit = |s: &Server| {
        let r = s
            .client()
            .get(s.url("/admin/audit"))
            .bearer_auth(ADMIN)
            .send()
            .unwrap();
        r.json::<Value>().unwrap()["entries"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let changes = audit(&b);
    let outcomes: Vec<&str> = changes
        .iter()
        .filter(|e| e["action"] == "set_status" && e["args"]["to"] == "inactive")
        .map(|e| e["outcome"].as_str().unwrap())
        .collect();
    assert!(
        outcomes.len() >= 2 && outcomes[0].starts_with("503") && outcomes.last() == Some(&"ok"),
        "{changes:?}"
    );
    let a_id = a.replica_id().expect("A names its replica");
    assert!(
        changes.iter().all(|e| e["replica"] == a_id.as_str()),
        "{changes:?}"
    );
    assert_eq!(audit(&a), changes, "both replicas read one log");
    assert_eq!(
        pg.query("select count(*) from audit")
            .parse::<usize>()
            .unwrap(),
        changes.len()
    );
}

/// The node containers of session `session` (whichever replica made them).
fn nodes_of(session: &str) -> Vec<String> {
    containers(&[format!("toolhost.session={session}")])
}

#[test]
fn replicas_never_remove_each_others_nodes_and_reap_a_killed_ones() {
    if !require_docker() {
        return;
    }
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let shell = || PluginsDir::new().add_toolkit_with("shell", cold);
    let a = replica_with(&pg, shell());
    let mut b = replica_with(&pg, shell());
    let tag = std::process::id();
    let (on_a, on_b) = (format!("replica-a-{tag}"), format!("replica-b-{tag}"));
    let run = |s: &Server, session: &str| {
        let (status, body) = s.invoke_in(session, "shell_run", json!({"command": "echo hi"}));
        assert_eq!(status, 200, "{body}");
    };
    run(&a, &on_a);
    run(&b, &on_b);
    assert_eq!((nodes_of(&on_a).len(), nodes_of(&on_b).len()), (1, 1));
    // Old enough to be swept if their replicas were taken for gone; a third
    // replica starting (its engine "coming up" sweeps leftovers) and the
    // periodic looks leave both.
    std::thread::sleep(Duration::from_secs(32));
    let c = replica_with(&pg, shell());
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        (nodes_of(&on_a).len(), nodes_of(&on_b).len()),
        (1, 1),
        "a live replica's node was removed"
    );
    // B is killed: a survivor removes its node once B's lease has run out.
    b.kill();
    assert!(
        wait_for(Duration::from_secs(90), || nodes_of(&on_b)
            .is_empty()
            .then_some(()))
        .is_some(),
        "the killed replica's node is left: {:?}",
        nodes_of(&on_b)
    );
    assert_eq!(nodes_of(&on_a).len(), 1, "A's node stays");
    // B's session goes on through a survivor.
    run(&c, &on_b);
    drop(c);
    drop(a);
    assert!(nodes_of(&on_a).is_empty() && nodes_of(&on_b).is_empty());
}

fn admin_get(s: &Server, path: &str) -> (u16, Value) {
    let r = s
        .client()
        .get(s.url(path))
        .bearer_auth(ADMIN)
        .send()
        .unwrap();
    (r.status().as_u16(), r.json().unwrap_or(Value::Null))
}

/// A billing entry and a task made through one replica are seen through
/// the others within a second; when the replica building it is killed, one survivor takes it
/// over (once), builds it from the start and completes it.
#[test]
fn a_killed_replicas_build_is_taken_over_once_and_completed() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let mut a = replica(&pg);
    let b = replica(&pg);
    let c = replica(&pg);
    // The billing log is one: an entry made through A is B's too.
    let r = a
        .client()
        .post(a.url("/budget/transactions"))
        .bearer_auth(ADMIN)
        .json(&json!({"provider": "openai", "amount_usd": 5.0, "description": "API Key 充值"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    assert!(
        soon(|| admin_get(&b, "/budget").1["spent_this_month_usd"] == 5.0),
        "B does not see A's billing entry: {}",
        admin_get(&b, "/budget").1
    );
    let id = request_wordcount(a.client(), &a.base, ADMIN);
    let path = format!("/tasks/{id}/status");
    let status_on = |s: &Server| admin_get(s, &path).1["status"].clone();
    assert!(
        soon(|| admin_get(&b, &path).0 == 200),
        "B does not see A's task"
    );
    assert!(
        soon(|| status_on(&a) == "building" && status_on(&b) == "building"),
        "building, seen on B: {}",
        status_on(&b)
    );
    a.kill();
    let done = wait_for(Duration::from_secs(240), || {
        let (b_now, c_now) = (status_on(&b), status_on(&c));
        (b_now == "completed" && c_now == "completed").then_some(())
    });
    assert!(
        done.is_some(),
        "not completed after A was killed: B says {}, C says {}",
        admin_get(&b, &path).1,
        admin_get(&c, &path).1
    );
    let (_, events) = admin_get(&b, &format!("/tasks/{id}"));
    let history = events.to_string();
    assert_eq!(
        history.matches("taken over by replica").count(),
        1,
        "{history}"
    );
    assert_eq!(history.matches("completed: ").count(), 1, "{history}");
    // The replica that took it over serves the tool.
    let served = [&b, &c]
        .iter()
        .filter(|s| s.tool_ids().iter().any(|t| t == "wordcount_count"))
        .count();
    assert_eq!(served, 1, "served by exactly the replica that built it");
}

/// One verdict for all replicas: calls trapping on B alone degrade the
/// tool on A too (the reason naming B), and exactly one `health_alert` goes
/// out, the leading replica's.
#[test]
fn a_tool_degraded_on_one_replica_is_degraded_on_all_with_one_alert() {
    let Some(pg) = pg::Postgres::start() else {
        return;
    };
    let health = "[health]\ninterval_s = 1\nmin_calls = 3\nrepair = \"off\"\n";
    let a = replica_configured(&pg, PluginsDir::new().add("hostile", "hostile"), health);
    let b = replica_configured(&pg, PluginsDir::new().add("hostile", "hostile"), health);
    let (on_a, on_b) = (
        toolhost_e2e::events::subscribe(&a, ADMIN),
        toolhost_e2e::events::subscribe(&b, ADMIN),
    );
    let state = |s: &Server| s.get("/tools/hostile_panic").1["health"].clone();
    assert!(soon(
        || state(&a)["last_healthy"].is_string() && state(&b)["last_healthy"].is_string()
    ));
    // B's calls keep trapping (each look judges the calls since the last).
    let both = wait_for(Duration::from_secs(15), || {
        for _ in 0..2 {
            assert_eq!(b.invoke("hostile_panic", json!({"message": "boom"})).0, 500);
        }
        (state(&a)["state"] == "degraded" && state(&b)["state"] == "degraded").then_some(())
    });
    assert!(both.is_some(), "A: {}\nB: {}", state(&a), state(&b));
    assert!(
        state(&a)["reason"]
            .as_str()
            .unwrap()
            .starts_with("on replica "),
        "A learnt it from B: {}",
        state(&a)
    );
    // Alerts: one, whichever replica leads.
    std::thread::sleep(Duration::from_secs(3));
    let alerts: Vec<Value> = on_a
        .try_iter()
        .chain(on_b.try_iter())
        .filter(|m| m["type"] == "health_alert" && m["payload"]["tool_id"] == "hostile_panic")
        .collect();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
}
