//! An API toolkit as the catalog sees it: a call becomes one HTTP request
//! (its parameters placed as the operation says), sent by the toolkit's
//! [`Outbound`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde_json::{Map, Value};
use url::Url;

use super::client::Outbound;
use super::openapi::{In, Operation};
use super::outgoing::Outgoing;
use crate::backend::{Invocation, Toolkit};
use crate::tool::BoxFuture;
use crate::tool::{CallError, Content};

/// Characters escaped in a path segment (RFC 3986 pchar, and `/`).
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'[')
    .add(b']')
    .add(b'\\')
    .add(b'^')
    .add(b'|');

/// `value` as one path segment: every character that could end the segment
/// or the path (`/`, `\\`, `?`, `#`, `%`, ...) percent-encoded. `None` for
/// `.` and `..`: URL parsers resolve those (and their percent-encoded
/// forms) as steps up the path, so no encoding keeps them in place.
fn segment(value: &str) -> Option<String> {
    (value != "." && value != "..").then(|| utf8_percent_encode(value, SEGMENT).to_string())
}

/// Where the input's properties that are no declared parameter go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rest {
    /// Nowhere (an OpenAPI operation: its schema lists every property).
    Ignored,
    /// In the query (a single GET, HEAD or DELETE endpoint).
    Query,
    /// As the JSON body (a single endpoint of another method).
    Body,
}

/// One tool: its operation and how its URL is made.
pub struct Route {
    pub op: Operation,
    /// `op.path` is a whole URL (a single endpoint's `url`), not a path
    /// under the base URL.
    pub absolute: bool,
    pub rest: Rest,
}

pub struct ApiToolkit {
    pub routes: HashMap<String, Route>,
    pub base_url: Option<String>,
    pub outbound: Outbound,
    /// Its spec was fetched by URL: its definitions are pinned.
    pub fetched: bool,
}

impl Toolkit for ApiToolkit {
    fn pins_definitions(&self) -> bool {
        self.fetched
    }

    /// It writes no workspace file: nothing to walk for, nothing written
    /// out of this kernel's sight.
    fn writes_seen_here(&self) -> bool {
        true
    }

    fn invoke(self: Arc<Self>, call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
        Box::pin(async move {
            let route = self
                .routes
                .get(&call.tool)
                .ok_or_else(|| CallError::NotFound(call.tool.clone()))?;
            let input = match call.input {
                Value::Object(map) => map,
                _ => return Err(CallError::invalid_input("the input must be an object")),
            };
            let request = self.request(route, input)?;
            let timeout = Duration::from_millis(call.limits.timeout_ms);
            self.outbound.send(request, timeout).await
        })
    }
}

