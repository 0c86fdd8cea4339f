//! A Docker toolkit as the catalog sees it: a call becomes one driver request
//! on the session's node, and the driver's result becomes content items.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use super::manifest::{LoadedManifest, Scheduling};
use super::node::Node;
use super::{NodeBackend, NodeError};
use crate::backend::{Invocation, Toolkit};
use crate::telemetry;
use crate::tool::BoxFuture;
use crate::tool::{CallError, Content};
use tracing::Instrument;
use tracing::field::Empty;

/// Time the host waits beyond a call's limit before it gives up on a node
/// (the driver enforces `timeout_s` itself and answers first).
const GRACE: Duration = Duration::from_secs(10);

pub struct DockerToolkit {
    backend: Arc<NodeBackend>,
    spec: Arc<LoadedManifest>,
}

impl DockerToolkit {
    pub fn new(backend: Arc<NodeBackend>, spec: Arc<LoadedManifest>) -> Self {
        DockerToolkit { backend, spec }
    }
}

impl Toolkit for DockerToolkit {
    fn writes_seen_here(&self) -> bool {
        self.backend.writes_seen_here()
    }

    fn own_limits(&self) -> serde_json::Map<String, Value> {
        let d = &self.spec.manifest.docker;
        let mut m = serde_json::Map::new();
        m.insert("memory_mb".into(), d.memory_mb.into());
        m.insert("cpus".into(), d.cpus.into());
        // Seed 004's ContainerInfo `use_gpu`, `gpu_count`.
        m.insert("use_gpu".into(), d.gpu.into());
        if d.gpu {
            m.insert("gpu_count".into(), d.gpu_count.into());
        }
        m
    }

    fn invoke(self: Arc<Self>, call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
        Box::pin(async move {
            // A command the manifest marks is confirmed before it goes on.
            if let Some(rule) = self.spec.confirms.get(&call.tool) {
                rule.check(&call.tool, &call.input, call.ask.as_deref())
                    .await?;
            }
            if self.spec.service_port().is_some() {
                return self.call_service(call).await;
            }
            let mut args = call.input;
            let (node, note) = self
                .backend
                .node_for(&call.session, &self.spec)
                .instrument(acquire_span(&self.spec.name))
                .await?;
            let timeout = Duration::from_millis(call.limits.timeout_ms) + GRACE;
            let name = &self.spec.name;
            let mut cancelled = DiscardIfDropped(Some((
                self.backend.clone(),
                call.session.id().to_owned(),
                name.clone(),
                node.clone(),
            )));
            // The driver is told the trace it is in, and answers with the
            // steps it took (spans under this one).
            let exec = crate::trace_span!(
                "node.exec",
                "toolhost.node.container" = %node.container,
                "toolhost.node.op" = %call.tool,
            );
            let trace = telemetry::fields_of(&exec);
            if !trace.is_empty()
                && let Value::Object(map) = &mut args
            {
                map.insert("trace".into(), trace.into_iter().collect());
            }
            let answer = node
                .request(&call.tool, args, timeout)
                .instrument(exec.clone())
                .await;
            if let Ok(response) = &answer {
                telemetry::record_steps(&exec, response.get("steps"));
            }
            cancelled.0 = None;
            let response = match answer {
                Ok(r) => r,
                Err(e) => {
                    let (why, error) = match &e {
                        NodeError::Timeout(_) => (
                            format!(
                                "the previous {name} node did not answer within {} ms and was removed",
                                call.limits.timeout_ms
                            ),
                            CallError::Timeout {
                                limit_ms: call.limits.timeout_ms,
                            },
                        ),
                        NodeError::Died(_) | NodeError::Io(_) => {
                            match self.backend.lost_engine(&node).await {
                                // Its engine is gone with it: `node_lost`.
                                Some(place) => (
                                    format!("the previous {name} node was lost with {place}"),
                                    CallError::NodeLost(format!(
                                        "the {name} node was lost with {place} ({e}); the next call starts a fresh node (its state is lost, the workspace is kept)"
                                    )),
                                ),
                                None => (
                                    format!("the previous {name} node stopped during a call ({e})"),
                                    CallError::ToolError(format!(
                                        "the {name} node stopped during the call ({e}); the next call starts a fresh node (its state is lost, /workspace is kept)"
                                    )),
                                ),
                            }
                        }
                    };
                    call.session.log(crate::sessions::LogRecord {
                        level: tracing::Level::ERROR,
                        logger: name.clone(),
                        message: why.clone(),
                    });
                    self.backend
                        .discard(call.session.id(), name, &node, why)
                        .await;
                    return Err(error);
                }
            };
            let mut content = into_content(response)?;
            if let Some(note) = note {
                // The driver's note reaches the session's log listeners too.
                call.session.log(crate::sessions::LogRecord {
                    level: tracing::Level::WARN,
                    logger: name.clone(),
                    message: note.clone(),
                });
                content.insert(0, Content::Text(note));
            }
            Ok(content)
        })
    }
}

