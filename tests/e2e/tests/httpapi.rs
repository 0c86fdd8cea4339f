//! API tools against real services nobody here wrote, started locally:
//! httpbin (Flask, its own Swagger 2.0 spec) and httpbinx (FastAPI, its own
//! OpenAPI 3.1 spec), each spec read from the running service's URL, plus a
//! local YAML spec file and single endpoints. Called on every surface,
//! hot-loaded and removed; and everything that should fail does, alone,
//! within its time, without the secret.

use std::io::Read;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_e2e::mcp::McpClient;
use toolhost_e2e::services::{Kind, Service};
use toolhost_e2e::xagent::XAgent;
use toolhost_e2e::*;

const SECRET: &str = "s3cr3t-Value-4242";

fn api_manifest(spec: &str, base: &str, allow: &[String], extra: &str) -> String {
    format!("[api]\nspec = \"{spec}\"\nbase_url = \"{base}\"\nallow = {allow:?}\n{extra}\n",)
}

/// The first content item of a native invoke answer.
fn first(body: &Value) -> &Value {
    &body["content"][0]
}

#[test]
fn real_specs_become_tools_on_every_surface() {
    let hb = Service::start(Kind::Httpbin);
    let hbx = Service::start(Kind::Httpbinx);
    let notes = std::fs::read_to_string(repo_root().join("tests/fixtures/api/notes.yaml")).unwrap();
    let plugins = PluginsDir::new()
        .add("calc", "calc")
        .folder(
            "hb",
            &[(
                "hb.toml",
                &api_manifest(&hb.url("/spec.json"), &hb.url(""), &[hb.host()], ""),
            )],
        )
        .folder(
            "hbx",
            &[(
                "hbx.toml",
                &api_manifest(&hbx.url("/openapi.json"), &hbx.url(""), &[hbx.host()], ""),
            )],
        )
        .folder(
            "notes",
            &[
                (
                    "notes.toml",
                    &api_manifest("notes.yaml", &hb.url(""), &[hb.host()], ""),
                ),
                ("notes.yaml", &notes),
            ],
        );
    let s = Server::start(plugins);
    for name in ["hb", "hbx", "notes"] {
        let p = s.plugin(name).unwrap_or_else(|| panic!("{name} listed"));
        assert_eq!(
            (p["state"].as_str(), p["backend"].as_str()),
            (Some("ready"), Some("api")),
            "{p}"
        );
    }
    let ids = s.tool_ids();
    assert!(ids.len() > 80, "every operation of both specs: {ids:?}");

    // Path parameter, text answer (Swagger 2.0, no operationIds).
    let (status, body) = s.invoke(
        "hb_get_base64_value",
        json!({"value": "aGVsbG8gdG9vbGhvc3Q="}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(first(&body)["text"], "hello toolhost", "{body}");
    // A path parameter never leaves the operation's path (issue #37 item 6):
    // `..` is refused before any request; `/` and `?` stay in the segment.
    for value in ["..", "."] {
        let (status, body) = s.invoke("hb_get_base64_value", json!({ "value": value }));
        assert_eq!((status, kind(&body)), (422, "invalid_input"), "{body}");
    }
    let (status, body) = s.invoke("hb_get_base64_value", json!({"value": "../../get?x"}));
    assert!(
        status != 200 || !body.to_string().contains("\"url\""),
        "{body}"
    );
    // Query and path parameters, a binary answer (OpenAPI 3.1): the seed
    // makes the bytes repeatable.
    let bytes = |seed: u64| {
        let (status, body) = s.invoke(
            "hbx_random_bytes_bytes_n_get",
            json!({"n": 48, "seed": seed}),
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(first(&body)["type"], "binary", "{body}");
        assert_eq!(first(&body)["media_type"], "application/octet-stream");
        first(&body)["data"].as_str().unwrap().to_owned()
    };
    assert_eq!(bytes(7), bytes(7));
    assert_ne!(bytes(7), bytes(8));
    // An image.
    let (status, body) = s.invoke("hb_get_image_png", json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(first(&body)["media_type"], "image/png");
    assert!(
        first(&body)["data"]
            .as_str()
            .unwrap()
            .starts_with("iVBORw0KGgo"),
        "PNG magic"
    );
    // JSON body through a $ref, a header, a repeated query parameter (local
    // YAML spec): the service echoes what it received.
    let schema = s.get("/tools/notes_createnote").1;
    assert_eq!(
        schema["input_schema"]["properties"]["body"]["required"],
        json!(["text"]),
        "{schema}"
    );
    let (status, body) = s.invoke(
        "notes_createnote",
        json!({"folder": "to do", "X-Trace": "t-1", "tag": ["a", "b"], "body": {"text": "milk", "pinned": null}}),
    );
    assert_eq!(status, 200, "{body}");
    let echo = &first(&body)["json"];
    assert_eq!(
        echo["json"],
        json!({"text": "milk", "pinned": null}),
        "{body}"
    );
    assert_eq!(echo["headers"]["X-Trace"], "t-1");
    assert_eq!(echo["args"]["tag"], json!(["a", "b"]));
    assert_eq!(echo["method"], "POST");
    assert!(
        echo["url"]
            .as_str()
            .unwrap()
            .contains("/anything/notes/to%20do?"),
        "{echo}"
    );
    // Schema checked before anything is sent.
    let (status, body) = s.invoke(
        "notes_createnote",
        json!({"folder": "x", "body": {"text": "milk"}}),
    );
    assert_eq!((status, kind(&body)), (422, "invalid_input"), "{body}");
    // A header parameter of httpbin's own spec.
    let (status, body) = s.invoke("hb_get_bearer", json!({"Authorization": "Bearer tok-1"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        first(&body)["json"],
        json!({"authenticated": true, "token": "tok-1"}),
        "{body}"
    );
    // A 4xx becomes a tool error with the status and an excerpt.
    let (status, body) = s.invoke("hb_get_status_codes", json!({"codes": "418"}));
    assert_eq!((status, kind(&body)), (500, "tool_error"), "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("HTTP 418") && message.contains("teapot"),
        "{message}"
    );
    let (_, body) = s.invoke("hbx_status_code_status_codes_get", json!({"codes": "404"}));
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("HTTP 404"),
        "{body}"
    );
    // Redirects are followed on the allowed host ...
    let (status, body) = s.invoke("hb_get_redirect_n", json!({"n": 3}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(first(&body)["json"]["url"], hb.url("/get"), "{body}");
    // ... and refused off it (never sent there).
    let elsewhere = format!("http://127.0.0.1:{}/get", hbx.port);
    let (status, body) = s.invoke(
        "hb_get_redirect_to",
        json!({"url": elsewhere, "status_code": 302}),
    );
    assert_eq!(status, 500, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("redirect refused"),
        "{body}"
    );

    // XAgent's surface.
    let x = XAgent::connect(&s);
    let executed = x.execute("hb_get_base64_value", json!({"value": "eGFnZW50"}));
    assert_eq!(executed, (200, json!("xagent")));
    // MCP's.
    let mut mcp = McpClient::new(&s);
    mcp.initialize("2025-06-18");
    let answer = mcp.call(2, "hb_get_uuid", json!({}));
    let uuid = &answer["result"]["structuredContent"]["uuid"];
    assert_eq!(uuid.as_str().map(str::len), Some(36), "{answer}");
    let answer = mcp.call(3, "hb_get_status_codes", json!({"codes": "503"}));
    assert_eq!(answer["result"]["isError"], true, "{answer}");

    // Hot-loaded: a single endpoint dropped into the running server ...
    let staging = s.plugins_dir().join(".echo");
    std::fs::create_dir_all(&staging).unwrap();
    let manifest = format!(
        "description = \"Echo JSON.\"\n[api]\nallow = [\"{}\"]\n[[tools]]\nname = \"post\"\nmethod = \"POST\"\nurl = \"{}\"\n\
         input_schema = {{ type = \"object\", properties = {{ item = {{ type = \"string\" }}, n = {{ type = \"integer\" }} }}, required = [\"item\"] }}\n",
        hb.host(),
        hb.url("/anything/{item}")
    );
    std::fs::write(staging.join("echo.toml"), manifest).unwrap();
    std::fs::rename(&staging, s.plugins_dir().join("echo")).unwrap();
    let loaded = wait_for(Duration::from_secs(10), || {
        let (status, body) = s.invoke("echo_post", json!({"item": "pen", "n": 2}));
        (status == 200).then_some(body)
    })
    .expect("the dropped toolkit is served");
    assert_eq!(first(&loaded)["json"]["json"], json!({"n": 2}), "{loaded}");
    assert!(
        first(&loaded)["json"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/anything/pen")
    );
    // ... and removed.
    std::fs::remove_dir_all(s.plugins_dir().join("echo")).unwrap();
    let gone = wait_for(Duration::from_secs(10), || {
        (s.invoke("echo_post", json!({"item": "x"})).0 == 404).then_some(())
    });
    assert!(gone.is_some(), "a removed toolkit's tools go");
    assert_eq!(
        s.invoke("calc_evaluate", json!({"expression": "1+1"})).0,
        200
    );
}

/// A listener that accepts connections and never answers.
fn mute_listener() -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().take(4).flatten() {
            held.push(conn);
        }
        std::thread::sleep(Duration::from_secs(20));
        for mut c in held {
            let _ = c.read(&mut [0; 1]);
        }
    });
    (port, handle)
}

#[test]
fn bad_api_toolkits_fail_alone_in_time_and_never_show_the_secret() {
    let hb = Service::start(Kind::Httpbin);
    let hbx = Service::start(Kind::Httpbinx);
    let (mute, _held) = mute_listener();
    let closed = free_port().unwrap();
    let endpoint = |name: &str, url: &str, allow: &str, extra: &str| {
        format!(
            "[api]\nallow = [\"{allow}\"]\n{extra}\n[[tools]]\nname = \"{name}\"\nurl = \"{url}\"\n"
        )
    };
    let keyed = |kind: &str| {
        format!(
            "[api]\nspec = \"{}\"\nbase_url = \"{}\"\nallow = [\"{}\"]\npaths = [\"/anything\", \"/headers\", \"/get\"]\n\
             [api.auth]\nkind = \"{kind}\"\nname = \"X-Api-Key\"\nsecret = \"DEMO_KEY\"\n",
            hb.url("/spec.json"),
            hb.url(""),
            hb.host()
        )
    };
    let plugins = PluginsDir::new()
        .add("calc", "calc")
        .folder("broken", &[("broken.toml", "[api]\nspec = \"s.json\"\n"), ("s.json", "{ \"openapi\": [ oops")])
        .folder(
            "dangling",
            &[
                ("dangling.toml", &api_manifest("s.json", &hb.url(""), &[hb.host()], "")),
                (
                    "s.json",
                    r##"{"openapi": "3.0.0", "paths": {"/get": {"get": {"parameters": [{"$ref": "#/components/parameters/Nope"}], "responses": {}}}}}"##,
                ),
            ],
        )
        .folder(
            "offlist",
            &[("offlist.toml", &endpoint("x", &hb.url("/get"), "example.org", ""))],
        )
        .folder(
            "down",
            &[(
                "down.toml",
                &endpoint("get", &format!("http://127.0.0.1:{closed}/"), &format!("127.0.0.1:{closed}"), "connect_timeout_ms = 1000"),
            )],
        )
        .folder(
            "mute",
            &[(
                "mute.toml",
                &endpoint("get", &format!("http://127.0.0.1:{mute}/"), &format!("127.0.0.1:{mute}"), "timeout_ms = 1500"),
            )],
        )
        .folder(
            "capped",
            &[(
                "capped.toml",
                &api_manifest(
                    &hbx.url("/openapi.json"),
                    &hbx.url(""),
                    &[hbx.host()],
                    "max_response_kb = 16\npaths = [\"/bytes/*\"]",
                ),
            )],
        )
        .folder(
            "typo",
            &[(
                "typo.toml",
                &api_manifest(&hb.url("/spec.json"), &hb.url(""), &[hb.host()], "paths = [\"/get\"]\ntags = [\"Nope\"]"),
            )],
        )
        .folder(
            "lenient",
            &[(
                "lenient.toml",
                &api_manifest(&hb.url("/spec.json"), &hb.url(""), &[hb.host()], "paths = [\"/get\"]\ntags = [\"Nope\"]\nlenient = true"),
            )],
        )
        .folder("keyh", &[("keyh.toml", &keyed("header"))])
        .folder("keyq", &[("keyq.toml", &keyed("query"))])
        .folder("keyb", &[("keyb.toml", &keyed("bearer"))]);
    let s = Server::start_env(
        plugins,
        Some(&format!("[secrets]\nDEMO_KEY = \"{SECRET}\"\n")),
        &[],
    )
    .unwrap();

    // A spec that does not parse, a dangling $ref, a host off the list:
    // that toolkit failed, with the reason; the rest are served.
    for (name, says) in [
        ("broken", "neither JSON"),
        (
            "dangling",
            "unresolvable $ref `#/components/parameters/Nope`",
        ),
        ("offlist", "not in the manifest's [api] allow list"),
        (
            "typo",
            "[api] tags names `Nope`, which the spec does not have",
        ),
    ] {
        let p = s.plugin(name).unwrap();
        assert_eq!(p["state"], "failed", "{p}");
        assert!(p["error"].as_str().unwrap().contains(says), "{name}: {p}");
    }
    // With `lenient`, what the spec lacks is a warning beside the tools.
    let p = s.plugin("lenient").unwrap();
    assert_eq!(p["state"], "ready", "{p}");
    assert!(p["warnings"][0].as_str().unwrap().contains("`Nope`"), "{p}");
    assert_eq!(p["tools"], json!(["lenient_get_get"]), "{p}");
    assert_eq!(
        s.invoke("calc_evaluate", json!({"expression": "2*3"})).0,
        200
    );

    // Nobody listening: 503 at once. A service that never answers: a
    // timeout error at its limit. Other tools answer meanwhile.
    let started = Instant::now();
    let (status, body) = s.invoke("down_get", json!({}));
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let calls = std::thread::scope(|scope| {
        let slow = scope.spawn(|| {
            let started = Instant::now();
            (s.invoke("mute_get", json!({})), started.elapsed())
        });
        std::thread::sleep(Duration::from_millis(300));
        let quick = s.invoke("calc_evaluate", json!({"expression": "1+2"}));
        (slow.join().unwrap(), quick)
    });
    let (((status, body), took), (quick, _)) = calls;
    assert_eq!((status, kind(&body)), (504, "timeout"), "{body}");
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert_eq!(quick, 200, "other tools answer while one waits");

    // Over the size cap: an error (the body is not read past it).
    assert_eq!(
        s.plugin("capped").unwrap()["state"],
        "ready",
        "{}",
        s.plugin("capped").unwrap()
    );
    let rss = s.rss_kib();
    let (status, body) = s.invoke("capped_random_bytes_bytes_n_get", json!({"n": 100000}));
    assert_eq!((status, kind(&body)), (500, "output_too_large"), "{body}");
    let (status, _) = s.invoke("capped_random_bytes_bytes_n_get", json!({"n": 1000}));
    assert_eq!(status, 200);
    if let (Some(before), Some(after)) = (rss, s.rss_kib()) {
        assert!(
            after < before + 64 * 1024,
            "memory stays flat: {before} -> {after} KiB"
        );
    }

    // The secret reaches the service (it echoes it back), and never the
    // caller, the listings or the log.
    let mut seen = Vec::new();
    for (tool, args) in [
        ("keyh_get_headers", json!({})),
        ("keyq_get_anything", json!({})),
        ("keyb_get_headers", json!({})),
        ("keyq_get_get", json!({})),
    ] {
        let (status, body) = s.invoke(tool, args);
        assert_eq!(status, 200, "{tool}: {body}");
        seen.push(body.to_string());
    }
    assert!(
        seen[0].contains("\"X-Api-Key\":\"[secret]\""),
        "the header was sent: {}",
        seen[0]
    );
    assert!(
        seen[1].contains("api_key") || seen[1].contains("X-Api-Key"),
        "{}",
        seen[1]
    );
    assert!(seen[2].contains("Bearer [secret]"), "{}", seen[2]);
    seen.push(s.get("/tools").1.to_string());
    seen.push(s.get("/plugins").1.to_string());
    seen.push(s.get("/tools/keyq_get_anything").1.to_string());
    let (_, metrics) = (
        0,
        reqwest::blocking::get(s.url("/metrics"))
            .unwrap()
            .text()
            .unwrap(),
    );
    seen.push(metrics);
    seen.push(s.log());
    for text in &seen {
        assert!(!text.contains(SECRET), "the secret leaked: {text}");
    }
}
