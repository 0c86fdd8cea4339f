//! A fake HTTP/1.1 server on 127.0.0.1 for tests that need a third party
//! (a search provider, an embeddings endpoint, a web page): it answers with a
//! handler and records every request it saw. Nothing but 127.0.0.1 is used.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One request a fake server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What a fake server answers.
pub enum Answer {
    Full {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
    },
    /// `total` bytes of HTML, streamed without a length (or declaring it).
    Stream {
        total: usize,
        declare: bool,
    },
    Redirect(String),
}

pub fn ok(content_type: &'static str, body: impl Into<Vec<u8>>) -> Answer {
    Answer::Full {
        status: 200,
        content_type,
        body: body.into(),
    }
}

pub type Handler = Arc<dyn Fn(&Seen) -> Answer + Send + Sync>;

/// An HTTP/1.1 server on 127.0.0.1 answering with `handler`, one thread
/// per connection, recording every request.
pub struct Fake {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Fake {
    pub fn start(handler: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (log, handler): (_, Handler) = (seen.clone(), Arc::new(handler));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (log, handler) = (log.clone(), handler.clone());
                std::thread::spawn(move || serve(conn, &log, &*handler));
            }
        });
        Fake { port, seen }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn hits(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

fn serve(mut conn: TcpStream, log: &Mutex<Vec<Seen>>, handler: &(dyn Fn(&Seen) -> Answer + Sync)) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = first.split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or_default().to_owned(),
        parts.next().unwrap_or_default().to_owned(),
    );
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let seen = Seen {
        method,
        target,
        headers,
        body,
    };
    log.lock().unwrap().push(seen.clone());
    match handler(&seen) {
        Answer::Full {
            status,
            content_type,
            body,
        } => {
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(&body);
        }
        Answer::Redirect(to) => {
            let _ = write!(
                conn,
                "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
        Answer::Stream { total, declare } => {
            let length = if declare {
                format!("content-length: {total}\r\n")
            } else {
                String::new()
            };
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n{length}connection: close\r\n\r\n<html><body>"
            );
            let chunk = "<p>All work and no play makes a very large page.</p>\n".repeat(1200);
            let mut sent = 0;
            while sent < total {
                if conn.write_all(chunk.as_bytes()).is_err() {
                    return; // the reader gave up: what the test wants
                }
                sent += chunk.len();
            }
        }
    }
}
