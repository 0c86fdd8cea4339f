//! Docker toolkits follow the plugins directory like `.wasm` files: a folder
//! dropped into a running server becomes callable, an edited manifest swaps
//! the toolkit (calls in flight finish, its nodes are replaced), a removed
//! folder takes its tools and containers with it.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::*;

const WAIT: Duration = Duration::from_secs(60);

/// Write the shell toolkit (manifest passed through `edit`) as folder
/// `name` of `plugins`: built beside it, then renamed into place.
fn drop_toolkit(plugins: &std::path::Path, name: &str, edit: impl Fn(String) -> String) {
    let staging = plugins.join(format!(".staging-{name}"));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).unwrap();
    let src = repo_root().join("plugins/shell");
    std::fs::copy(src.join("driver.py"), staging.join("driver.py")).unwrap();
    let manifest = std::fs::read_to_string(src.join("shell.toml")).unwrap();
    std::fs::write(staging.join(format!("{name}.toml")), edit(manifest)).unwrap();
    std::fs::rename(&staging, plugins.join(name)).unwrap();
}

/// The shell's stdout in an invoke body (its JSON item; a note may come first).
fn stdout(body: &Value) -> String {
    body["content"]
        .as_array()
        .and_then(|items| items.iter().find(|c| c["type"] == "json"))
        .and_then(|c| c["json"]["stdout"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_toolkit_folder_is_hot_loaded_swapped_and_removed() {
    if !require_docker() {
        return;
    }
    let s = Server::start(PluginsDir::new().add("calc", "calc"));
    assert!(!s.tool_ids().iter().any(|t| t.starts_with("sh_")));

    // Dropped in: callable.
    drop_toolkit(s.plugins_dir(), "sh", cold);
    let listed = wait_for(WAIT, || {
        s.tool_ids().contains(&"sh_run".to_owned()).then_some(())
    });
    assert!(listed.is_some(), "{}", s.log());
    let (status, body) = s.invoke_in("t1", "sh_run", json!({"command": "echo one; export V=1"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(stdout(&body), "one\n");
    let first = s.containers();
    assert_eq!(first.len(), 1);
    let v1 = s.plugin("sh").unwrap()["version"].clone();

    // Edited: a new version serves, and the session's node of the old one is
    // replaced (its state is gone, with a note saying why).
    let manifest = s.plugins_dir().join("sh/sh.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let edited = text.replace("idle_timeout_s = 600", "idle_timeout_s = 900");
    assert_ne!(text, edited);
    write_then_rename(&manifest, edited.as_bytes());
    let swapped = wait_for(WAIT, || {
        s.plugin("sh")
            .filter(|p| p["version"] != v1 && p["state"] == "ready")
    });
    assert!(swapped.is_some(), "{:?}\n{}", s.plugin("sh"), s.log());
    let (status, body) = s.invoke_in("t1", "sh_run", json!({"command": "echo two ${V:-unset}"}));
    assert_eq!(status, 200, "{body}");
    assert!(stdout(&body).contains("two unset"), "a fresh node: {body}");
    assert!(body.to_string().contains("was updated"), "{body}");
    let replaced = wait_for(WAIT, || {
        let now = s.containers();
        (now.len() == 1 && now != first).then_some(())
    });
    assert!(replaced.is_some(), "{:?} vs {first:?}", s.containers());

    // Removed: its tools and its containers go.
    std::fs::remove_dir_all(s.plugins_dir().join("sh")).unwrap();
    let gone = wait_for(WAIT, || {
        (!s.tool_ids().iter().any(|t| t.starts_with("sh_"))).then_some(())
    });
    assert!(gone.is_some(), "{}", s.log());
    assert!(s.plugin("sh").is_none());
    assert!(s.wait_no_containers(), "{:?}", s.containers());
    let (status, _) = s.invoke_in("t1", "sh_run", json!({"command": "true"}));
    assert_eq!(status, 404);
    // The wasm plugin served throughout.
    let (status, _) = s.invoke("calc_evaluate", json!({"expression": "1+1"}));
    assert_eq!(status, 200);
}

#[test]
fn a_toolkit_that_cannot_run_is_listed_unavailable_and_answers_503() {
    // No engine at all: the folder still loads (its tools listed), its state
    // says why it cannot run, and its calls answer 503.
    let s = Server::start_env(
        PluginsDir::new().add("calc", "calc"),
        None,
        &[("DOCKER_HOST", "unix:///nonexistent/docker.sock")],
    )
    .unwrap();
    drop_toolkit(s.plugins_dir(), "sh", cold);
    let p = wait_for(WAIT, || {
        s.plugin("sh").filter(|p| p["state"] == "unavailable")
    })
    .unwrap_or_else(|| panic!("{:?}\n{}", s.plugin("sh"), s.log()));
    assert!(
        p["error"].as_str().unwrap().contains("not reachable"),
        "{p}"
    );
    assert!(s.tool_ids().contains(&"sh_run".to_owned()));
    let (status, body) = s.invoke("sh_run", json!({"command": "true"}));
    assert_eq!(
        (status, kind(&body)),
        (503, "backend_unavailable"),
        "{body}"
    );
    // A folder whose manifest does not parse is `failed` with the reason.
    drop_toolkit(s.plugins_dir(), "broken", |_| {
        "[docker]\nimage = 3\n".into()
    });
    let p = wait_for(WAIT, || {
        s.plugin("broken").filter(|p| p["state"] == "failed")
    })
    .unwrap_or_else(|| panic!("{:?}", s.plugin("broken")));
    assert!(p["error"].as_str().is_some(), "{p}");
}

/// The `mock` backend (docs/adding-a-backend.md's worked example), end to
/// end: a `[mock]` folder dropped into a running server is served on the
/// native API, XAgent's protocol and MCP, its answers filled from the
/// input; `fail` is a tool error; a bad manifest is `failed` with the
/// reason while the others serve; an edit is hot-reloaded, and every list
/// (native OpenAI and MCP formats, MCP's tools/list, each keeping what it
/// made of a tool) describes the new version; a removal takes its tools. A
/// `[mock]` folder never goes to another folder backend.
#[test]
fn mock_toolkits_are_served_on_every_surface() {
    let s = Server::start(PluginsDir::new().add("calc", "calc"));
    let manifest = r#"description = "Weather, canned."
[mock]
[[mock.tools]]
name = "forecast"
description = "Tomorrow's forecast for a city."
input_schema = { type = "object", required = ["city"], properties = { city = { type = "string" } } }
answer = { city = "{city}", sky = "sunny", high_c = 21 }
[[mock.tools]]
name = "alerts"
description = "Weather alerts."
fail = "no alerts service for {city}"
"#;
    let dir = s.plugins_dir().join("weather");
    let staging = s.plugins_dir().join(".staging-weather");
    std::fs::create_dir_all(&staging).unwrap();
    std::fs::write(staging.join("weather.toml"), manifest).unwrap();
    std::fs::rename(&staging, &dir).unwrap();
    let listed = wait_for(WAIT, || {
        s.tool_ids()
            .contains(&"weather_forecast".to_owned())
            .then_some(())
    });
    assert!(listed.is_some(), "{:?}\n{}", s.plugin("weather"), s.log());
    assert_eq!(s.plugin("weather").unwrap()["backend"], "mock");

    let (status, out) = s.invoke("weather_forecast", json!({"city": "Oslo"}));
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        out["result"],
        json!({"city": "Oslo", "sky": "sunny", "high_c": 21})
    );
    let (status, out) = s.invoke("weather_forecast", json!({"town": "Oslo"}));
    assert_eq!((status, kind(&out)), (422, "invalid_input"), "{out}");
    let (status, out) = s.invoke("weather_alerts", json!({"city": "Bergen"}));
    assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");
    assert!(
        out.to_string().contains("no alerts service for Bergen"),
        "{out}"
    );

    let x = toolhost_e2e::xagent::XAgent::connect(&s);
    let (status, body) = x.execute("weather_forecast", json!({"city": "Rome"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["city"], "Rome", "{body}");

    let mut mcp = toolhost_e2e::mcp::McpClient::new(&s);
    mcp.initialize("2025-11-25");
    let r = mcp.call(7, "weather_forecast", json!({"city": "Lima"}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(r["result"]["structuredContent"]["city"], "Lima", "{r}");

    // A bad edit: failed with the reason, the good version keeps serving.
    std::fs::write(
        dir.join("weather.toml"),
        "[mock]\n[[mock.tools]]\nname = \"x\"\n",
    )
    .unwrap();
    let failed = wait_for(WAIT, || {
        s.plugin("weather").filter(|p| {
            p["error"]
                .as_str()
                .is_some_and(|e| e.contains("description"))
        })
    });
    assert!(failed.is_some(), "{:?}", s.plugin("weather"));
    let (status, _) = s.invoke("weather_forecast", json!({"city": "Oslo"}));
    assert_eq!(status, 200);
    // What each list says of the tool (the lists keep what they made of
    // it until it is reloaded): native OpenAI and MCP formats, MCP's
    // tools/list.
    let described = |mcp: &toolhost_e2e::mcp::McpClient| {
        let (_, openai) = s.get("/tools?format=openai");
        let (_, native_mcp) = s.get("/tools?format=mcp");
        let listed = mcp.request(8, "tools/list", json!({}));
        let pick = |list: &Value, name: &str| {
            list.as_array()
                .and_then(|l| l.iter().find(|t| t["name"] == "weather_forecast"))
                .map(|t| t[name].clone())
                .unwrap_or(Value::Null)
        };
        let openai = openai["tools"]
            .as_array()
            .and_then(|l| {
                l.iter()
                    .find(|t| t["function"]["name"] == "weather_forecast")
            })
            .map(|t| t["function"]["description"].clone());
        [
            openai.unwrap_or(Value::Null),
            pick(&native_mcp["tools"], "description"),
            pick(&listed["result"]["tools"], "description"),
        ]
    };
    let before = json!("Tomorrow's forecast for a city.");
    assert_eq!(described(&mcp), [before.clone(), before.clone(), before]);
    // A good edit is hot-reloaded, and every list says what it now is.
    let edited = manifest
        .replace("sunny", "rain")
        .replace("Tomorrow's forecast", "The forecast");
    std::fs::write(dir.join("weather.toml"), edited).unwrap();
    let reloaded = wait_for(WAIT, || {
        let (_, out) = s.invoke("weather_forecast", json!({"city": "Oslo"}));
        (out["result"]["sky"] == "rain").then_some(())
    });
    assert!(reloaded.is_some(), "{}", s.log());
    let after = json!("The forecast for a city.");
    assert_eq!(described(&mcp), [after.clone(), after.clone(), after]);
    // Removed: its tools go.
    std::fs::remove_dir_all(&dir).unwrap();
    let gone = wait_for(WAIT, || {
        (!s.tool_ids().contains(&"weather_forecast".to_owned())).then_some(())
    });
    assert!(gone.is_some());
    let (status, _) = s.invoke("calc_evaluate", json!({"expression": "1"}));
    assert_eq!(status, 200);
}

/// Issue #35, names: entries of different kinds with one name. The one
/// there first serves, whatever the backends' order, and the other is
/// refused with both names before anything of it is loaded; on a restart
/// the same one wins, and reversing their ages reverses the outcome. An
/// entry of another kind added to a running server under a served name is
/// refused the same way, and the served one carries on.
#[test]
fn which_entry_keeps_a_name_never_depends_on_start_order() {
    let mock = |tool: &str| {
        format!(
            "[mock]\n[[mock.tools]]\nname = \"{tool}\"\ndescription = \"canned\"\nanswer = \"mocked\"\n"
        )
    };
    let touch = |path: &std::path::Path, when: &str| {
        let ok = std::process::Command::new("touch")
            .args(["-m", "-d", when])
            .arg(path)
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    let plugins = PluginsDir::new()
        .add("files", "files")
        .folder("files", &[("files.toml", &mock("write"))]);
    let dir = plugins.path().to_owned();
    touch(&dir.join("files.wasm"), "2020-01-01");
    touch(&dir.join("files.toml"), "2020-01-01");
    touch(&dir.join("files/files.toml"), "2021-01-01");
    let mut s = Server::start(plugins);
    let entry_of = |s: &Server, backend: &str| {
        s.get("/plugins").1["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "files" && p["backend"] == backend)
            .cloned()
            .unwrap_or_default()
    };
    let (status, out) = s.invoke_in(
        "n1",
        "files_write",
        json!({"path": "a.txt", "content": "x"}),
    );
    assert_eq!(status, 200, "{out}");
    assert!(
        out["result"]
            .as_str()
            .unwrap_or_default()
            .starts_with("wrote"),
        "{out}"
    );
    let refused = entry_of(&s, "mock");
    assert_eq!(refused["state"], "failed", "{refused}");
    let why = refused["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("taken by the wasm entry `files`") && why.contains("mock"),
        "{why}"
    );

    // Restarted: the same one wins.
    s.restart().unwrap();
    let (status, _) = s.invoke_in("n1", "files_read", json!({"path": "a.txt"}));
    assert_eq!(status, 200);
    assert_eq!(entry_of(&s, "mock")["state"], "failed");

    // The folder older than the component: the folder wins.
    touch(&dir.join("files/files.toml"), "2019-01-01");
    s.restart().unwrap();
    let (status, out) = s.invoke("files_write", json!({}));
    assert_eq!((status, &out["result"]), (200, &json!("mocked")), "{out}");
    let refused = entry_of(&s, "wasm");
    assert_eq!(refused["state"], "failed", "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or_default()
            .contains("taken by the mock entry"),
        "{refused}"
    );

    // Added while the server runs under a served name: refused, nothing of
    // it loaded, the served one unaffected.
    let calc = PluginsDir::new().add("calc", "calc");
    let s = Server::start(calc);
    let staging = s.plugins_dir().join(".staging");
    std::fs::create_dir_all(&staging).unwrap();
    std::fs::write(staging.join("calc.toml"), mock("evaluate")).unwrap();
    std::fs::rename(&staging, s.plugins_dir().join("calc")).unwrap();
    let refused = wait_for(WAIT, || {
        let p = s.get("/plugins").1["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "calc" && p["backend"] == "mock")
            .cloned()?;
        (p["state"] == "failed").then_some(p)
    });
    let refused = refused.expect("the clashing folder is refused");
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or_default()
            .contains("taken by the wasm entry `calc`"),
        "{refused}"
    );
    let (status, out) = s.invoke("calc_evaluate", json!({"expression": "6*7"}));
    assert_eq!(
        (status, &out["result"]["value"]),
        (200, &json!(42.0)),
        "{out}"
    );
}
