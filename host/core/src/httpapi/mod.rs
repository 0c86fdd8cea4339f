//! API tools: HTTP services that already exist, described by an OpenAPI 3.x
//! or Swagger 2.0 document (a file of the toolkit's folder or a URL read at
//! load) or by single endpoints in the manifest (seed 004's `api` runtime).
//! A toolkit is a folder `<plugins>/<name>/` whose `<name>.toml` has an
//! `[api]` table (see [`manifest`]); it is claimed, loaded, hot-reloaded and
//! removed like every entry of the plugins directory, and its tools are
//! called through the same dispatch as every other tool. The host sends each
//! request itself ([`client::Outbound`]): allow-list, internal addresses,
//! redirects, timeouts, size cap, pooled connections, secrets.

pub mod client;
pub mod manifest;
mod names;
pub mod openapi;
pub mod outgoing;
mod refs;
pub mod toolkit;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::backend::{Backend, BackendFuture, EntryFile, Loaded, content_hash, folder_manifest};
use crate::tool::{self, Content, Limits, ToolDescriptor};
use client::Outbound;
use manifest::{Manifest, Secrets};
use openapi::{Operation, Param, Selection};
use toolkit::{ApiToolkit, Rest, Route};

/// The time a spec read from a URL may take, and its largest size.
const SPEC_TIMEOUT: Duration = Duration::from_secs(30);
const SPEC_MAX_BYTES: usize = 32 << 20;

/// The backend of API toolkits.
pub struct ApiBackend {
    secrets: Secrets,
}

impl ApiBackend {
    pub fn new(secrets: Secrets) -> Self {
        ApiBackend { secrets }
    }

    async fn load_manifest(
        &self,
        name: &str,
        files: &[EntryFile],
        report: &(dyn Fn(&'static str) + Sync),
    ) -> Result<Loaded, String> {
        let (folder, text) = folder_manifest(name, files)?;
        let manifest = manifest::parse(text)?;
        let api = &manifest.api;
        let auth = match &api.auth {
            Some(auth) => Some((auth.clone(), self.secrets.get(&auth.secret)?)),
            None => None,
        };
        let outbound = Outbound::new(
            &api.allow,
            Duration::from_millis(api.connect_timeout_ms),
            api.max_redirects,
            usize::try_from(api.max_response_kb.saturating_mul(1024)).unwrap_or(usize::MAX),
            auth,
        )?;
        let mut version: Vec<u8> = files
            .iter()
            .flat_map(|f| content_hash(&f.bytes).into_bytes())
            .collect();
        let (doc, spec_url) = match &api.spec {
            None => (None, None),
            Some(spec) if spec.starts_with("http://") || spec.starts_with("https://") => {
                report("reading the spec");
                let doc = fetch_spec(&outbound, spec).await?;
                version.extend(content_hash(doc.to_string().as_bytes()).into_bytes());
                (Some(doc), Some(spec.as_str()))
            }
            Some(spec) => {
                let path = folder.join(spec);
                let file = files.iter().find(|f| f.path == path).ok_or_else(|| {
                    format!("[api] spec `{spec}` is not a file of the toolkit's folder")
                })?;
                let text = std::str::from_utf8(&file.bytes)
                    .map_err(|_| format!("the spec `{spec}` is not UTF-8 text"))?;
                (Some(openapi::parse_document(text)?), None)
            }
        };
        let base_url = match (&api.base_url, &doc) {
            (Some(url), _) => Some(url.clone()),
            (None, Some(doc)) => openapi::base_url(doc, spec_url),
            (None, None) => None,
        };
        if let Some(base) = &base_url {
            let url = url::Url::parse(base).map_err(|e| format!("base URL `{base}`: {e}"))?;
            if let Some(why) = outbound.refusal("GET", &url) {
                return Err(format!("base URL `{base}`: {why}"));
            }
        }
        let room = tool::MAX_TOOL_ID_LEN.saturating_sub(name.len() + 1);
        let mut routes: Vec<Route> = Vec::new();
        let mut warnings = Vec::new();
        if let Some(doc) = &doc {
            if base_url.is_none() {
                return Err("the spec names no server: set [api] base_url".into());
            }
            let select = Selection {
                operations: &api.operations,
                tags: &api.tags,
                paths: &api.paths,
            };
            let (ops, missing) = openapi::operations(doc, &select, room, api.lenient)?;
            for w in &missing {
                tracing::warn!(toolkit = name, "{w}");
            }
            warnings.extend(missing);
            routes.extend(ops.into_iter().map(|op| Route {
                op,
                absolute: false,
                rest: Rest::Ignored,
            }));
        }
        for endpoint in &manifest.tools {
            routes.push(endpoint_route(
                endpoint,
                base_url.is_some(),
                &outbound,
                room,
            )?);
        }
        let mut seen = std::collections::HashSet::new();
        for r in &routes {
            if !seen.insert(r.op.name.clone()) {
                return Err(format!("two tools are named `{}`", r.op.name));
            }
        }
        let tools: Vec<ToolDescriptor> = routes
            .iter()
            .map(|r| ToolDescriptor {
                name: r.op.name.clone(),
                description: r.op.description.clone(),
                input_schema: r.op.input_schema.clone(),
                output_schema: r.op.output_schema.clone(),
                continue_with: None,
                hints: Default::default(),
            })
            .collect();
        let description = description(&manifest, doc.as_ref(), name);
        let limits = Limits {
            timeout_ms: api.timeout_ms,
            max_concurrency: api.max_concurrency,
            max_queue: 256,
            // A binary body is sent base64-encoded: room for that.
            max_output_kb: u32::try_from(api.max_response_kb.saturating_mul(2)).unwrap_or(u32::MAX),
        };
        let toolkit = ApiToolkit {
            routes: routes
                .into_iter()
                .map(|r| (r.op.name.clone(), r))
                .collect::<HashMap<_, _>>(),
            base_url,
            outbound,
            fetched: api
                .spec
                .as_deref()
                .is_some_and(|s| s.starts_with("http://") || s.starts_with("https://")),
        };
        Ok(Loaded {
            description,
            version: content_hash(&version),
            limits,
            toolkit: Arc::new(toolkit),
            tools,
            compile: None,
            better: None,
            warnings,
            provenance: None,
        })
    }
}

impl Backend for ApiBackend {
    fn name(&self) -> &'static str {
        "api"
    }

    fn folder_kind(&self) -> Option<&'static str> {
        Some("api")
    }