impl DockerToolkit {
    /// A service tool: the input sent to its endpoint (JSON body, or the
    /// query for GET, HEAD and DELETE), the answer by its media type.
    async fn call_service(self: Arc<Self>, call: Invocation) -> Result<Vec<Content>, CallError> {
        let spec = &self.spec;
        let name = &spec.name;
        let (method, path) = spec
            .endpoint(&call.tool)
            .ok_or_else(|| CallError::NotFound(call.tool.clone()))?;
        let timeout = Duration::from_millis(call.limits.timeout_ms);
        let stateless = spec.manifest.docker.scheduling == Scheduling::Stateless;
        let acquire = acquire_span(name);
        let (node, note) = if stateless {
            let workspace = call
                .session
                .prepare_workspace()
                .await
                .map_err(|e| CallError::Internal(e.to_string()))?
                .to_owned();
            let engine = self.backend.engine_for(call.session.id(), spec).await?;
            acquire.record("toolhost.node.source", "created");
            let node = self
                .backend
                .create_node(spec, &workspace, call.session.id(), engine)
                .instrument(acquire)
                .await?;
            (node, None)
        } else {
            self.backend
                .node_for(&call.session, spec)
                .instrument(acquire)
                .await?
        };
        let (target, body, content_type) = if matches!(method.as_str(), "GET" | "HEAD" | "DELETE") {
            (with_query(&path, &call.input), None, None)
        } else {
            let body =
                serde_json::to_vec(&call.input).map_err(|e| CallError::Internal(e.to_string()))?;
            (
                path,
                Some(bytes::Bytes::from(body)),
                Some("application/json"),
            )
        };
        // A stateless node goes however the call ends (a cancelled one too).
        let _removed =
            stateless.then(|| RemoveWhenDone(self.backend.clone(), node.container.clone()));
        // The service is told the trace (traceparent: its own spans join).
        let span = telemetry::client_span(&method, &format!("http://{name}{target}"), name);
        let answer = node
            .http(&method, &target, body, content_type, timeout)
            .instrument(span.clone())
            .await;
        telemetry::ended(
            &span,
            answer
                .as_ref()
                .map(|a| a.status)
                .map_err(|_| "request_failed"),
        );
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                let error = match &e {
                    NodeError::Timeout(_) => CallError::Timeout {
                        limit_ms: call.limits.timeout_ms,
                    },
                    NodeError::Died(_) | NodeError::Io(_) => CallError::ToolError(format!(
                        "the {name} service failed during the call ({e}); the next call starts a fresh container"
                    )),
                };
                if let NodeError::Died(why) = &e {
                    self.backend.health.died(name, why);
                }
                if !stateless {
                    let why = format!("the previous {name} container failed during a call ({e})");
                    self.backend
                        .discard(call.session.id(), name, &node, why)
                        .await;
                }
                return Err(error);
            }
        };
        self.backend.health.served(name);
        if !(200..300).contains(&answer.status) {
            let error = crate::httpapi::client::status_error(answer.status, &answer.body);
            // The service checked the input and refused it.
            return Err(match (answer.status, error) {
                (400 | 422, CallError::ToolError(message)) => CallError::invalid_input(message),
                (_, error) => error,
            });
        }
        let mut content = vec![crate::httpapi::client::content(
            answer.status,
            &answer.content_type,
            answer.body.to_vec(),
        )];
        if let Some(note) = note {
            content.insert(0, Content::Text(note));
        }
        Ok(content)
    }
}

/// The span of getting a node for a call: the session's, a pooled one, or
/// a new one (`toolhost.node.source`; none recorded: the session's).
fn acquire_span(toolkit: &str) -> tracing::Span {
    crate::trace_span!(
        "node.acquire",
        "toolhost.toolkit" = toolkit,
        "toolhost.node.source" = Empty,
    )
}

/// `path` with the input's top-level properties as its query.
fn with_query(path: &str, input: &Value) -> String {
    let mut url = reqwest::Url::parse("http://service").expect("a base");
    url.set_path(path);
    if let Value::Object(map) = input {
        let mut pairs = url.query_pairs_mut();
        for (k, v) in map {
            match v {
                Value::String(s) => pairs.append_pair(k, s),
                Value::Null => continue,
                other => pairs.append_pair(k, &other.to_string()),
            };
        }
    }
    match url.query() {
        Some(q) if !q.is_empty() => format!("{}?{q}", url.path()),
        _ => url.path().to_owned(),
    }
}

