//! Every command the pages of `docs/` show, run as written against the real
//! binary: each command of each ```sh block (continuation lines and quoted
//! line breaks joined), with only the port changed from 8001 to the test
//! server's, `$ADMIN` / `$TOKEN` set to its admin token and `$ID` to the last
//! task id answered. A command must exit 0 and answer; a `curl` must get a
//! 2xx (its status code is read with `-w`, which changes nothing sent);
//! where the docs show the answer's `"status"`, it has that status. The
//! files the examples name (`photos/ladybird.jpg`, `manuals/blktrace.pdf`,
//! ...) are put in the `demo` session's workspace first, as a user would.
//!
//! A command that cannot run here is in [`NOT_RUN`] with the reason, and
//! each entry there must still name a command of its page: a new command
//! is run unless someone says why not.
//!
//! The pages' builds (the Rust template, components) keep both cores busy:
//! never beside another such binary (`lanes: heavy`, tests/lanes.py).

use std::path::Path;
use std::process::Command;

use toolhost_e2e::docs::{commands, sh_blocks, shown_status};
use toolhost_e2e::*;

const ADMIN: &str = "docs-admin-token-0123456789";

/// `(page, a piece of the command, why it is not run)`.
const NOT_RUN: &[(&str, &str, &str)] = &[
    (
        "builtin-tools.md",
        "web_search/invoke",
        "needs a search provider's key and the internet",
    ),
    (
        "builtin-tools.md",
        "\"url\":\"https://en.wikipedia.org",
        "reads a page on the internet",
    ),
    (
        "builtin-tools.md",
        "<article>...</article>",
        "its `...` is a placeholder",
    ),
    (
        "scaling.md",
        "cargo build --release -p toolhost-bench",
        "a release build of the benchmark (minutes; make bench does it)",
    ),
    (
        "scaling.md",
        "target/release/toolhost-bench",
        "a benchmark: minutes of load by design (make bench)",
    ),
    (
        "scaling.md",
        "scaling.py",
        "a benchmark: minutes of load by design",
    ),
];

/// Run every command of `page` against `server` from `cwd`, `prepare`
/// before each block (the files its examples name); returns how many ran.
fn run_page(page: &str, server: &Server, cwd: &Path, prepare: &dyn Fn()) -> usize {
    let text = std::fs::read_to_string(repo_root().join("docs").join(page)).unwrap();
    let port = server.base.rsplit(':').next().unwrap().to_owned();
    let bin = binary().parent().unwrap().to_owned();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut task_id = String::new();
    let mut ran = 0;
    let mut skipped = Vec::new();
    for block in sh_blocks(&text) {
        prepare();
        for (command, shown) in commands(&block) {
            if let Some((_, piece, why)) = NOT_RUN
                .iter()
                .find(|(p, piece, _)| *p == page && command.contains(piece))
            {
                println!("not run ({why}): {command}");
                skipped.push(*piece);
                continue;
            }
            let mut run = command.replace("localhost:8001", &format!("localhost:{port}"));
            let is_curl = run.starts_with("curl ") && !run.contains('|');
            if is_curl {
                run.push_str(" -w '\\n%{http_code}'");
            }
            let out = Command::new("bash")
                .args(["-o", "pipefail", "-c", &run])
                .current_dir(cwd)
                .env("PATH", &path)
                .env("ADMIN", ADMIN)
                .env("TOKEN", ADMIN)
                .env("ID", &task_id)
                .output()
                .expect("bash runs");
            let answer = String::from_utf8_lossy(&out.stdout).into_owned();
            let context = format!(
                "{page}: {command}\nstdout: {answer}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                out.status.success() && !answer.trim().is_empty(),
                "{context}"
            );
            let body = if is_curl {
                let (body, code) = answer.trim_end().rsplit_once('\n').unwrap_or(("", &answer));
                assert!(code.starts_with('2'), "HTTP {code}: {context}");
                body.to_owned()
            } else {
                answer.clone()
            };
            if let Some(status) = shown.as_deref().and_then(shown_status) {
                let compact: String = body.split_whitespace().collect();
                assert!(
                    compact.contains(&format!("\"status\":\"{status}\"")),
                    "shown: {status}\n{context}"
                );
            }
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&body)
                && let Some(id) = v["task_id"].as_str()
            {
                task_id = id.to_owned();
            }
            println!("ran: {command}");
            ran += 1;
        }
    }
    for (p, piece, _) in NOT_RUN.iter().filter(|(p, ..)| *p == page) {
        assert!(
            skipped.contains(piece),
            "{p}: NOT_RUN names `{piece}`, which no command of the page holds any more"
        );
    }
    println!("figure docs_commands_run{{page=\"{page}\"}} {ran}");
    ran
}