    fn load<'a>(
        &'a self,
        name: &'a str,
        files: Vec<EntryFile>,
        report: &'a (dyn Fn(&'static str) + Sync),
    ) -> BackendFuture<'a, Result<Loaded, String>> {
        Box::pin(async move { self.load_manifest(name, &files, report).await })
    }
}

async fn fetch_spec(outbound: &Outbound, spec: &str) -> Result<Value, String> {
    let url = url::Url::parse(spec).map_err(|e| format!("[api] spec `{spec}`: {e}"))?;
    let request = outbound
        .request("GET", url)
        .map_err(|e| format!("[api] spec `{spec}`: {e}"))?;
    let content = outbound
        .send_capped(request, SPEC_TIMEOUT, SPEC_MAX_BYTES)
        .await
        .map_err(|e| format!("cannot read the spec `{spec}`: {e}"))?;
    match content.into_iter().next() {
        Some(Content::Json(doc)) => Ok(doc),
        Some(Content::Text(text)) => openapi::parse_document(&text),
        _ => Err(format!("the spec `{spec}` is not a JSON or YAML document")),
    }
}

/// A single endpoint of the manifest as a route.
fn endpoint_route(
    e: &manifest::Endpoint,
    has_base: bool,
    outbound: &Outbound,
    room: usize,
) -> Result<Route, String> {
    let context = |why: String| format!("[[tools]] `{}`: {why}", e.name);
    let valid = !e.name.is_empty()
        && e.name.len() <= room
        && e.name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Err(context(format!(
            "a name of letters, digits, `_` and `-`, at most {room} long"
        )));
    }
    let method = e.method.to_ascii_uppercase();
    if hyper::Method::from_bytes(method.as_bytes()).is_err() || method.is_empty() {
        return Err(context(format!("`{}` is not an HTTP method", e.method)));
    }
    let (template, absolute) = match (&e.url, &e.path) {
        (Some(url), _) => {
            // Placeholders may sit in the path: check the URL without them.
            let probe = url.replace(['{', '}'], "");
            let parsed = url::Url::parse(&probe).map_err(|why| context(format!("url: {why}")))?;
            if let Some(why) = outbound.refusal(&method, &parsed) {
                return Err(context(why));
            }
            (url.clone(), true)
        }
        (None, Some(path)) if has_base => (path.clone(), false),
        _ => {
            return Err(context(
                "a path needs [api] base_url (or a spec naming a server)".into(),
            ));
        }
    };
    let input_schema = e
        .input_schema
        .clone()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    let params: Vec<Param> = toolkit::placeholder_names(&template)
        .into_iter()
        .map(|n| Param {
            name: n.clone(),
            location: openapi::In::Path,
            property: n,
        })
        .collect();
    let rest = if matches!(method.as_str(), "GET" | "HEAD" | "DELETE") {
        Rest::Query
    } else {
        Rest::Body
    };
    Ok(Route {
        op: Operation {
            name: e.name.clone(),
            description: if e.description.is_empty() {
                format!("{method} {template}")
            } else {
                e.description.clone()
            },
            method,
            path: template,
            params,
            body: None,
            input_schema,
            output_schema: e.output_schema.clone(),
        },
        absolute,
        rest,
    })
}

fn description(manifest: &Manifest, doc: Option<&Value>, name: &str) -> String {
    if let Some(d) = &manifest.description {
        return d.clone();
    }
    let info = |k: &str| {
        doc.and_then(|d| d.get("info"))
            .and_then(|i| i.get(k))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    match (info("title"), info("description")) {
        (Some(t), Some(d)) => format!("{t}: {d}"),
        (Some(t), None) => t.to_owned(),
        _ => format!("The HTTP API {name}"),
    }
}
