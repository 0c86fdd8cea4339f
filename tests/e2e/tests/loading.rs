//! Loading components: bad files are refused with a clear reason while the
//! good plugins serve; the `inspect` and `call` commands use the same loader.

use std::process::Command;

use serde_json::{Value, json};
use toolhost_e2e::{PluginsDir, Server, binary, component};

#[test]
fn bad_components_are_refused_and_the_rest_serves() {
    let calc = std::fs::read(component("calc").0).unwrap();
    let plugins = PluginsDir::new()
        .add("calc", "calc")
        .add("wrong-version", "old")
        .write("junk.wasm", b"this is not wasm at all")
        .write("truncated.wasm", &calc[..calc.len() / 2])
        // The smallest core module: header only.
        .write("core.wasm", b"\0asm\x01\0\0\0")
        .write("badmanifest.wasm", &calc)
        .write("badmanifest.toml", "[limits]\nfuell = 5\n")
        .write("toomuch.wasm", &calc)
        .write("toomuch.toml", "[limits]\nmemory_mb = 100000\n")
        .write("Bad_Name.wasm", &calc)
        .write("notes.txt", "ignored");
    let s = Server::start(plugins);

    let (_, body) = s.get("/tools");
    let ids: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tool_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["calc_evaluate"]);

    let log = s.log();
    for expected in [
        "not a WebAssembly file",
        "the component does not compile",
        "a core WebAssembly module, not a component",
        "targets toolhost:plugin@0.9.0; this host accepts toolhost:plugin@0.1.0",
        "unknown field `fuell`",
        "memory_mb = 100000 is out of range",
        "invalid plugin name `Bad_Name`",
    ] {
        assert!(log.contains(expected), "log lacks {expected:?}:\n{log}");
    }
    let (status, out) = s.invoke("calc_evaluate", json!({"expression": "6*7"}));
    assert_eq!((status, out["result"]["value"].as_f64()), (200, Some(42.0)));
}

#[test]
fn inspect_and_call_run_a_component_without_a_server() {
    let (calc, _) = component("calc");
    let out = Command::new(binary())
        .arg("inspect")
        .arg(&calc)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["plugin"], "calc");
    assert_eq!(v["tools"][0]["tool_id"], "calc_evaluate");
    assert!(v["tools"][0]["input_schema"]["properties"]["expression"].is_object());

    let out = Command::new(binary())
        .args(["call"])
        .arg(&calc)
        .args(["evaluate", r#"{"expression": "sqrt(16) + 1"}"#])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["value"], 5.0);

    let out = Command::new(binary())
        .args(["call"])
        .arg(&calc)
        .args(["evaluate", r#"{"expression": 5}"#])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_input"));

    let (old, _) = component("wrong-version");
    let out = Command::new(binary())
        .arg("inspect")
        .arg(&old)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("toolhost:plugin@0.9.0"));

    // `call --workspace` gives the files plugin a real directory.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hi there").unwrap();
    let (files, _) = component("files");
    let out = Command::new(binary())
        .args(["call"])
        .arg(&files)
        .args(["read", r#"{"path": "hello.txt"}"#, "--workspace"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"], "hi there");

    // Without its manifest beside it the component has no grants: the call
    // fails as the plugin sees it, and the CLI says why.
    let bare = dir.path().join("bare.wasm");
    std::fs::copy(&files, &bare).unwrap();
    let out = Command::new(binary())
        .args(["call"])
        .arg(&bare)
        .args(["read", r#"{"path": "hello.txt"}"#, "--workspace"])
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("bare.toml beside the component"), "{err}");
}