/// Put files into the `demo` session's workspace: each `(repository file,
/// workspace path)`.
fn seed(server: &Server, files: &[(&str, &str)]) {
    let ws = server.data.path().join("data/workspaces/demo");
    for (from, to) in files {
        let to = ws.join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(repo_root().join(from), &to).unwrap_or_else(|e| panic!("{from}: {e}"));
    }
}

fn admin_env() -> [(&'static str, &'static str); 1] {
    [("TOOLHOST_ADMIN_TOKEN", ADMIN)]
}

#[test]
fn operations_page_runs_as_written() {
    // The page's task names a callback host, which it says must be allowed.
    let s = Server::start_env(
        PluginsDir::new().add("calc", "calc"),
        Some("[tasks]\ncallback_allow = [\"hooks.example.com\"]\n"),
        &admin_env(),
    )
    .unwrap();
    assert!(run_page("operations.md", &s, &repo_root(), &|| ()) >= 7);
}

#[test]
fn plugins_page_runs_as_written() {
    let s = Server::start_env(
        PluginsDir::new()
            .add("calc", "calc")
            .add("textstats", "textstats"),
        None,
        &admin_env(),
    )
    .unwrap();
    // `toolhost new` / `build` write where they are run: a scratch folder
    // holding the paths the page's commands name.
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo_root().join("plugins"), work.path().join("plugins")).unwrap();
    let built = work.path().join("target/plugins");
    std::fs::create_dir_all(&built).unwrap();
    for name in ["calc", "files"] {
        let (wasm, toml) = component(name);
        std::fs::copy(wasm, built.join(format!("{name}.wasm"))).unwrap();
        std::fs::copy(toml.unwrap(), built.join(format!("{name}.toml"))).unwrap();
    }
    assert!(run_page("plugins.md", &s, work.path(), &|| ()) >= 11);
}

#[test]
fn builtin_tools_page_runs_as_written() {
    if !require_docker() {
        return;
    }
    let s = Server::start_env(
        PluginsDir::new()
            .add("storage", "storage")
            .add("image", "image")
            .add("doc", "doc")
            .add("web", "web")
            .add("python", "python")
            .add_toolkit("code")
            .add_toolkit("notebook"),
        None,
        &admin_env(),
    )
    .unwrap();
    let prepare = || {
        seed(
            &s,
            &[
                ("tests/fixtures/images/gradient.png", "photos/gradient.png"),
                ("tests/fixtures/docs/blktrace.pdf", "manuals/blktrace.pdf"),
                ("tests/fixtures/docs/btreplay.pdf", "manuals/btreplay.pdf"),
            ],
        );
        // The page's photo: a JPEG made from the gradient fixture.
        let (code, body) = s.invoke_in(
            "demo",
            "image_convert",
            serde_json::json!({"path": "photos/gradient.png", "format": "jpeg", "output": "photos/ladybird.jpg"}),
        );
        assert_eq!(code, 200, "{body}");
    };
    assert!(run_page("builtin-tools.md", &s, &repo_root(), &prepare) >= 10);
}

#[test]
fn backends_page_runs_as_written() {
    if !require_docker() {
        return;
    }
    let s = Server::start_env(
        PluginsDir::new()
            .add_toolkit("shell")
            .add_toolkit("notebook")
            .add_toolkit("browser")
            .add_toolkit("imagecompress"),
        None,
        &admin_env(),
    )
    .unwrap();
    let prepare = || {
        seed(&s, &[("tests/fixtures/images/gradient.png", "photo.png")]);
        let notes = s.data.path().join("data/workspaces/demo/notes");
        std::fs::create_dir_all(&notes).unwrap();
        std::fs::write(notes.join("a.txt"), "hello\n").unwrap();
    };
    assert!(run_page("backends.md", &s, &repo_root(), &prepare) >= 8);
}

#[test]
fn scaling_page_commands_are_accounted_for() {
    let s = Server::start(PluginsDir::new());
    assert_eq!(run_page("scaling.md", &s, &repo_root(), &|| ()), 0);
}
