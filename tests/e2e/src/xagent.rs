//! An XAgent ToolServer client as XAgent's own (`toolserver_interface.py`)
//! speaks the protocol: a cookie session from `/get_cookie`, then
//! `/execute_tool` and `/upload_file` with that cookie.

use std::time::Duration;

use reqwest::blocking::{Client, multipart};
use serde_json::{Value, json};

use crate::{Server, xagent_cookie};

pub struct XAgent<'a> {
    pub s: &'a Server,
    pub http: Client,
    /// `node_id=<session id>`.
    pub cookie: String,
}

impl<'a> XAgent<'a> {
    /// `POST /get_cookie`, as the client's `lazy_init` does.
    pub fn connect(s: &'a Server) -> XAgent<'a> {
        let http = Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let r = http.post(s.url("/get_cookie")).send().unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let cookie = xagent_cookie(&r);
        assert!(cookie.starts_with("node_id="), "{cookie}");
        XAgent { s, http, cookie }
    }

    /// The toolhost session the cookie names.
    pub fn session(&self) -> &str {
        self.cookie.trim_start_matches("node_id=")
    }

    pub fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(self.s.url(path))
            .header("cookie", &self.cookie)
            .json(&body)
            .send()
            .unwrap();
        (r.status().as_u16(), r.json().unwrap_or(Value::Null))
    }

    pub fn execute(&self, tool: &str, arguments: Value) -> (u16, Value) {
        self.post(
            "/execute_tool",
            json!({"tool_name": tool, "arguments": arguments}),
        )
    }

    /// `POST /upload_file` of `bytes` as `name`, as the client sends it (a
    /// `file` part and a `filename` part); the status.
    pub fn upload(&self, name: &str, bytes: Vec<u8>) -> u16 {
        let form = multipart::Form::new()
            .part(
                "file",
                multipart::Part::bytes(bytes).file_name(name.to_owned()),
            )
            .text("filename", name.to_owned());
        self.http
            .post(self.s.url("/upload_file"))
            .header("cookie", &self.cookie)
            .multipart(form)
            .send()
            .unwrap()
            .status()
            .as_u16()
    }
}
