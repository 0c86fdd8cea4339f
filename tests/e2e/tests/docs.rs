//! The README's quick tour, run as written against the real binary: every
//! command of its first `sh` block (continuation lines joined), with only
//! the port changed from 8001 to the test server's. Each must exit 0 and
//! answer; where the line after a command shows the answer's `"status"`,
//! the answer has that status. Commands holding a placeholder (`<sealed>`,
//! `$TOKEN`) are left out: they show a shape, not a command to paste.

use std::process::Command;

use toolhost_e2e::docs::{commands, sh_blocks, shown_status};
use toolhost_e2e::*;

/// The tour's commands, each with the answer shown after it (if any): the
/// first ```` ```sh ```` block after its heading.
fn tour() -> Vec<(String, Option<String>)> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme
        .find("## A quick tour")
        .expect("the README has a quick tour");
    let block = sh_blocks(&readme[start..])
        .into_iter()
        .next()
        .expect("a sh block");
    commands(&block)
}

#[test]
fn the_readme_tour_runs_as_written() {
    let s = Server::start(PluginsDir::new().add("calc", "calc").add("files", "files"));
    let port = s.base.rsplit(':').next().unwrap().to_owned();
    let commands = tour();
    assert!(
        commands.len() >= 10,
        "the tour lost its commands: {commands:?}"
    );
    let mut ran = 0;
    for (command, shown) in &commands {
        if command.contains('<') || command.contains('$') {
            continue;
        }
        assert!(
            command.contains("localhost:8001"),
            "a tour command not aimed at the server: {command}"
        );
        let run = command.replace("localhost:8001", &format!("localhost:{port}"));
        let out = Command::new("bash")
            .args(["-o", "pipefail", "-c", &run])
            .output()
            .expect("bash runs");
        let answer = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && !answer.trim().is_empty(),
            "{command}\n{}{answer}",
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some(status) = shown.as_deref().and_then(shown_status) {
            let compact: String = answer.split_whitespace().collect();
            assert!(
                compact.contains(&format!("\"status\":\"{status}\"")),
                "{command}\nshown: {status}\nanswered: {answer}"
            );
        }
        ran += 1;
    }
    assert!(ran >= 10, "only {ran} tour commands ran");
    println!("figure readme_tour_commands {ran}");
}
