//! `/mcp`'s direct answers (host/surfaces/src/mcp/direct) against rmcp's:
//! the same requests to a server with the direct answers off
//! (`TOOLHOST_MCP_DIRECT=0`), the answers compared.

use serde_json::{Value, json};
use toolhost_e2e::mcp::McpClient;
use toolhost_e2e::{PluginsDir, Server};

/// Calls answered directly get the same answers as rmcp gives them, errors
/// and refusals included: the same requests go to a server with the direct
/// answers off (`TOOLHOST_MCP_DIRECT=0`), and the answers are compared.
#[test]
fn direct_answers_match_rmcps() {
    let plugins = || {
        PluginsDir::new()
            .add("calc", "calc")
            .add("files", "files")
            .add("hostile", "hostile")
    };
    let direct = Server::start(plugins());
    let rmcp = Server::start_env(plugins(), None, &[("TOOLHOST_MCP_DIRECT", "0")]).unwrap();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toolhost-e2e", "version": "0"}
    });
    let calc = json!({"name": "calc_evaluate", "arguments": {"expression": "6*7"}});
    let with_meta = |mut params: Value, meta: &Value| {
        params["_meta"] = meta.clone();
        params
    };
    let mut no_info = meta.clone();
    no_info
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientInfo");
    let stateless_headers = |name: &str| {
        vec![
            ("mcp-protocol-version", "2026-07-28".to_owned()),
            ("mcp-method", "tools/call".to_owned()),
            ("mcp-name", name.to_owned()),
        ]
    };
    // (what, headers to add (a value "" removes the header), params)
    type Case = (&'static str, Vec<(&'static str, String)>, Value);
    let stateless: Vec<Case> = vec![
        (
            "call",
            stateless_headers("calc_evaluate"),
            with_meta(calc.clone(), &meta),
        ),
        (
            "tool error",
            stateless_headers("hostile_fail"),
            with_meta(json!({"name": "hostile_fail", "arguments": {}}), &meta),
        ),
        (
            "bad arguments",
            stateless_headers("calc_evaluate"),
            with_meta(
                json!({"name": "calc_evaluate", "arguments": {"expr": "1"}}),
                &meta,
            ),
        ),
        (
            "unknown tool",
            stateless_headers("nope"),
            with_meta(json!({"name": "nope", "arguments": {}}), &meta),
        ),
        (
            "Mcp-Name mismatch",
            stateless_headers("other"),
            with_meta(calc.clone(), &meta),
        ),
        (
            "no Mcp-Method",
            vec![
                ("mcp-protocol-version", "2026-07-28".to_owned()),
                ("mcp-name", "calc_evaluate".to_owned()),
            ],
            with_meta(calc.clone(), &meta),
        ),
        (
            "no clientInfo",
            stateless_headers("calc_evaluate"),
            with_meta(calc.clone(), &no_info),
        ),
        ("no _meta", stateless_headers("calc_evaluate"), calc.clone()),
        (
            "version mismatch",
            {
                let mut h = stateless_headers("calc_evaluate");
                h[0].1 = "2025-11-25".to_owned();
                h
            },
            with_meta(calc.clone(), &meta),
        ),
        (
            "JSON only",
            {
                let mut h = stateless_headers("calc_evaluate");
                h.push(("accept", "application/json".to_owned()));
                h
            },
            with_meta(calc.clone(), &meta),
        ),
        (
            "foreign Host",
            {
                let mut h = stateless_headers("calc_evaluate");
                h.push(("host", "evil.example".to_owned()));
                h
            },
            with_meta(calc.clone(), &meta),
        ),
        (
            "Origin",
            {
                let mut h = stateless_headers("calc_evaluate");
                h.push(("origin", "http://evil.example".to_owned()));
                h
            },
            with_meta(calc.clone(), &meta),
        ),
        (
            "bad X-Toolhost-Session",
            {
                let mut h = stateless_headers("calc_evaluate");
                h.push(("x-toolhost-session", "../etc".to_owned()));
                h
            },
            with_meta(calc.clone(), &meta),
        ),
        (
            "arguments not an object",
            stateless_headers("calc_evaluate"),
            with_meta(json!({"name": "calc_evaluate", "arguments": [1]}), &meta),
        ),
    ];
    let session: Vec<Case> = vec![
        ("call", vec![], calc.clone()),
        (
            "tool error",
            vec![],
            json!({"name": "hostile_fail", "arguments": {}}),
        ),
        (
            "unknown tool",
            vec![],
            json!({"name": "nope", "arguments": {}}),
        ),
        (
            "another known version",
            vec![("mcp-protocol-version", "2025-06-18".to_owned())],
            calc.clone(),
        ),
        ("a version in _meta", vec![], with_meta(calc.clone(), &meta)),
        (
            "pinned session",
            vec![("x-toolhost-session", "pinned-1".to_owned())],
            calc.clone(),
        ),
        (
            "bad X-Toolhost-Session",
            vec![("x-toolhost-session", "../etc".to_owned())],
            calc.clone(),
        ),
        (
            "unknown MCP session",
            vec![("mcp-session-id", "no-such-session".to_owned())],
            calc.clone(),
        ),
    ];
    // `params` Null: none sent.
    let ask_for = |method: &str, client: &McpClient, headers: &[(&str, String)], params: &Value| {
        let mut body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
        if params.is_null() {
            body.as_object_mut().unwrap().remove("params");
        }
        let mut request = client.post().body(body.to_string()).build().unwrap();
        // The case's headers replace the client's.
        for (k, v) in headers {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).unwrap();
            request.headers_mut().insert(name, v.parse().unwrap());
        }
        let answer = toolhost_e2e::mcp::read(client.http.execute(request).unwrap());
        let mut messages = answer.messages;
        for m in &mut messages {
            if let Some(meta) = m
                .pointer_mut("/result/_meta")
                .and_then(Value::as_object_mut)
            {
                meta.remove("toolhost/elapsed_ms");
            }
        }
        (answer.status, messages, answer.text)
    };
    // The same request of both servers: the same answer.
    let same = |method: &str, clients: (&McpClient, &McpClient), case: &Case, side: &str| {
        let (what, headers, params) = case;
        let a = ask_for(method, clients.0, headers, params);
        let b = ask_for(method, clients.1, headers, params);
        assert_eq!(
            (a.0, &a.1),
            (b.0, &b.1),
            "{side}, {what}:\n{}\n{}",
            a.2,
            b.2
        );
        (a, b)
    };
    let stateless_clients = (McpClient::new(&direct), McpClient::new(&rmcp));
    let pair = (&stateless_clients.0, &stateless_clients.1);
    for case in &stateless {
        same("tools/call", pair, case, "stateless");
    }
    let (mut c1, mut c2) = (McpClient::new(&direct), McpClient::new(&rmcp));
    c1.initialize("2025-11-25");
    c2.initialize("2025-11-25");
    for case in &session {
        same("tools/call", (&c1, &c2), case, "session");
    }
    // Lists: answered directly from each tool's JSON made once, the same
    // as rmcp's; paged, versioned or otherwise unusual ones are rmcp's.
    let list_headers = |extra: &[(&'static str, &str)]| {
        let mut h = vec![
            ("mcp-protocol-version", "2026-07-28".to_owned()),
            ("mcp-method", "tools/list".to_owned()),
        ];
        h.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        h
    };
    let stateless_lists: Vec<Case> = vec![
        ("list", list_headers(&[]), with_meta(json!({}), &meta)),
        (
            "list, a cursor",
            list_headers(&[]),
            with_meta(json!({"cursor": "x"}), &meta),
        ),
        (
            "list, Mcp-Name",
            list_headers(&[("mcp-name", "calc_evaluate")]),
            with_meta(json!({}), &meta),
        ),
        (
            "list, Mcp-Method of a call",
            list_headers(&[("mcp-method", "tools/call")]),
            with_meta(json!({}), &meta),
        ),
        ("list, no _meta", list_headers(&[]), Value::Null),
        (
            "list, no clientInfo",
            list_headers(&[]),
            with_meta(json!({}), &no_info),
        ),
        (
            "list, a progress token",
            list_headers(&[]),
            with_meta(json!({}), &{
                let mut m = meta.clone();
                m["progressToken"] = json!(1);
                m
            }),
        ),
    ];
    for case in &stateless_lists {
        same("tools/list", pair, case, "stateless");
    }
    let session_lists: Vec<Case> = vec![
        ("list", vec![], Value::Null),
        ("list, empty params", vec![], json!({})),
        ("list, a cursor", vec![], json!({"cursor": "abc"})),
        (
            "list, a version in _meta",
            vec![],
            with_meta(json!({}), &meta),
        ),
        (
            "list, pinned session",
            vec![("x-toolhost-session", "pinned-1".to_owned())],
            json!({}),
        ),
        (
            "list, unknown MCP session",
            vec![("mcp-session-id", "no-such-session".to_owned())],
            json!({}),
        ),
    ];
    for case in &session_lists {
        let (a, b) = same("tools/list", (&c1, &c2), case, "session");
        if case.0 == "list" {
            // Answered directly (JSON; rmcp's session answers are streams).
            assert!(a.2.starts_with('{') && !b.2.starts_with('{'), "{}", a.2);
            let tools = a.1[0]["result"]["tools"].as_array().map_or(0, Vec::len);
            assert!(tools > 3, "{}", a.2);
        }
    }
    // `params: null`, as rmcp takes it.
    let raw = |client: &McpClient| {
        let body = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":null}"#;
        toolhost_e2e::mcp::read(client.post().body(body).send().unwrap())
    };
    let (a, b) = (raw(&c1), raw(&c2));
    assert_eq!(
        (a.status, &a.messages),
        (b.status, &b.messages),
        "params null"
    );
    // Direct and rmcp-served calls of a session share its toolhost session:
    // a file written by one (direct) is read by the other (a progress token
    // sends it through rmcp).
    let w = c1.call(20, "files_write", json!({"path": "a.txt", "content": "x"}));
    assert_eq!(w["result"]["isError"], false, "{w}");
    let r = c1.request(
        21,
        "tools/call",
        json!({"name": "files_read", "arguments": {"path": "a.txt"},
               "_meta": {"progressToken": "r"}}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(r["result"].to_string().contains('x'), "{r}");
}