impl ApiToolkit {
    fn request(&self, route: &Route, mut input: Map<String, Value>) -> Result<Outgoing, CallError> {
        let op = &route.op;
        // Path placeholders first: `{name}` takes the parameter's value.
        let mut path = op.path.clone();
        let placeholders = op.params.iter().filter(|p| p.location == In::Path);
        for p in placeholders {
            let (name, property) = (&p.name, &p.property);
            let Some(value) = input.remove(property) else {
                if path.contains(&format!("{{{name}}}")) {
                    return Err(CallError::invalid_input(format!(
                        "`{property}` is required (a path parameter)"
                    )));
                }
                continue;
            };
            let text = segment(&scalar(&value)).ok_or_else(|| {
                CallError::invalid_input(format!(
                    "`{property}` cannot be `.` or `..`: a path parameter never leaves the operation's path"
                ))
            })?;
            path = path.replace(&format!("{{{name}}}"), &text);
        }
        let whole = if route.absolute {
            path
        } else {
            let base = self
                .base_url
                .as_deref()
                .ok_or_else(|| CallError::Internal("no base URL".into()))?;
            format!("{}{}", base.trim_end_matches('/'), path)
        };
        let mut url = Url::parse(&whole).map_err(|e| {
            CallError::invalid_input(format!("the parameters make no valid URL ({e})"))
        })?;
        let mut headers = Vec::new();
        let mut form = Vec::new();
        for p in &op.params {
            let Some(value) = input.remove(&p.property) else {
                continue;
            };
            match p.location {
                In::Path => {}
                In::Query => append_query(&mut url, &p.name, &value),
                In::Header => headers.push((p.name.clone(), scalar(&value))),
                In::Form => form.push((p.name.clone(), scalar(&value))),
            }
        }
        let body = op.body.as_ref().and_then(|b| input.remove(b));
        let rest_body = match route.rest {
            Rest::Query => {
                for (k, v) in &input {
                    append_query(&mut url, k, v);
                }
                None
            }
            Rest::Body => Some(Value::Object(std::mem::take(&mut input))),
            Rest::Ignored => None,
        };
        let mut request = self.outbound.request(&op.method, url)?;
        for (name, value) in headers {
            let name = hyper::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                CallError::invalid_input(format!("`{name}` is not a valid header name"))
            })?;
            let value = hyper::header::HeaderValue::from_str(&value).map_err(|_| {
                CallError::invalid_input(format!(
                    "the value of header `{name}` is not valid in a header"
                ))
            })?;
            request = request.header(name, value);
        }
        if !form.is_empty() {
            request = request.form(&form);
        }
        if let Some(body) = body.or(rest_body) {
            request = request.json(&body);
        }
        Ok(request)
    }
}

/// The `{name}` placeholders of a template.
pub fn placeholder_names(template: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        names.push(rest[start + 1..start + len].to_owned());
        rest = &rest[start + len + 1..];
    }
    names
}

/// A value as one parameter's text: strings as they are, arrays joined
/// with commas, anything else as JSON.
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// A query parameter; an array repeats it (`?a=1&a=2`).
fn append_query(url: &mut Url, name: &str, v: &Value) {
    match v {
        Value::Array(items) => {
            for item in items {
                url.query_pairs_mut().append_pair(name, &scalar(item));
            }
        }
        Value::Null => {}
        other => {
            url.query_pairs_mut().append_pair(name, &scalar(other));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #37 item 6: `{"id": ".."}` on `/public/{id}/details` reached
    /// `/details` with the toolkit's credentials. No value leaves the path.
    #[test]
    fn a_path_parameter_never_leaves_the_operations_path() {
        let url = |value: &str| {
            segment(value).map(|s| {
                Url::parse(&format!("http://api.example/public/{s}/details"))
                    .unwrap()
                    .path()
                    .to_owned()
            })
        };
        assert_eq!(url(".."), None);
        assert_eq!(url("."), None);
        for (value, path) in [
            ("%2e%2e", "/public/%252e%252e/details"),
            (".%2E", "/public/.%252E/details"),
            ("../..", "/public/..%2F../details"),
            ("..\\x", "/public/..%5Cx/details"),
            ("a?b#c", "/public/a%3Fb%23c/details"),
            ("...", "/public/.../details"),
            ("v1.2", "/public/v1.2/details"),
        ] {
            assert_eq!(url(value).as_deref(), Some(path), "{value}");
        }
    }

    #[test]
    fn placeholders_and_values() {
        assert_eq!(placeholder_names("/a/{x}/b/{y_z}"), ["x", "y_z"]);
        assert_eq!(placeholder_names("/none"), Vec::<String>::new());
        assert_eq!(scalar(&serde_json::json!(["a", 1, true])), "a,1,true");
        assert_eq!(
            utf8_percent_encode("a/b c?", SEGMENT).to_string(),
            "a%2Fb%20c%3F"
        );
        let mut url = Url::parse("http://h/p").unwrap();
        append_query(&mut url, "k", &serde_json::json!([1, "x y"]));
        append_query(&mut url, "n", &Value::Null);
        assert_eq!(url.as_str(), "http://h/p?k=1&k=x+y");
    }
}
