//! A raw MCP streamable-HTTP client for protocol-level tests: it sends exact
//! JSON-RPC bodies (garbage included) and reads the answer, JSON or SSE. The
//! end-to-end tests of the real protocol use the official Python client
//! (`tests/mcp/mcp_client.py`); this one is for what a well-behaved client
//! never sends.

use std::io::{BufRead, BufReader};
use std::sync::mpsc::Receiver;

use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::{Value, json};

use crate::Server;

pub const SESSION_ID: &str = "mcp-session-id";

/// The answer to one POST: status, the session id header, and the JSON-RPC
/// messages of the body (one JSON object, or the `data:` of each SSE event).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub session: Option<String>,
    pub messages: Vec<Value>,
    pub text: String,
}

impl Answer {
    /// The response (result or error) to request `id`.
    pub fn response(&self, id: i64) -> Option<&Value> {
        self.messages.iter().find(|m| {
            m["id"] == json!(id) && (m.get("result").is_some() || m.get("error").is_some())
        })
    }

    /// The notifications of the given method.
    pub fn notifications(&self, method: &str) -> Vec<&Value> {
        self.messages
            .iter()
            .filter(|m| m["method"] == method && m.get("id").is_none())
            .collect()
    }
}

/// One MCP client session (after [`McpClient::initialize`]).
pub struct McpClient<'a> {
    pub server: &'a Server,
    pub http: Client,
    pub session: Option<String>,
    pub version: String,
    /// Extra header sent on every request.
    pub header: Option<(String, String)>,
}

impl<'a> McpClient<'a> {
    pub fn new(server: &'a Server) -> Self {
        McpClient {
            server,
            http: Client::builder()
                .timeout(std::time::Duration::from_secs(60))
                .build()
                .expect("client"),
            session: None,
            version: "2025-11-25".into(),
            header: None,
        }
    }

    /// A POST to `/mcp` with this client's headers, body to add.
    pub fn post(&self) -> RequestBuilder {
        let mut r = self
            .http
            .post(self.server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        if let Some(s) = &self.session {
            r = r
                .header(SESSION_ID, s)
                .header("mcp-protocol-version", &self.version);
        }
        if let Some((k, v)) = &self.header {
            r = r.header(k, v);
        }
        r
    }

    /// POST a raw body.
    pub fn send_raw(&self, body: impl Into<reqwest::blocking::Body>) -> Answer {
        read(self.post().body(body).send().expect("POST /mcp"))
    }

    /// POST a JSON-RPC message.
    pub fn send(&self, message: &Value) -> Answer {
        self.send_raw(message.to_string())
    }

    /// The session's standalone stream (`GET /mcp`), where what the server
    /// tells unasked arrives: its messages as they come.
    pub fn listen(&self) -> Receiver<Value> {
        let stream = self
            .http
            .get(self.server.url("/mcp"))
            .header("accept", "text/event-stream")
            .header(
                SESSION_ID,
                self.session.clone().expect("an initialized session"),
            )
            .header("mcp-protocol-version", &self.version)
            .send()
            .expect("GET /mcp");
        assert_eq!(stream.status(), 200, "GET /mcp");
        sse_messages(stream)
    }

    /// `initialize` + `notifications/initialized`; returns the initialize result.
    pub fn initialize(&mut self, version: &str) -> Value {
        self.initialize_with(version, json!({}))
    }

    /// [`McpClient::initialize`] declaring `capabilities`.
    pub fn initialize_with(&mut self, version: &str, capabilities: Value) -> Value {
        let answer = self.send(&json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": capabilities,
                "clientInfo": {"name": "toolhost-e2e", "version": "0"}
            }
        }));
        assert_eq!(answer.status, 200, "initialize: {}", answer.text);
        let result = answer
            .response(0)
            .and_then(|r| r.get("result"))
            .unwrap_or_else(|| panic!("initialize result: {}", answer.text))
            .clone();
        self.session = answer.session.clone();
        self.version = result["protocolVersion"]
            .as_str()
            .unwrap_or(version)
            .to_owned();
        let ack = self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert!(ack.status < 300, "initialized: {} {}", ack.status, ack.text);
        result
    }

    /// A request; returns its response message (result or error).
    pub fn request(&self, id: i64, method: &str, params: Value) -> Value {
        let answer =
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        answer
            .response(id)
            .cloned()
            .unwrap_or_else(|| panic!("no response to {method}: {} {}", answer.status, answer.text))
    }

    /// `tools/call` -> the response message.
    pub fn call(&self, id: i64, tool: &str, arguments: Value) -> Value {
        self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
    }

    /// DELETE the MCP session -> status.
    pub fn close(&self) -> u16 {
        let mut r = self.http.delete(self.server.url("/mcp"));
        if let Some(s) = &self.session {
            r = r
                .header(SESSION_ID, s)
                .header("mcp-protocol-version", &self.version);
        }
        r.send().expect("DELETE /mcp").status().as_u16()
    }
}

/// Read a response: a JSON body, or an SSE stream read to its end.
pub fn read(r: reqwest::blocking::Response) -> Answer {
    let status = r.status().as_u16();
    let session = r
        .headers()
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let sse = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let text = r.text().unwrap_or_default();
    let messages = if sse {
        sse_data(&text)
            .iter()
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect()
    } else {
        serde_json::from_str::<Value>(&text)
            .map(|v| match v {
                Value::Array(items) => items,
                v => vec![v],
            })
            .unwrap_or_default()
    };
    Answer {
        status,
        session,
        messages,
        text,
    }
}

/// The `data` of each event of an SSE body.
pub fn sse_data(text: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Vec<&str> = Vec::new();
    for line in text.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if !data.is_empty() {
                events.push(data.join("\n"));
                data.clear();
            }
        } else if let Some(d) = line.strip_prefix("data:") {
            data.push(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    events
}

/// The JSON messages of an SSE response as they come (a thread reads them
/// until the stream ends or the receiver is dropped).
pub fn sse_messages(response: Response) -> Receiver<Value> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(response).lines() {
            let Ok(line) = line else { return };
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            if let Ok(v) = serde_json::from_str::<Value>(data.trim())
                && tx.send(v).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// The next message of `method` from `messages` within `patience` (others
/// before it are skipped); panics when none comes.
pub fn next_of(messages: &Receiver<Value>, method: &str, patience: std::time::Duration) -> Value {
    let deadline = std::time::Instant::now() + patience;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match messages.recv_timeout(left) {
            Ok(m) if m["method"] == method => return m,
            Ok(_) => {}
            Err(e) => panic!("no {method} within {patience:?}: {e}"),
        }
    }
}
