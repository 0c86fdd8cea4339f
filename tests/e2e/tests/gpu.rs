//! GPUs asked for where no engine has one (this machine's Docker lists no
//! `nvidia` runtime): a toolkit with `gpu = true` (seed 004's `use_gpu`)
//! is unavailable with that reason, its calls answer 503 naming it, and no
//! container of it is ever made; a build environment asking for a GPU is
//! refused the same way. (The device request an engine with one receives
//! is unit-tested in `nodes::docker::gpu`.)

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::*;

const TOKEN: &str = "admin-admin-admin-admin";
const TINY: &str = include_str!("../../fixtures/services/tiny.py");

#[test]
fn gpu_toolkits_and_environments_are_refused_by_name_where_no_engine_has_a_gpu() {
    if !require_docker() {
        return;
    }
    let manifest = "[docker]\nimage = \"toolhost-node:latest\"\ncommand = [\"python3\", \"-u\", \"/toolkit/tiny.py\"]\n\
         internal_port = 9000\ncpus = 0.25\nmemory_mb = 128\nuse_gpu = true\ngpu_count = 1\n\
         [[tools]]\nname = \"ok\"\ndescription = \"Echo.\"\nendpoint_path = \"/ok\"\ninput_schema = { type = \"object\" }\n";
    let s = Server::start_with(
        PluginsDir::new().folder(
            "gpuhungry",
            &[("gpuhungry.toml", manifest), ("tiny.py", TINY)],
        ),
        Some(&format!("[auth]\nadmin_token = \"{TOKEN}\"\n")),
    )
    .unwrap();
    // Unavailable by the monitor's look, before any call.
    let p = wait_for(Duration::from_secs(15), || {
        s.plugin("gpuhungry")
            .filter(|p| p["state"] == "unavailable")
    })
    .unwrap_or_else(|| panic!("{:?}\n{}", s.plugin("gpuhungry"), s.log()));
    let reason = p["error"].as_str().unwrap_or_default().to_owned() + &p.to_string();
    assert!(
        reason.contains("no Docker engine here has a GPU runtime"),
        "{p}"
    );
    let (_, tool) = s.get("/tools/gpuhungry_ok");
    assert_eq!(tool["limits"]["use_gpu"], true, "{tool}");
    assert_eq!(tool["limits"]["gpu_count"], 1, "{tool}");
    let (code, body) = s.invoke("gpuhungry_ok", json!({}));
    assert_eq!(code, 503, "{body}");
    assert!(body.to_string().contains("GPU runtime"), "{body}");
    assert!(
        s.containers().is_empty(),
        "never started: {:?}",
        s.containers()
    );

    // A build environment asking for one: refused, named; none made.
    let r = s
        .client()
        .post(s.url("/admin/builder/create_env"))
        .bearer_auth(TOKEN)
        .json(&json!({"gpu": true, "cpus": 0.25, "memory_mb": 128}))
        .send()
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.to_string().contains("GPU runtime"), "{body}");
    assert!(s.containers().is_empty());
}
