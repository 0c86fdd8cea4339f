//! Seed 004's billing log (§11): an admin's entries judged by the §11
//! rules (within the single-transaction limit: committed; over the
//! approval threshold: waiting for an admin, its amount held; over the single limit or past
//! the monthly one: refused, named), `spent_this_month_usd` derived from
//! them and from the tasks going on (a cancelled one costs nothing), all of
//! it in `GET /budget`, audited, and kept across a restart.

use serde_json::{Value, json};
use toolhost_e2e::admin::{TOKEN, request as admin};
use toolhost_e2e::*;

fn post(s: &Server, path: &str, body: Value) -> (u16, Value) {
    admin(s, reqwest::Method::POST, path, Some(body))
}

fn budget(s: &Server) -> Value {
    admin(s, reqwest::Method::GET, "/budget", None).1
}

#[test]
fn the_billing_log_follows_the_seeds_rules_and_survives_a_restart() {
    let mut s = Server::start_with(
        PluginsDir::new(),
        Some(&format!(
            "[auth]\nadmin_token = \"{TOKEN}\"\n[registry]\nflush_ms = 100\n\
             [budget]\nmonthly_limit_usd = 20.0\nsingle_tx_limit_usd = 10.0\nrequire_approval_above_usd = 5.0\n"
        )),
    )
    .unwrap();
    assert_eq!(budget(&s)["spent_this_month_usd"], 0.0);
    assert_eq!(budget(&s)["transactions"], json!([]));

    // §11's own entry, verbatim: within the limits, committed.
    let (code, first) = post(
        &s,
        "/budget/transactions",
        json!({"provider": "openai", "amount_usd": 5.0, "description": "API Key 充值"}),
    );
    assert_eq!(
        (code, first["status"].as_str()),
        (201, Some("committed")),
        "{first}"
    );
    // Over the approval threshold: waits, its amount held against the month.
    let (code, waiting) = post(
        &s,
        "/budget/transactions",
        json!({"provider": "anthropic", "amount_usd": 7.0}),
    );
    assert_eq!(
        (code, waiting["status"].as_str()),
        (202, Some("awaiting_approval")),
        "{waiting}"
    );
    assert_eq!(budget(&s)["spent_this_month_usd"], 12.0);
    // Over the single-transaction limit: refused, named.
    let (code, body) = post(
        &s,
        "/budget/transactions",
        json!({"provider": "x", "amount_usd": 11.0}),
    );
    assert_eq!(code, 422, "{body}");
    assert!(body.to_string().contains("single_tx_limit_usd"), "{body}");
    // Approved: counted.
    let id = waiting["id"].as_str().unwrap();
    let (code, approved) = post(&s, &format!("/budget/transactions/{id}/approve"), json!({}));
    assert_eq!(
        (code, approved["status"].as_str()),
        (200, Some("committed")),
        "{approved}"
    );
    assert_eq!(budget(&s)["spent_this_month_usd"], 12.0);
    let (code, _) = post(&s, &format!("/budget/transactions/{id}/approve"), json!({}));
    assert_eq!(code, 409, "approved twice");
    assert_eq!(
        post(&s, "/budget/transactions/tx-nope/approve", json!({})).0,
        404
    );
    // Past the monthly limit with what was spent: refused, named.
    let (code, body) = post(
        &s,
        "/budget/transactions",
        json!({"provider": "x", "amount_usd": 9.0}),
    );
    assert_eq!(code, 422, "{body}");
    assert!(body.to_string().contains("monthly_limit_usd"), "{body}");

    // A task going on commits its cost; cancelled, it costs nothing.
    let (code, task) = post(
        &s,
        "/tools/request",
        json!({"description": "a word counter", "cost_usd": 3.0}),
    );
    assert_eq!(code, 202, "{task}");
    assert_eq!(budget(&s)["spent_this_month_usd"], 15.0);
    let tid = task["task_id"].as_str().unwrap();
    assert_eq!(
        admin(&s, reqwest::Method::DELETE, &format!("/tasks/{tid}"), None).0,
        200
    );
    assert_eq!(budget(&s)["spent_this_month_usd"], 12.0);

    // Bad entries: clear 422s; no token: 401.
    for bad in [
        json!({"provider": "x", "amount_usd": -1.0}),
        json!({"provider": " ", "amount_usd": 1.0}),
        json!({"amount_usd": 1.0}),
        json!({"provider": "x", "amount_usd": 1.0, "colour": "red"}),
    ] {
        let (code, body) = post(&s, "/budget/transactions", bad.clone());
        assert_eq!(code, 422, "{bad}: {body}");
    }
    let r = s
        .client()
        .post(s.url("/budget/transactions"))
        .json(&json!({"provider": "x", "amount_usd": 1.0}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);

    // Kept, in order, across a restart; audited.
    std::thread::sleep(std::time::Duration::from_millis(500));
    s.restart().unwrap();
    let b = budget(&s);
    assert_eq!(b["spent_this_month_usd"], 12.0, "{b}");
    let log: Vec<(&str, f64, &str)> = b["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["provider"].as_str().unwrap(),
                t["amount_usd"].as_f64().unwrap(),
                t["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        log,
        [
            ("openai", 5.0, "committed"),
            ("anthropic", 7.0, "committed")
        ]
    );
    assert_eq!(b["transactions"][0]["description"], "API Key 充值");
    let (_, audit) = admin(&s, reqwest::Method::GET, "/admin/audit", None);
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .filter(|a| a.starts_with("budget_"))
        .collect();
    assert!(actions.len() >= 5, "{audit}");
}
