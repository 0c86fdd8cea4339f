//! A plugin in each wasm language, built from source by `make plugins` (Rust:
//! cargo; Python: componentize-py through `sdk/python/build.sh`; JavaScript:
//! componentize-js through `sdk/js/build.sh`; C: clang + wasi-libc and
//! `toolhost componentize` through `sdk/c/build.sh`), dropped into
//! the plugins directory of a running server (hot load), listed, invoked, and
//! made to fail: the plugin's own error, an unexpected exception, a limit.
//! Includes `python_run`, sandboxed Python in wasm. Its builds keep both
//! cores busy: never beside another such binary (`lanes: heavy`,
//! tests/lanes.py).

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_e2e::{PluginsDir, Server, component, kind, wait_for, write_then_rename};

/// Drop component `name` (and its manifest) into the running server's
/// plugins directory and wait until `tool` is listed.
fn hot_load(s: &Server, name: &str, tool: &str) {
    let (wasm, toml) = component(name);
    if let Some(toml) = toml {
        std::fs::copy(toml, s.plugins_dir().join(format!("{name}.toml"))).unwrap();
    }
    write_then_rename(
        &s.plugins_dir().join(format!("{name}.wasm")),
        &std::fs::read(wasm).unwrap(),
    );
    // A Python component compiles for ~15 s on 2 cores.
    let listed = wait_for(Duration::from_secs(180), || {
        s.tool_ids().iter().any(|t| t == tool).then_some(())
    });
    assert!(
        listed.is_some(),
        "{tool} never listed: {:?}\n{}",
        s.plugin(name),
        s.log()
    );
}

#[test]
fn rust_and_python_plugins_hot_load_answer_and_fail_cleanly() {
    let s = Server::start(PluginsDir::new());
    hot_load(&s, "calc", "calc_evaluate");
    hot_load(&s, "textstats", "textstats_summary");
    hot_load(&s, "python", "python_run");

    // Rust.
    let (status, out) = s.invoke("calc_evaluate", json!({"expression": "2^8"}));
    assert_eq!(
        (status, &out["result"]["value"]),
        (200, &json!(256.0)),
        "{out}"
    );
    let (status, out) = s.invoke("calc_evaluate", json!({"expression": "1/0"}));
    assert_eq!((status, kind(&out)), (422, "invalid_input"), "{out}");
    let (status, out) = s.invoke_limited(
        "calc_evaluate",
        json!({"expression": "1+1"}),
        json!({"fuel": 10}),
    );
    assert_eq!((status, kind(&out)), (500, "out_of_fuel"), "{out}");

    // Python (the SDK: schema from type hints, typed errors).
    let (status, out) = s.invoke(
        "textstats_summary",
        json!({"text": "One two. Three four five!"}),
    );
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["result"]["words"], 5, "{out}");
    let (status, out) = s.invoke("textstats_summary", json!({"text": 5}));
    assert_eq!(
        (status, kind(&out)),
        (422, "invalid_input"),
        "the schema from the type hints: {out}"
    );
    let (status, out) = s.invoke_limited(
        "textstats_summary",
        json!({"text": "a b"}),
        json!({"memory_mb": 4}),
    );
    assert_eq!(status, 500, "{out}");
    assert!(
        ["out_of_memory", "trap"].contains(&kind(&out)),
        "a 4 MiB ceiling under the interpreter's 13 MiB snapshot: {out}"
    );
}

