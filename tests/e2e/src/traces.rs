//! Receivers of traces for the traces tests: Arize Phoenix (PyPI
//! `arize-phoenix`, in `target/venvs/traces`), a real OTLP receiver, on
//! 127.0.0.1: spans in on `/v1/traces`, back out on its REST API
//! (`/v1/projects/default/spans`); and the scripts of `tests/traces`
//! (`capture.py`, an OTLP receiver decoding with `opentelemetry-proto`,
//! for span links; the traced upstreams), with what the capture holds.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{free_port, python_venv, repo_root};

pub struct Phoenix {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Phoenix {
    /// Start Phoenix on free ports (no telemetry of its own, no downloads);
    /// waits until it answers.
    pub fn start() -> Phoenix {
        let python = python_venv("tests/traces/requirements.txt");
        let dir = tempfile::tempdir().unwrap();
        let port = free_port().unwrap();
        let log = std::fs::File::create(dir.path().join("phoenix.log")).unwrap();
        let child = Command::new(python)
            .args(["-m", "phoenix.server.main", "serve"])
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port().unwrap().to_string())
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_ALLOW_EXTERNAL_RESOURCES", "false")
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start Phoenix");
        let phoenix = Phoenix {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        let started = Instant::now();
        while reqwest::blocking::get(format!("{}/healthz", phoenix.url))
            .map_or(true, |r| !r.status().is_success())
        {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "Phoenix did not start: {}",
                std::fs::read_to_string(phoenix._dir.path().join("phoenix.log"))
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        phoenix
    }

    /// Where OTLP/HTTP spans go.
    pub fn traces_url(&self) -> String {
        format!("{}/v1/traces", self.url)
    }

    /// Every span Phoenix holds (its default project), newest first.
    pub fn spans(&self) -> Vec<Value> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!("{}/v1/projects/default/spans?limit=1000", self.url);
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let Ok(answer) = reqwest::blocking::get(&url) else {
                return all;
            };
            let Ok(body) = answer.json::<Value>() else {
                return all;
            };
            all.extend(body["data"].as_array().cloned().unwrap_or_default());
            match body["next_cursor"].as_str() {
                Some(c) if !c.is_empty() => cursor = Some(c.to_owned()),
                _ => return all,
            }
        }
    }

    /// The spans of trace `trace_id`, once `done` says they are all there
    /// (within 60 s; else those there are).
    pub fn trace(&self, trace_id: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let spans: Vec<Value> = self
                .spans()
                .into_iter()
                .filter(|s| s["context"]["trace_id"] == trace_id)
                .collect();
            if done(&spans) || started.elapsed() > Duration::from_secs(60) {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        crate::stop_gracefully(&mut self.child, Duration::from_secs(5));
    }
}

/// A process killed when the test ends, however it ends.
pub struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A script of tests/traces that prints its port first: the traced
/// upstream (`upstream.py`, given the receiver), the capture (`capture.py`).
pub fn start_script(script: &str, args: &[&str]) -> (Killed, u16) {
    let python = python_venv("tests/traces/requirements.txt");
    let mut child = Command::new(python)
        .arg(repo_root().join("tests/traces").join(script))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the upstream");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().expect("the script's port");
    (Killed(child), port)
}

/// The spans the capture holds, once `done` says they are all there.
pub fn captured(port: u16, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let spans: Vec<Value> = reqwest::blocking::get(format!("http://127.0.0.1:{port}/spans"))
            .unwrap()
            .json()
            .unwrap();
        if done(&spans) || started.elapsed() > Duration::from_secs(30) {
            return spans;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The span of the request with id `request_id`.
pub fn request_span<'a>(spans: &'a [Value], request_id: &str) -> &'a Value {
    spans
        .iter()
        .find(|s| s["attributes"]["toolhost.request_id"] == request_id)
        .unwrap_or_else(|| panic!("no span of request {request_id}: {spans:#?}"))
}

/// Whether `span` links to `to`, saying `why`.
pub fn links_to(span: &Value, to: &Value, why: &str) -> bool {
    span["links"].as_array().unwrap().iter().any(|l| {
        l["span_id"] == to["span_id"]
            && l["trace_id"] == to["trace_id"]
            && l["attributes"]["toolhost.link"] == why
    })
}

/// The one captured span named `name` under span `parent`.
pub fn child_of<'a>(spans: &'a [Value], parent: &Value, name: &str) -> &'a Value {
    let found: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == name && s["parent_id"] == parent["span_id"])
        .collect();
    assert_eq!(found.len(), 1, "one `{name}` under {parent}: {spans:#?}");
    found[0]
}

/// `00-<trace>-<span>-01` of `span`.
pub fn traceparent_of(span: &Value) -> String {
    format!(
        "00-{}-{}-01",
        span["trace_id"].as_str().unwrap(),
        span["span_id"].as_str().unwrap()
    )
}
