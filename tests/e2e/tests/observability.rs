//! Caller tokens, the per-token rate limit, request ids and `GET /metrics`,
//! against the real binary.

use serde_json::{Value, json};
use toolhost_e2e::{PluginsDir, Server, kind};

const CALLER: &str = "caller-token-0123456789";
const OTHER: &str = "other-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";

fn status_of(r: reqwest::blocking::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

#[test]
fn tokens_guard_every_route_but_health() {
    let s = Server::start_env(
        PluginsDir::new().add("calc", "calc"),
        None,
        &[("TOOLHOST_TOKEN", CALLER), ("TOOLHOST_ADMIN_TOKEN", ADMIN)],
    )
    .unwrap();
    let http = s.client();
    let get = |path: &str, token: Option<&str>| {
        let mut req = http.get(s.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().unwrap()
    };

    assert_eq!(get("/health", None).status(), 200, "health stays open");
    for path in [
        "/tools",
        "/metrics",
        "/plugins",
        "/tools/calc_evaluate/schema",
        "/nowhere",
    ] {
        let r = get(path, None);
        assert_eq!(r.status(), 401, "{path}");
        assert_eq!(r.headers()["www-authenticate"], "Bearer", "{path}");
        let (_, body) = status_of(r);
        assert_eq!(kind(&body), "unauthorized", "{path}: {body}");
        assert_eq!(
            get(path, Some("caller-token-012345678")).status(),
            401,
            "{path}"
        );
    }
    assert_eq!(get("/tools", Some(CALLER)).status(), 200);
    assert_eq!(get("/metrics", Some(CALLER)).status(), 200);
    assert_eq!(
        get("/tools", Some(ADMIN)).status(),
        200,
        "admin is a caller"
    );
    let basic = http
        .get(s.url("/tools"))
        .basic_auth("x", Some(CALLER))
        .send()
        .unwrap();
    assert_eq!(basic.status(), 401, "only the Bearer scheme");

    // Every surface: native invoke, XAgent, MCP.
    let invoke = |token: Option<&str>| {
        let mut req = http
            .post(s.url("/tools/calc_evaluate/invoke"))
            .json(&json!({"params": {"expression": "6*7"}}));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        status_of(req.send().unwrap())
    };
    assert_eq!(invoke(None).0, 401);
    let (status, out) = invoke(Some(CALLER));
    assert_eq!(
        (status, &out["result"]["value"]),
        (200, &json!(42.0)),
        "{out}"
    );
    let cookie = http.post(s.url("/get_cookie")).send().unwrap();
    assert_eq!(cookie.status(), 401);
    let cookie = http
        .post(s.url("/get_cookie"))
        .bearer_auth(CALLER)
        .send()
        .unwrap();
    assert_eq!(cookie.status(), 200);
    let mcp = http
        .post(s.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .unwrap();
    assert_eq!(mcp.status(), 401);

    // The admin routes still want the admin token: a caller's is known, and
    // forbidden there.
    let put = |token: &str| {
        http.put(s.url("/plugins/calc2"))
            .bearer_auth(token)
            .header("content-type", "application/wasm")
            .body(b"not wasm".to_vec())
            .send()
            .unwrap()
            .status()
    };
    assert_eq!(put(CALLER), 403);
    assert_eq!(
        put(ADMIN),
        422,
        "admin passes both checks; the body is refused"
    );
}

#[test]
fn the_rate_limit_is_per_token_and_answers_429() {
    let config = format!(
        "[auth]\ntokens = [\"{CALLER}\", \"{OTHER}\"]\nrate_limit_per_s = 1\nrate_limit_burst = 3\n"
    );
    let s = Server::start_with(PluginsDir::new().add("calc", "calc"), Some(&config)).unwrap();
    let get = |token: &str| {
        s.client()
            .get(s.url("/tools"))
            .bearer_auth(token)
            .send()
            .unwrap()
    };
    let mut statuses = Vec::new();
    let mut limited = None;
    for _ in 0..6 {
        let r = get(CALLER);
        statuses.push(r.status().as_u16());
        if r.status() == 429 {
            limited = Some(r);
        }
    }
    // 3 at once (the burst), perhaps one more if a second passed; then 429.
    assert!(statuses[..3].iter().all(|&s| s == 200), "{statuses:?}");
    let limited = limited.unwrap_or_else(|| panic!("never limited: {statuses:?}"));
    let retry: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry), "{retry}");
    let (_, body) = status_of(limited);
    assert_eq!(kind(&body), "rate_limited", "{body}");
    assert_eq!(get(OTHER).status(), 200, "another token has its own budget");
    assert_eq!(s.get("/health").0, 200, "health is not limited");
}

#[test]
fn request_ids_come_back_and_tag_the_log() {
    let s = Server::start(PluginsDir::new().add("calc", "calc"));
    let r = s.client().get(s.url("/tools")).send().unwrap();
    let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    let r2 = s.client().get(s.url("/tools")).send().unwrap();
    assert_ne!(r2.headers()["x-request-id"].to_str().unwrap(), id);

    // A client's own id is kept, and the failed call's log line carries it.
    let r = s
        .client()
        .post(s.url("/tools/calc_evaluate/invoke"))
        .header("x-request-id", "agent-step-17")
        .json(&json!({"params": {"expression": "1/0"}}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 422);
    assert_eq!(r.headers()["x-request-id"], "agent-step-17");
    let log = s.log();
    assert!(
        log.lines()
            .any(|l| l.contains("call failed") && l.contains("agent-step-17")),
        "{log}"
    );
}

/// The sample value of the line of `text` starting with `series`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

#[test]
fn metrics_count_calls_errors_and_fuel() {
    let s = Server::start(PluginsDir::new().add("calc", "calc"));
    let (status, out) = s.invoke("calc_evaluate", json!({"expression": "1+1"}));
    assert_eq!(status, 200, "{out}");
    let fuel = out["fuel"].as_u64().expect("the call's fuel");
    assert!(fuel > 1000, "{out}");
    s.invoke("calc_evaluate", json!({"expression": "2+2"}));
    let (status, _) = s.invoke("calc_evaluate", json!({"expression": "1/0"}));
    assert_eq!(status, 422);
    let r = s
        .client()
        .post(s.url("/tools/calc_evaluate/invoke"))
        .json(&json!({"params": {"expression": "1+1"}, "limits": {"fuel": 10}}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 500);
    s.invoke("no_such_tool", json!({}));

    let r = s.client().get(s.url("/metrics")).send().unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4"),
    );
    let text = r.text().unwrap();
    let calls = |outcome: &str| {
        sample(
            &text,
            &format!(
                "toolhost_tool_calls_total{{backend=\"wasm\",outcome=\"{outcome}\",tool=\"calc_evaluate\"}}"
            ),
        )
    };
    assert_eq!(calls("ok"), Some(2.0), "{text}");
    assert_eq!(calls("invalid_input"), Some(1.0), "{text}");
    assert_eq!(calls("out_of_fuel"), Some(1.0), "{text}");
    assert!(!text.contains("no_such_tool"), "unknown ids make no series");
    let consumed = sample(
        &text,
        "toolhost_wasm_fuel_consumed_total{tool=\"calc_evaluate\"}",
    )
    .unwrap();
    assert!(consumed >= 2.0 * fuel as f64, "{consumed} {fuel}");
    for series in [
        "toolhost_tool_call_duration_seconds_count{backend=\"wasm\",tool=\"calc_evaluate\"} 4",
        "toolhost_wasm_instantiate_seconds_count{tool=\"calc_evaluate\"}",
        "toolhost_wasm_peak_memory_bytes_count{tool=\"calc_evaluate\"}",
    ] {
        assert!(text.contains(series), "missing {series}\n{text}");
    }
}

#[test]
fn metrics_can_be_turned_off() {
    let s = Server::start_with(
        PluginsDir::new().add("calc", "calc"),
        Some("[server]\nmetrics = false\n"),
    )
    .unwrap();
    let (status, _) = s.invoke("calc_evaluate", json!({"expression": "1+1"}));
    assert_eq!(status, 200);
    let (status, body) = s.get("/metrics");
    assert_eq!((status, kind(&body)), (404, "not_found"), "{body}");
}
