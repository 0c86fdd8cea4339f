//! Input requests over the native API (#27) against the real binary:
//! `files_delete` asks to confirm; the call answers `input_required` with a
//! sealed state and is resumed by a second invoke carrying the answers.
//! Over MCP, with the official MCP Python SDK (`tests/mcp/mcp_input.py`).

use serde_json::{Value, json};
use toolhost_e2e::xagent::XAgent;
use toolhost_e2e::{PluginsDir, Server, cold, python_venv, require_docker, run_python};

fn server() -> Server {
    Server::start(PluginsDir::new().add("files", "files"))
}

/// POST /tools/{tool}/invoke in `session` with the whole `body`.
fn invoke(s: &Server, session: &str, tool: &str, body: Value) -> (u16, Value) {
    let r = s
        .client()
        .post(s.url(&format!("/tools/{tool}/invoke")))
        .header("x-toolhost-session", session)
        .json(&body)
        .send()
        .expect("POST invoke");
    (r.status().as_u16(), r.json().unwrap_or(Value::Null))
}

fn write(s: &Server, session: &str, path: &str) {
    let (status, body) = s.invoke_in(
        session,
        "files_write",
        json!({"path": path, "content": "keep me?"}),
    );
    assert_eq!(status, 200, "{body}");
}

fn exists(s: &Server, session: &str, path: &str) -> bool {
    let (status, body) = s.invoke_in(session, "files_read", json!({"path": path}));
    match status {
        200 => true,
        422 if body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("does not exist") =>
        {
            false
        }
        _ => panic!("files_read {path}: {status} {body}"),
    }
}