#[test]
fn javascript_plugins_hot_load_answer_and_fail_cleanly() {
    let s = Server::start(PluginsDir::new());
    hot_load(&s, "mdhtml", "mdhtml_render");
    hot_load(&s, "js-throws", "js-throws_ok");

    let (status, out) = s.invoke(
        "mdhtml_render",
        json!({"markdown": "# Hi there\n\nSome *em* and <script>x</script>"}),
    );
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        out["result"],
        "<h1 id=\"hi-there\">Hi there</h1>\n<p>Some <em>em</em> and &lt;script&gt;x&lt;/script&gt;</p>\n"
    );
    let (status, out) = s.invoke("mdhtml_toc", json!({"markdown": "# A\n## B"}));
    assert_eq!((status, &out["result"]["count"]), (200, &json!(2)), "{out}");
    let (status, out) = s.invoke("mdhtml_render", json!({"markdown": 7}));
    assert_eq!((status, kind(&out)), (422, "invalid_input"), "{out}");

    // Every way a JS tool can fail ends that call only, with its kind.
    let message = |out: &Value| out["error"]["message"].as_str().unwrap_or("").to_owned();
    let (status, out) = s.invoke("js-throws_boom", json!({}));
    assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");
    assert!(message(&out).contains("Error: boom from js"), "{out}");
    assert!(
        message(&out).contains("deeper"),
        "the stack names the function: {out}"
    );
    let (status, out) = s.invoke("js-throws_typed", json!({}));
    assert_eq!((status, kind(&out)), (422, "invalid_input"), "{out}");
    assert!(message(&out).contains("typed error from js"), "{out}");
    let (status, out) = s.invoke("js-throws_nonstring", json!({}));
    assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");
    assert!(message(&out).contains("42"), "{out}");
    let (status, out) = s.invoke("js-throws_rejects", json!({}));
    assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");
    assert!(message(&out).contains("rejected from js"), "{out}");
    let (status, out) = s.invoke("js-throws_spin", json!({}));
    assert_eq!((status, kind(&out)), (504, "timeout"), "{out}");
    let (status, out) = s.invoke("js-throws_hog", json!({}));
    assert_eq!((status, kind(&out)), (500, "out_of_memory"), "{out}");
    let (status, out) = s.invoke_limited("js-throws_ok", json!({}), json!({"fuel": 1000}));
    assert_eq!((status, kind(&out)), (500, "out_of_fuel"), "{out}");
    let (status, out) = s.invoke("js-throws_ok", json!({}));
    assert_eq!((status, &out["result"]), (200, &json!("ok")), "{out}");
}