/// Removes a stateless call's container when the call ends.
struct RemoveWhenDone(Arc<NodeBackend>, String);

impl Drop for RemoveWhenDone {
    fn drop(&mut self) {
        let (backend, id) = (self.0.clone(), std::mem::take(&mut self.1));
        tokio::spawn(async move { backend.remove_container(&id).await });
    }
}

/// Armed while a request is in flight: a call dropped then (cancelled by its
/// client) discards its node, so the container and the command running in
/// it stop; the next call of the session starts a fresh node and is told why.
struct DiscardIfDropped(Option<(Arc<NodeBackend>, String, String, Arc<Node>)>);

impl Drop for DiscardIfDropped {
    fn drop(&mut self) {
        if let Some((backend, session, toolkit, node)) = self.0.take() {
            tracing::info!(%session, %toolkit, "call cancelled while its command ran: removing the node");
            tokio::spawn(async move {
                let why = format!(
                    "the previous {toolkit} node was removed because a call was cancelled while its command ran"
                );
                backend.discard(&session, &toolkit, &node, why).await;
            });
        }
    }
}

/// A driver response -> content: the result as JSON, with base64 images
/// (`images: [{media_type, data}]`, or a top-level `media_type` + `data`)
/// lifted out as binary items.
fn into_content(response: Value) -> Result<Vec<Content>, CallError> {
    if response["ok"] != true {
        let kind = response["error"]["kind"].as_str().unwrap_or("failed");
        let message = response["error"]["message"]
            .as_str()
            .unwrap_or("the driver failed without a message")
            .to_owned();
        return Err(match kind {
            "invalid_input" => CallError::invalid_input(message),
            _ => CallError::ToolError(message),
        });
    }
    let mut result = match response.get("result") {
        Some(Value::Object(map)) => map.clone(),
        Some(other) => return Ok(vec![Content::Json(other.clone())]),
        None => serde_json::Map::new(),
    };
    let mut binaries = Vec::new();
    if let Some(Value::Array(images)) = result.remove("images") {
        for image in &images {
            binaries.push(binary(image)?);
        }
        result.insert("image_count".into(), Value::from(images.len()));
    }
    if result.get("data").is_some_and(Value::is_string) && result.contains_key("media_type") {
        let item = Value::Object(result.clone());
        binaries.push(binary(&item)?);
        result.remove("data");
    }
    let mut content = vec![Content::Json(Value::Object(result))];
    content.extend(binaries);
    Ok(content)
}

fn binary(item: &Value) -> Result<Content, CallError> {
    let media_type = item["media_type"]
        .as_str()
        .unwrap_or("application/octet-stream");
    let data = base64::engine::general_purpose::STANDARD
        .decode(item["data"].as_str().unwrap_or_default())
        .map_err(|e| CallError::ToolError(format!("the driver sent invalid base64: {e}")))?;
    Ok(Content::Binary {
        media_type: media_type.to_owned(),
        data,
        name: item["name"].as_str().map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_errors_and_images() {
        let out = into_content(
            json!({"id": 1, "ok": true, "result": {"stdout": "hi\n", "exit_code": 0}}),
        )
        .unwrap();
        assert_eq!(
            out,
            vec![Content::Json(json!({"stdout": "hi\n", "exit_code": 0}))]
        );

        let err = into_content(
            json!({"id": 1, "ok": false, "error": {"kind": "invalid_input", "message": "busy"}}),
        )
        .unwrap_err();
        assert_eq!(err, CallError::invalid_input("busy"));
        let err = into_content(
            json!({"id": 1, "ok": false, "error": {"kind": "failed", "message": "boom"}}),
        )
        .unwrap_err();
        assert_eq!(err, CallError::ToolError("boom".into()));

        let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG");
        let out = into_content(json!({"ok": true, "result": {"stdout": "", "images": [{"media_type": "image/png", "data": png}]}})).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[0],
            Content::Json(json!({"stdout": "", "image_count": 1}))
        );
        assert!(
            matches!(&out[1], Content::Binary { media_type, data, .. } if media_type == "image/png" && data == b"\x89PNG")
        );

        let out = into_content(
            json!({"ok": true, "result": {"media_type": "image/png", "data": png, "width": 10}}),
        )
        .unwrap();
        assert_eq!(
            out[0],
            Content::Json(json!({"media_type": "image/png", "width": 10}))
        );
        assert!(matches!(&out[1], Content::Binary { .. }));

        assert!(into_content(json!({"ok": true, "result": {"images": [{"media_type": "image/png", "data": "!!"}]}})).is_err());
    }
}