/// Ask to delete `path`: the `input_required` body, checked.
fn ask_delete(s: &Server, session: &str, path: &str) -> Value {
    let (status, body) = invoke(
        s,
        session,
        "files_delete",
        json!({"params": {"path": path}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "input_required", "{body}");
    let questions = body["input_required"]["questions"].as_array().unwrap();
    assert_eq!(questions.len(), 1, "{body}");
    assert_eq!(questions[0]["key"], "confirm");
    assert_eq!(questions[0]["kind"], "form");
    let message = questions[0]["params"]["message"].as_str().unwrap();
    assert!(message.contains(path), "{message}");
    assert_eq!(
        questions[0]["params"]["requestedSchema"]["properties"]["confirm"]["type"],
        "boolean"
    );
    assert!(body["input_required"]["state"].as_str().unwrap().len() > 20);
    assert!(exists(s, session, path), "asked, yet {path} is gone");
    body
}

fn resume(s: &Server, session: &str, path: &str, state: &Value, answers: Value) -> (u16, Value) {
    invoke(
        s,
        session,
        "files_delete",
        json!({"params": {"path": path}, "input": {"state": state, "answers": answers}}),
    )
}

fn error_message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

#[test]
fn ask_then_resume_with_the_answer() {
    let s = server();
    write(&s, "in1", "a.txt");
    let asked = ask_delete(&s, "in1", "a.txt");
    let state = &asked["input_required"]["state"];

    // Declined: kept.
    let (status, body) = resume(
        &s,
        "in1",
        "a.txt",
        state,
        json!({"confirm": {"action": "decline"}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "success");
    assert!(body["result"].as_str().unwrap().contains("kept"), "{body}");
    assert!(exists(&s, "in1", "a.txt"));

    // Accepted without a yes: kept too.
    let (status, body) = resume(
        &s,
        "in1",
        "a.txt",
        state,
        json!({"confirm": {"action": "accept", "content": {"confirm": false}}}),
    );
    assert_eq!((status, body["status"].clone()), (200, json!("success")));
    assert!(exists(&s, "in1", "a.txt"));

    // Confirmed: deleted.
    let (status, body) = resume(
        &s,
        "in1",
        "a.txt",
        state,
        json!({"confirm": {"action": "accept", "content": {"confirm": true}}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"], "deleted a.txt");
    assert!(!exists(&s, "in1", "a.txt"));

    // The state without answers: the call asks again (on a file that is there).
    write(&s, "in1", "a.txt");
    let (status, body) = invoke(
        &s,
        "in1",
        "files_delete",
        json!({"params": {"path": "a.txt"}, "input": {"state": state}}),
    );
    assert_eq!(
        (status, body["status"].clone()),
        (200, json!("input_required"))
    );
    assert!(exists(&s, "in1", "a.txt"));

    // The rounds that ended on questions are no calls of their own: three
    // calls (declined, unconfirmed, confirmed), none failed.
    let stats = &s.get("/tools/files_delete").1["stats"];
    assert_eq!(
        (&stats["call_count"], &stats["error_count"]),
        (&json!(3), &json!(0)),
        "{stats}"
    );
}

#[test]
fn tampered_foreign_and_unfitting_input_is_refused() {
    let s = server();
    write(&s, "in2", "b.txt");
    write(&s, "in2", "c.txt");
    let asked = ask_delete(&s, "in2", "b.txt");
    let state = asked["input_required"]["state"].as_str().unwrap();
    let yes = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});

    // One character changed anywhere in the state.
    for at in [state.len() / 3, state.len() - 2] {
        let mut tampered = state.as_bytes().to_vec();
        tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        let (status, body) = resume(&s, "in2", "b.txt", &json!(tampered), yes.clone());
        assert_eq!(status, 422, "{body}");
        assert!(error_message(&body).contains("state refused"), "{body}");
    }
    // Another call's state: other arguments, another tool.
    let (status, body) = resume(&s, "in2", "c.txt", &json!(state), yes.clone());
    assert_eq!(status, 422, "{body}");
    assert!(error_message(&body).contains("another call"), "{body}");
    let (status, body) = invoke(
        &s,
        "in2",
        "files_read",
        json!({"params": {"path": "b.txt"}, "input": {"state": state, "answers": yes}}),
    );
    assert_eq!(status, 422, "{body}");
    assert!(error_message(&body).contains("another call"), "{body}");
    // Not a state at all; answers without one.
    let (status, body) = resume(&s, "in2", "b.txt", &json!("nonsense"), yes.clone());
    assert_eq!(status, 422, "{body}");
    assert!(error_message(&body).contains("state refused"), "{body}");
    let (status, body) = invoke(
        &s,
        "in2",
        "files_delete",
        json!({"params": {"path": "b.txt"}, "input": {"answers": yes}}),
    );
    assert_eq!(status, 422, "{body}");
    assert!(error_message(&body).contains("`state`"), "{body}");

    // Answers that do not fit the question, or answer none asked.
    for (answer, says) in [
        (
            json!({"confirm": {"action": "accept", "content": {"confirm": "yes"}}}),
            "does not fit",
        ),
        (json!({"confirm": {"action": "accept"}}), "does not fit"),
        (json!({"confirm": {"action": "sure"}}), "action"),
        (json!({"confirm": true}), "an object"),
        (
            json!({"other": {"action": "decline"}}),
            "no question `other`",
        ),
    ] {
        let (status, body) = resume(&s, "in2", "b.txt", &json!(state), answer.clone());
        assert_eq!(status, 422, "{answer}: {body}");
        assert!(error_message(&body).contains(says), "{answer}: {body}");
    }
    assert!(exists(&s, "in2", "b.txt"), "a refused answer deleted b.txt");
    assert!(exists(&s, "in2", "c.txt"));
}

#[test]
fn callers_that_cannot_answer_get_no_input_available() {
    let s = server();
    write(&s, "in3", "d.txt");
    let (status, body) = invoke(
        &s,
        "in3",
        "files_delete",
        json!({"params": {"path": "d.txt"}, "input": "none"}),
    );
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["error"]["kind"], "tool_error", "{body}");
    let message = error_message(&body);
    assert!(
        message.contains("not deleted") && message.contains("no input available"),
        "{body}"
    );
    assert!(exists(&s, "in3", "d.txt"));
    let (status, body) = invoke(
        &s,
        "in3",
        "files_delete",
        json!({"params": {"path": "d.txt"}, "input": "later"}),
    );
    assert_eq!(status, 422, "{body}");

    // A tool that does not ask is untouched by `input`.
    let (status, body) = invoke(
        &s,
        "in3",
        "files_read",
        json!({"params": {"path": "d.txt"}, "input": "none"}),
    );
    assert_eq!((status, body["result"].clone()), (200, json!("keep me?")));
}

#[test]
fn streamed_calls_end_on_an_input_required_event() {
    let s = server();
    write(&s, "in4", "e.txt");
    let r = s
        .client()
        .post(s.url("/tools/files_delete/invoke"))
        .header("x-toolhost-session", "in4")
        .json(&json!({"params": {"path": "e.txt"}, "stream": true}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let text = r.text().unwrap();
    let data = text
        .split("\n\n")
        .find(|e| e.contains("event: input_required"))
        .and_then(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .unwrap_or_else(|| panic!("no input_required event in {text}"));
    let body: Value = serde_json::from_str(data).unwrap();
    assert_eq!(body["done"], true);
    let state = &body["input_required"]["state"];
    assert!(exists(&s, "in4", "e.txt"));
    let (status, body) = resume(
        &s,
        "in4",
        "e.txt",
        state,
        json!({"confirm": {"action": "accept", "content": {"confirm": true}}}),
    );
    assert_eq!(
        (status, body["result"].clone()),
        (200, json!("deleted e.txt"))
    );
    assert!(!exists(&s, "in4", "e.txt"));
}

#[test]
fn the_official_mcp_client_answers_by_elicitation() {
    let s = server();
    let python = python_venv("tests/mcp/requirements.txt");
    let url = s.url("/mcp");
    let (ok, report) = run_python(
        &python,
        "tests/mcp/mcp_input.py",
        &["--url".as_ref(), url.as_ref()],
    );
    assert!(
        ok,
        "mcp_input.py failed:\n{report}\nserver log:\n{}",
        s.log()
    );
    for mode in ["auto 2026-07-28", "legacy 2025-11-25"] {
        for scenario in ["declined", "confirmed", "unanswerable"] {
            let line = format!("ok {scenario} ({mode})");
            assert!(report.contains(&line), "no `{line}` in:\n{report}");
        }
    }
}

#[test]
fn xagent_callers_get_no_input_available() {
    let s = server();
    let x = XAgent::connect(&s);
    let (status, body) = x.execute("files_write", json!({"path": "f.txt", "content": "x"}));
    assert_eq!(status, 200, "{body}");
    let (status, body) = x.execute("files_delete", json!({"path": "f.txt"}));
    assert_eq!(status, 500, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("no input available"), "{body}");
    let (status, body) = x.execute("files_read", json!({"path": "f.txt"}));
    assert_eq!((status, body), (200, json!("x")));
}

#[test]
fn the_shell_asks_before_a_command_its_manifest_marks() {
    if !require_docker() {
        return;
    }
    // shell.toml's [tools.confirm], uncommented.
    let s = Server::start(PluginsDir::new().add_toolkit_with("shell", |m| {
        let m = cold(m);
        let start = m.find("# [tools.confirm]").expect("the shipped rule");
        let end = start + m[start..].find("\n\n").expect("its end");
        let rule: String = m[start..end]
            .lines()
            .map(|l| l.strip_prefix("# ").unwrap_or(l))
            .map(|l| l.split("  #").next().unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
        format!("{}{rule}{}", &m[..start], &m[end..])
    }));
    let run = |body: Value| invoke(&s, "sh1", "shell_run", body);
    let (status, body) = run(json!({"params": {"command": "mkdir -p d && touch d/f && ls d"}}));
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("success")),
        "unmarked: {body}"
    );

    let rm = json!({"command": "cd /workspace && rm -rf d && echo gone"});
    let (status, body) = run(json!({"params": rm}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "input_required", "{body}");
    let question = &body["input_required"]["questions"][0];
    assert!(
        question["params"]["message"]
            .as_str()
            .unwrap()
            .contains("rm -rf d"),
        "{question}"
    );
    let state = body["input_required"]["state"].clone();
    let (_, ls) = run(json!({"params": {"command": "ls d"}}));
    assert!(ls.to_string().contains("\"f"), "asked, yet run: {ls}");

    // Declined: not run. Nobody to ask: refused. Confirmed: run.
    let answer = |yes: bool| json!({"params": rm, "input": {"state": state, "answers": {"confirm": {"action": "accept", "content": {"confirm": yes}}}}});
    // (A tool error, as every surface renders one: 500 and its kind.)
    let (status, body) = run(answer(false));
    assert_eq!(
        (status, &body["error"]["kind"]),
        (500, &json!("tool_error")),
        "{body}"
    );
    assert!(body.to_string().contains("not confirmed"), "{body}");
    let (status, body) = run(json!({"params": rm, "input": "none"}));
    assert_eq!(
        (status, &body["error"]["kind"]),
        (500, &json!("tool_error")),
        "{body}"
    );
    assert!(body.to_string().contains("no input available"), "{body}");
    let (_, ls) = run(json!({"params": {"command": "ls d"}}));
    assert!(ls.to_string().contains("\"f"), "refused, yet run: {ls}");
    let (status, body) = run(answer(true));
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("gone"), "{body}");
}
