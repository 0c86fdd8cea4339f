//! The tool registry through the router: a tool made inactive, and the
//! budget that holds or refuses tasks.

use super::*;

fn admin(req: axum::http::request::Builder) -> axum::http::request::Builder {
    req.header("authorization", "Bearer admin-admin-admin-admin")
}

fn set_status(id: &str, body: &str, as_admin: bool) -> Request<Body> {
    let req =
        Request::put(format!("/tools/{id}/status")).header("content-type", "application/json");
    let req = if as_admin { admin(req) } else { req };
    req.body(Body::from(body.to_owned())).unwrap()
}

/// MCP `tools/list` (2026-07-28, stateless): the names listed.
async fn mcp_tool_names(app: &axum::Router) -> Vec<String> {
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "router-test", "version": "0"}
        }
    }});
    let req = Request::post("/mcp")
        .header("host", "localhost")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .body(Body::from(list.to_string()))
        .unwrap();
    let (status, _, body) = send(app, req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_inactive_tool_leaves_every_surface_and_stays_inactive_across_a_restart() {
    let mut config = Config::default();
    config.auth.admin_token = Some("admin-admin-admin-admin".into());
    let plugins = calc_plugins();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(&config, plugins.path(), data.path())
        .await
        .unwrap();
    let app = server.router(&config);
    let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();

    let (_, _, body) = send(&app, get("/tools")).await;
    let evaluate = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool_id"] == "calc_evaluate")
        .cloned()
        .unwrap();
    assert_eq!(evaluate["status"], "active");
    assert_eq!(evaluate["category"], "calc");
    let (status, _, _) = send(
        &app,
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{"expression":"1+2"}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // Only admins change statuses, and only along the lifecycle.
    let (status, _, _) = send(
        &app,
        set_status("calc_evaluate", r#"{"status":"inactive"}"#, false),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, body) = send(
        &app,
        set_status("calc_evaluate", r#"{"status":"retired"}"#, true),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, _, body) = send(
        &app,
        set_status("calc_evaluate", r#"{"status":"building"}"#, true),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, _, body) = send(
        &app,
        set_status("calc_nope", r#"{"status":"inactive"}"#, true),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _, body) = send(
        &app,
        set_status("calc_evaluate", r#"{"status":"inactive"}"#, true),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (&body["status"], &body["previous"]),
        (&json!("inactive"), &json!("active"))
    );

    // Hidden from discovery on every surface.
    let listed = |body: &Value, key: &str| -> bool {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t[key] == "calc_evaluate" || t["function"]["name"] == "calc_evaluate")
    };
    let (_, _, body) = send(&app, get("/tools")).await;
    assert!(!listed(&body, "tool_id"), "{body}");
    let (_, _, body) = send(&app, get("/tools?format=openai")).await;
    assert!(!listed(&body, "name"), "{body}");
    let (_, _, body) = send(&app, get("/tools?format=mcp")).await;
    assert!(!listed(&body, "name"), "{body}");
    assert!(
        !mcp_tool_names(&app)
            .await
            .iter()
            .any(|n| n == "calc_evaluate")
    );
    let (_, _, body) = send(&app, post("/get_available_tools", "{}")).await;
    assert!(
        !body["available_tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "calc_evaluate"),
        "{body}"
    );
    let (_, _, body) = send(
        &app,
        post(
            "/get_json_schema_for_tools",
            r#"{"tool_names":["calc_evaluate"]}"#,
        ),
    )
    .await;
    assert_eq!(body["missing_tools"], json!(["calc_evaluate"]), "{body}");
    let (_, _, body) = send(
        &app,
        post(
            "/retrieving_tools",
            r#"{"question":"evaluate an arithmetic expression"}"#,
        ),
    )
    .await;
    assert!(
        !body["retrieved_tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "calc_evaluate"),
        "{body}"
    );
    // Calls get 409 naming the status.
    let (status, _, body) = send(
        &app,
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{"expression":"1+2"}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["kind"], "not_active");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("inactive"),
        "{body}"
    );
    // Admins see it, with its status and statistics.
    let (status, _, _) = send(&app, get("/tools?include=all")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, body) = send(
        &app,
        admin(Request::get("/tools?include=all&status=inactive"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["tools"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["tools"][0]["tool_id"], "calc_evaluate");
    let (_, _, body) = send(&app, get("/tools/calc_evaluate")).await;
    assert_eq!(body["status"], "inactive");
    assert_eq!(body["stats"]["call_count"], 1, "{body}");
    assert!(
        body["stats"]["p50_latency_ms"].as_f64().unwrap() > 0.0,
        "{body}"
    );

    // A restart on the same data directory: still inactive, same statistics.
    server.shutdown().await;
    drop(app);
    drop(server);
    let server = Server::start(&config, plugins.path(), data.path())
        .await
        .unwrap();
    let app = server.router(&config);
    let (_, _, body) = send(&app, get("/tools/calc_evaluate")).await;
    assert_eq!(body["status"], "inactive", "{body}");
    assert_eq!(body["stats"]["call_count"], 1, "{body}");
    let (status, _, _) = send(
        &app,
        set_status("calc_evaluate", r#"{"status":"active"}"#, true),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = send(
        &app,
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{"expression":"1+2"}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, _, body) = send(&app, get("/tools")).await;
    assert!(listed(&body, "tool_id"), "{body}");
}

#[tokio::test]
async fn the_budget_holds_tasks_for_approval_or_refuses_them_and_system_reports_the_host() {
    let mut config = Config::default();
    config.auth.admin_token = Some("admin-admin-admin-admin".into());
    config.budget.monthly_limit_usd = Some(60.0);
    config.budget.single_tx_limit_usd = Some(50.0);
    config.budget.require_approval_above_usd = Some(10.0);
    let (_server, app, _dirs) = calc_server(&config).await;
    let ask = |name: &str, cost: f64| {
        admin(Request::post("/tools/request"))
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"name": name, "description": "Some tool.", "cost_usd": cost}).to_string(),
            ))
            .unwrap()
    };
    let (status, _, cheap) = send(&app, ask("wanted", 3.0)).await;
    assert_eq!(
        (status, &cheap["status"]),
        (StatusCode::ACCEPTED, &json!("pending")),
        "{cheap}"
    );
    // One task per name at a time: the cheap one is cancelled first.
    let id = cheap["task_id"].as_str().unwrap();
    let (status, _, _) = send(
        &app,
        admin(Request::delete(format!("/tasks/{id}")))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, dear) = send(&app, ask("wanted", 20.0)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{dear}");
    assert_eq!(dear["status"], "awaiting_approval", "{dear}");
    let dear_id = dear["task_id"].as_str().unwrap().to_owned();
    let (status, _, body) = send(&app, ask("pricey", 55.0)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["kind"], "over_budget");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("single-task"),
        "{body}"
    );

    let (_, _, budget) = send(
        &app,
        admin(Request::get("/budget")).body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(
        budget["spent_this_month_usd"], 20.0,
        "a cancelled task commits nothing: {budget}"
    );
    assert_eq!(budget["remaining_usd"], 40.0);

    let approve = |id: &str| {
        admin(Request::post(format!("/tasks/{id}/approve")))
            .body(Body::empty())
            .unwrap()
    };
    let (status, _, body) = send(&app, approve(&dear_id)).await;
    assert_eq!(
        (status, &body["status"]),
        (StatusCode::OK, &json!("pending")),
        "{body}"
    );
    let (status, _, _) = send(&app, approve(&dear_id)).await;
    assert_eq!(status, StatusCode::CONFLICT, "approved once");
    let (status, _, _) = send(&app, approve("task-nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // 20 committed: 45 more is past the monthly 60.
    let other = admin(Request::post("/tools/request"))
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"name": "another", "description": "x", "cost_usd": 45.0}).to_string(),
        ))
        .unwrap();
    let (status, _, body) = send(&app, other).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("monthly"),
        "{body}"
    );

    // GET /system: the host, and each tool's usage (admin only).
    let (status, _, _) = send(
        &app,
        post(
            "/tools/calc_evaluate/invoke",
            r#"{"params":{"expression":"2*3"}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = send(&app, Request::get("/system").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, system) = send(
        &app,
        admin(Request::get("/system")).body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{system}");
    for key in [
        "cpu_count",
        "cpu_percent",
        "memory_total_mb",
        "memory_available_mb",
        "memory_percent",
        "disk_total_gb",
        "disk_free_gb",
    ] {
        assert!(system[key].is_number(), "{key}: {system}");
    }
    let calc = system["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool_id"] == "calc_evaluate")
        .cloned()
        .unwrap();
    assert_eq!(calc["calls_since_start"], 1, "{calc}");
    assert!(calc["avg_fuel"].as_u64().unwrap() > 0, "{calc}");
    assert!(calc["peak_memory_mb"].as_f64().unwrap() > 0.0, "{calc}");
}
