//! Seed 004's messages in tests: a subscriber of `GET /events` and an HTTP
//! listener standing for a configured callback, each handing on what it
//! gets as JSON.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::Value;

use crate::Server;

/// Follow `GET /events` (with the admin `token`) on a thread: each
/// message's JSON, from the moment this returns.
pub fn subscribe(s: &Server, token: &str) -> Receiver<Value> {
    let r = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .unwrap()
        .get(s.url("/events"))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "GET /events");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            if let Some(data) = line.strip_prefix("data: ")
                && tx.send(serde_json::from_str(data).unwrap()).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// An HTTP listener on 127.0.0.1 answering 204 to every request: its port,
/// and each request's JSON body, in order.
pub fn callback_listener() -> (u16, Receiver<Value>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            // Requests on one kept-alive connection, one after another.
            loop {
                let mut length = None;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    if line.trim().is_empty() {
                        length = length.or(Some(0));
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = Some(v.trim().parse().unwrap());
                    }
                }
                let Some(length) = length else { break };
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let _ = conn.write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n");
                if tx.send(serde_json::from_slice(&body).unwrap()).is_err() {
                    return;
                }
            }
        }
    });
    (port, rx)
}