#[test]
fn c_plugins_hot_load_answer_and_fail_cleanly() {
    let s = Server::start(PluginsDir::new());
    hot_load(&s, "checksum", "checksum_hash");
    hot_load(&s, "c-bad", "c-bad_ok");

    let hash = |text: &str, algorithm: &str| {
        let (status, out) = s.invoke(
            "checksum_hash",
            json!({"text": text, "algorithm": algorithm}),
        );
        assert_eq!(status, 200, "{out}");
        out["result"]["hex"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        hash("abc", "sha256"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(hash("123456789", "crc32"), "cbf43926");
    let (status, out) = s.invoke(
        "checksum_verify",
        json!({"text": "aGk=", "encoding": "base64", "algorithm": "sha256",
               "expected": "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4"}),
    );
    assert_eq!(
        (status, &out["result"]["match"]),
        (200, &json!(true)),
        "{out}"
    );
    let (status, out) = s.invoke(
        "checksum_hash",
        json!({"text": "a*b", "encoding": "base64", "algorithm": "sha256"}),
    );
    assert_eq!((status, kind(&out)), (422, "invalid_input"), "{out}");
    let (status, out) = s.invoke("checksum_hash", json!({"text": "abc", "algorithm": "md5"}));
    assert_eq!(
        (status, kind(&out)),
        (422, "invalid_input"),
        "not in the enum: {out}"
    );

    // What a C plugin can get wrong ends that call only, with a clear kind.
    let message = |out: &Value| out["error"]["message"].as_str().unwrap_or("").to_owned();
    let (status, out) = s.invoke("c-bad_bad_utf8", json!({}));
    assert_eq!((status, kind(&out)), (500, "trap"), "{out}");
    assert!(message(&out).contains("not valid UTF-8"), "{out}");
    let (status, out) = s.invoke("c-bad_bad_json", json!({}));
    assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");
    assert!(message(&out).contains("invalid JSON"), "{out}");
    for how in ["abort", "trap", "stack"] {
        let (status, out) = s.invoke("c-bad_crash", json!({"how": how}));
        assert_eq!((status, kind(&out)), (500, "trap"), "{how}: {out}");
    }
    let (status, out) = s.invoke("c-bad_leak", json!({}));
    assert_eq!((status, kind(&out)), (500, "out_of_memory"), "{out}");
    let (status, out) = s.invoke("c-bad_leak", json!({"graceful": true}));
    assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");
    let (status, out) = s.invoke("c-bad_ok", json!({}));
    assert_eq!((status, &out["result"]), (200, &json!("ok")), "{out}");
}

#[test]
fn python_run_is_sandboxed_python_in_milliseconds() {
    let s = Server::start(PluginsDir::new().add("python", "python"));
    let run = |session: &str, code: &str| {
        let (status, out) = s.invoke_in(session, "python_run", json!({"code": code}));
        assert_eq!(status, 200, "{code}: {out}");
        out["result"].clone()
    };
    let out = run(
        "p1",
        "import statistics\nprint('mean')\nstatistics.mean([1, 2, 3, 4])",
    );
    assert_eq!(out["stdout"], "mean\n");
    assert_eq!(out["result"], "2.5");
    assert_eq!(out["error"], Value::Null);

    // A snippet's exception is a result the agent reads, with the traceback.
    let out = run("p1", "def f():\n    return 1 / 0\nf()");
    assert_eq!(out["error"]["type"], "ZeroDivisionError", "{out}");
    assert!(
        out["error"]["traceback"]
            .as_str()
            .unwrap()
            .contains("line 2, in f"),
        "{out}"
    );

    // The session workspace is the current directory; nothing else is there.
    let out = run("p1", "open('data.csv', 'w').write('a,b\\n1,2\\n')");
    assert_eq!(out["error"], Value::Null, "{out}");
    let written = s.data.path().join("data/workspaces/p1/data.csv");
    assert_eq!(std::fs::read_to_string(written).unwrap(), "a,b\n1,2\n");
    let out = run("p2", "import os\nos.listdir('.')");
    assert_eq!(
        out["result"], "[]",
        "another session sees its own workspace: {out}"
    );
    for escape in [
        "open('/etc/passwd').read()",
        "open('../p1/data.csv').read()",
        "import os\nos.listdir('/')",
    ] {
        let out = run("p2", escape);
        let listed = out["result"].as_str().unwrap_or_default();
        assert!(
            out["error"].is_object() || !listed.contains("etc"),
            "{escape}: {out}"
        );
        assert!(!out.to_string().contains("root:"), "{escape}: {out}");
    }
    // No environment, no network.
    assert_eq!(run("p2", "import os\ndict(os.environ)")["result"], "{}");
    let out = run("p2", "import socket");
    assert_eq!(out["error"]["type"], "ModuleNotFoundError", "{out}");

    // Limits end runaway snippets; the next call is unaffected.
    let (status, out) = s.invoke("python_run", json!({"code": "while True: pass"}));
    assert_eq!(status, 500, "{out}");
    assert!(["out_of_fuel", "timeout"].contains(&kind(&out)), "{out}");
    let (status, out) = s.invoke("python_run", json!({"code": "x = bytearray(10**9)"}));
    assert_eq!((status, kind(&out)), (500, "out_of_memory"), "{out}");
    let (status, out) = s.invoke("python_run", json!({"code": 42}));
    assert_eq!((status, kind(&out)), (422, "invalid_input"), "{out}");
    assert_eq!(run("p3", "1+1")["result"], "2");
}

/// `toolhost new` + `toolhost build --out <plugins dir>`: from nothing to a
/// tool answering on a running server, the way the SDK docs say, in each
/// language whose template builds without compiling a Rust crate graph.
#[test]
fn a_new_plugin_in_each_language_builds_into_a_running_server() {
    // The compile cache at debug: whether a swap took the entry prepared as
    // it arrived (below).
    let s = Server::start_env(
        PluginsDir::new(),
        None,
        &[("TOOLHOST_LOG", "info,toolhost_core::wasm::cache=debug")],
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let toolhost = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new(toolhost_e2e::binary())
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let os = |s: &str| std::ffi::OsString::from(s);
    // `toolhost build <dir> --out <the served folder>`, then `extra`.
    let build_into = |dir: &std::path::Path, extra: &[&std::ffi::OsStr]| {
        let mut args = vec![
            std::ffi::OsStr::new("build"),
            dir.as_os_str(),
            std::ffi::OsStr::new("--out"),
            s.plugins_dir().as_os_str(),
        ];
        args.extend_from_slice(extra);
        toolhost(&args)
    };
    // The first `from` of `file` made `to`; `what` changed shape if none.
    let edit = |file: &std::path::Path, from: &str, to: &str, what: &str| {
        let text = std::fs::read_to_string(file).unwrap();
        let edited = text.replacen(from, to, 1);
        assert_ne!(text, edited, "{what} changed shape");
        std::fs::write(file, edited).unwrap();
    };
    for lang in ["python", "js", "c"] {
        let name = format!("greeter-{lang}");
        let (ok, err) = toolhost(&[
            &os("new"),
            &os("--lang"),
            &os(lang),
            &os(&name),
            &os("--dir"),
            work.path().as_os_str(),
        ]);
        assert!(ok, "{lang}: {err}");
        let dir = work.path().join(&name);
        if lang == "python" {
            // An exception the tool does not catch: a tool failure with its
            // type and message, not a crash.
            let mut app = std::fs::OpenOptions::new()
                .append(true)
                .open(dir.join("app.py"))
                .unwrap();
            std::io::Write::write_all(
                &mut app,
                b"\n\n@tool\ndef crash(n: int) -> str:\n    \"\"\"Divide by n.\"\"\"\n    return str(1 // n)\n",
            )
            .unwrap();
        }
        let (ok, err) = build_into(&dir, &[]);
        assert!(ok, "{lang}: {err}");
        let tool = format!("{name}_greet");
        let listed = wait_for(Duration::from_secs(180), || {
            s.tool_ids().contains(&tool).then_some(())
        });
        assert!(listed.is_some(), "{:?}\n{}", s.plugin(&name), s.log());
        let (status, out) = s.invoke(&tool, json!({"name": "Ada", "excited": true}));
        assert_eq!(
            (status, &out["result"]),
            (200, &json!("Hello, Ada!")),
            "{lang}: {out}"
        );
        let (status, out) = s.invoke(&tool, json!({"name": "  "}));
        assert_eq!(
            (status, kind(&out)),
            (422, "invalid_input"),
            "{lang}: {out}"
        );
        if lang == "python" {
            let (status, out) = s.invoke("greeter-python_crash", json!({"n": 0}));
            assert_eq!((status, kind(&out)), (500, "tool_error"), "{out}");
            assert!(out.to_string().contains("ZeroDivisionError"), "{out}");
            let (status, out) = s.invoke("greeter-python_crash", json!({"n": 1}));
            assert_eq!((status, &out["result"]), (200, &json!("1")), "{out}");
        }
    }

    // A plugin whose schema is not JSON Schema is refused at load, with the
    // tool and the reason in GET /plugins; the others keep serving.
    let dir = work.path().join("greeter-c");
    // The schema is a C string literal: `\"type\": \"object\",` in the source.
    edit(
        &dir.join("app.c"),
        r#"\"type\": \"object\","#,
        r#"\"type\": 12,"#,
        "the C template's schema",
    );
    let (ok, err) = build_into(&dir, &[]);
    assert!(ok, "{err}");
    let refused = wait_for(Duration::from_secs(60), || {
        s.plugin("greeter-c").filter(|p| {
            p["error"]
                .as_str()
                .is_some_and(|e| e.contains("schema") && e.contains("greet"))
        })
    });
    assert!(
        refused.is_some(),
        "{:?}\n{}",
        s.plugin("greeter-c"),
        s.log()
    );
    let (status, out) = s.invoke("greeter-js_greet", json!({"name": "Bo"}));
    assert_eq!(status, 200, "{out}");

    // A new version built with the server's compile-cache key: compiled
    // before its component reaches the plugins directory, so the swap is
    // served from the cache (a component that arrived first would be
    // served on Winch's build while Cranelift compiles, for seconds).
    let dir = work.path().join("greeter-python");
    let key = s.data.path().join("data/compile-cache.key");
    // app.py's `from` made `to`, built with the key into the served folder,
    // and called until the greeting is `answer`.
    let rebuild = |from: &str, to: &str, answer: &str| {
        edit(
            &dir.join("app.py"),
            from,
            to,
            "the Python template's greeting",
        );
        let (ok, err) = build_into(
            &dir,
            &[std::ffi::OsStr::new("--cache-key"), key.as_os_str()],
        );
        assert!(ok, "{err}");
        let mut last = Value::Null;
        let swapped = wait_for(Duration::from_secs(30), || {
            let (_, out) = s.invoke("greeter-python_greet", json!({"name": "Ada"}));
            last = out;
            (last["result"] == answer).then_some(())
        });
        assert!(
            swapped.is_some(),
            "{last}\n{:?}\n{}",
            s.plugin("greeter-python"),
            s.log()
        );
        s.plugin("greeter-python").unwrap()
    };
    let plugin = rebuild(
        r#"f"{greeting}, {name}"#,
        r#"f"{greeting}, dear {name}"#,
        "Hello, dear Ada.",
    );
    assert_eq!(plugin["source"], "cache", "{plugin}\n{}", s.log());
    // The entry landed before the component and was read as it arrived;
    // the component's load took that reading instead of reading it again.
    let version = plugin["version"].as_str().unwrap();
    let took = s
        .log()
        .lines()
        .any(|l| l.contains("cache entry taken as prepared on its arrival") && l.contains(version));
    assert!(
        took,
        "the swap did not take the prepared entry\n{}",
        s.log()
    );
    let staged = std::fs::read_dir(s.plugins_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".build-"))
        .count();
    assert_eq!(staged, 0, "the build folder is left behind");
    // Built again: the replaced version's entry leaves the plugins folder's
    // cache (a Python plugin's is ~40 MB a version), the new one's is there.
    let entries = || -> Vec<String> {
        std::fs::read_dir(s.plugins_dir().join(".compile-cache"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let version = |p: &Value| p["version"].as_str().unwrap().to_owned();
    let replaced = version(&plugin);
    assert!(
        entries().iter().any(|e| e.starts_with(&replaced)),
        "{:?}",
        entries()
    );
    let manifest = s.plugins_dir().join("greeter-python.toml");
    let inode = || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&manifest).unwrap());
    let manifest_before = inode();
    let current = version(&rebuild(
        "dear {name}",
        "dearest {name}",
        "Hello, dearest Ada.",
    ));
    assert_ne!(current, replaced);
    // The manifest did not change: it is not moved in again (its arrival
    // would have the server reload the entry with the old component first).
    assert_eq!(inode(), manifest_before, "the same manifest moved in again");
    let left = entries();
    assert!(!left.iter().any(|e| e.starts_with(&replaced)), "{left:?}");
    assert!(left.iter().any(|e| e.starts_with(&current)), "{left:?}");

    // Bad input to the commands: a clear one-line reason, no traceback.
    let (ok, err) = toolhost(&[&os("new"), &os("--lang"), &os("python"), &os("Bad_Name")]);
    assert!(!ok && err.contains("invalid plugin name"), "{err}");
    let (ok, err) = toolhost(&[&os("build"), work.path().as_os_str()]);
    assert!(!ok && err.contains("not a plugin folder"), "{err}");
    let (ok, err) = toolhost(&[&os("new"), &os("--lang"), &os("cobol"), &os("x")]);
    assert!(!ok && err.contains("invalid value"), "{err}");
}
