//! Request decoding of the XAgent protocol and MCP: any body to each route.
//! `/mcp` twice: as rmcp sees it, and with the headers of a 2026-07-28
//! `tools/call`, so the body reaches the direct answers' parse first.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toolhost_fuzz::{check, post};

/// An XAgent session's cookie, so inputs get past the cookie check.
fn cookie() -> &'static str {
    static COOKIE: OnceLock<String> = OnceLock::new();
    COOKIE.get_or_init(|| {
        let h = toolhost_fuzz::harness();
        let req = axum::http::Request::post("/get_cookie")
            .header("host", "127.0.0.1")
            .body(axum::body::Body::empty())
            .unwrap();
        h.runtime.block_on(async {
            use tower::ServiceExt;
            let resp = h.router.clone().oneshot(req).await.unwrap();
            let value = resp.headers()["set-cookie"].to_str().unwrap();
            value.split(';').next().unwrap().to_owned()
        })
    })
}

const ROUTES: &[&str] = &[
    "/execute_tool",
    "/get_json_schema_for_tools",
    "/get_json_schema_for_envs",
    "/retrieving_tools",
    "/download_file",
    "/get_available_tools",
    "/mcp",
    "/mcp?direct",
];

fuzz_target!(|data: &[u8]| {
    let Some((pick, body)) = data.split_first() else {
        return;
    };
    let path = ROUTES[*pick as usize % ROUTES.len()];
    let length = body.len().to_string();
    let headers: &[(&str, &str)] = match path {
        "/mcp" => &[
            ("accept", "application/json, text/event-stream"),
            ("content-type", "application/json"),
        ],
        "/mcp?direct" => &[
            ("accept", "application/json, text/event-stream"),
            ("content-type", "application/json"),
            ("content-length", &length),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "calc_evaluate"),
        ],
        _ => &[("content-type", "application/json"), ("cookie", cookie())],
    };
    let (status, answer) = post(path, headers, body.to_vec());
    check(path, status, &answer);
});
