//! OpenAPI 3.0 / 3.1 and Swagger 2.0 documents as tools: each selected
//! operation becomes an [`Operation`] with a JSON Schema of its input (its
//! path, query and header parameters, a form's fields, and the JSON request
//! body as `body`) and, when the success response is a JSON object, of its
//! output. Local `$ref`s (`#/...`) are resolved inline; a reference that
//! points nowhere, or to another document, fails the load with its text.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::names::{tool_name, unique};
use super::refs::{MAX_SPEC_NODES, lookup, nodes, resolve};

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum In {
    Path,
    Query,
    Header,
    Form,
}

/// One parameter: its name on the wire and its property in the input.
#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub location: In,
    pub property: String,
}

/// One callable operation.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The tool name (within the toolkit).
    pub name: String,
    pub description: String,
    pub method: String,
    /// The path template, `{name}` placeholders included.
    pub path: String,
    pub params: Vec<Param>,
    /// The input property carrying the JSON body, if the operation has one.
    pub body: Option<String>,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
}

/// Which operations a manifest selects (all, when every list is empty).
#[derive(Debug, Default)]
pub struct Selection<'a> {
    pub operations: &'a [String],
    pub tags: &'a [String],
    pub paths: &'a [String],
}

impl Selection<'_> {
    fn is_all(&self) -> bool {
        self.operations.is_empty() && self.tags.is_empty() && self.paths.is_empty()
    }

    /// The entries of the lists that no operation of the spec matched
    /// (`matched` holds those that did), as `[api] <list>: ...` lines.
    fn unmatched(&self, matched: &HashSet<String>) -> Vec<String> {
        [
            ("operations", self.operations),
            ("tags", self.tags),
            ("paths", self.paths),
        ]
        .iter()
        .flat_map(|(list, entries)| {
            entries
                .iter()
                .filter(move |e| !matched.contains(&format!("{list}:{e}")))
                .map(move |e| format!("[api] {list} names `{e}`, which the spec does not have"))
        })
        .collect()
    }

    /// Note in `matched` every entry of the lists that this operation matches.
    fn note(
        &self,
        matched: &mut HashSet<String>,
        (op_id, name, tags, path): (Option<&str>, &str, &[&str], &str),
    ) {
        for o in self.operations {
            if Some(o.as_str()) == op_id || o == name {
                matched.insert(format!("operations:{o}"));
            }
        }
        for t in self.tags {
            if tags.contains(&t.as_str()) {
                matched.insert(format!("tags:{t}"));
            }
        }
        for p in self.paths {
            if Self::path_matches(p, path) {
                matched.insert(format!("paths:{p}"));
            }
        }
    }

    fn path_matches(pattern: &str, path: &str) -> bool {
        match pattern.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => pattern == path,
        }
    }

    fn takes(&self, op_id: Option<&str>, name: &str, tags: &[&str], path: &str) -> bool {
        self.is_all()
            || self
                .operations
                .iter()
                .any(|o| Some(o.as_str()) == op_id || o == name)
            || self.tags.iter().any(|t| tags.contains(&t.as_str()))
            || self.paths.iter().any(|p| Self::path_matches(p, path))
    }
}

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The longest description kept (summary and description joined).
const MAX_DESCRIPTION: usize = 1024;

/// Parse a spec's text: JSON, else YAML.
pub fn parse_document(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => Ok(v),
        Err(json_error) => serde_yaml::from_str::<Value>(text).map_err(|yaml_error| {
            format!("the spec is neither JSON ({json_error}) nor YAML ({yaml_error})")
        }),
    }
}

/// The spec's version family: `Some(true)` for Swagger 2.0, `Some(false)` for
/// OpenAPI 3.x.
fn is_swagger(doc: &Value) -> Result<bool, String> {
    if doc.get("swagger").and_then(Value::as_str) == Some("2.0") {
        return Ok(true);
    }
    match doc.get("openapi").and_then(Value::as_str) {
        Some(v) if v.starts_with("3.") => Ok(false),
        Some(v) => Err(format!(
            "OpenAPI version {v} is not supported (3.0, 3.1 or Swagger 2.0)"
        )),
        None => Err("not an OpenAPI document: no `openapi` (3.x) or `swagger` (2.0) field".into()),
    }
}

/// The base URL the document names: the first server (3.x, relative ones
/// against `spec_url`) or scheme + host + basePath (2.0).
pub fn base_url(doc: &Value, spec_url: Option<&str>) -> Option<String> {
    if doc.get("swagger").is_some() {
        let host = doc.get("host")?.as_str()?;
        let scheme = doc
            .get("schemes")
            .and_then(|s| s.get(0))
            .and_then(Value::as_str)
            .unwrap_or("https");
        let base = doc.get("basePath").and_then(Value::as_str).unwrap_or("");
        return Some(format!("{scheme}://{host}{base}"));
    }
    let server = doc.get("servers")?.get(0)?.get("url")?.as_str()?;
    if server.contains("://") {
        return Some(server.to_owned());
    }
    let spec = url::Url::parse(spec_url?).ok()?;
    spec.join(server).ok().map(String::from)
}

/// The operations of `doc` that `select` takes, as tools of a toolkit whose
/// ids may be `id_room` characters long, and a warning for each entry of
/// `select` the spec does not have (an error unless `lenient`).
pub fn operations(
    doc: &Value,
    select: &Selection,
    id_room: usize,
    lenient: bool,
) -> Result<(Vec<Operation>, Vec<String>), String> {
    let swagger = is_swagger(doc)?;
    let paths = doc
        .get("paths")
        .and_then(Value::as_object)
        .ok_or("the spec has no `paths` object")?;
    let mut out = Vec::new();
    let mut names = HashSet::new();
    let mut matched = HashSet::new();
    let mut total = 0;
    for (path, item) in paths {
        // A path item may itself be a reference; its operations' parts are
        // resolved as each is built (only the selected ones).
        let item = match item.get("$ref").and_then(Value::as_str) {
            Some(reference) => lookup(doc, reference).map_err(|e| format!("{path}: {e}"))?,
            None => item,
        };
        let shared: Vec<Value> = item
            .get("parameters")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for method in METHODS {
            let Some(op) = item.get(method) else {
                continue;
            };
            let op_id = op.get("operationId").and_then(Value::as_str);
            let generated = tool_name(op_id.unwrap_or(&format!("{method}_{path}")));
            let tags: Vec<&str> = op
                .get("tags")
                .and_then(Value::as_array)
                .map(|t| t.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            select.note(&mut matched, (op_id, &generated, &tags, path));
            if !select.takes(op_id, &generated, &tags, path) {
                continue;
            }
            let context = |e: String| format!("{} {path}: {e}", method.to_uppercase());
            let name = unique(&generated, id_room, &mut names);
            let mut operation = build(doc, swagger, &shared, op, method, path).map_err(context)?;
            total +=
                nodes(&operation.input_schema) + operation.output_schema.as_ref().map_or(0, nodes);
            if total > MAX_SPEC_NODES {
                return Err(context(format!(
                    "the selected operations' schemas grow past {MAX_SPEC_NODES} nodes once \
                     their $refs are resolved: select fewer ([api] operations / tags / paths)"
                )));
            }
            operation.name = name;
            out.push(operation);
        }
    }
    let missing = select.unmatched(&matched);
    if !missing.is_empty() && !lenient {
        return Err(format!(
            "{} (or set `lenient = true` in [api] to load without it)",
            missing.join("; ")
        ));
    }
    if out.is_empty() {
        return Err(if select.is_all() {
            "the spec has no operations".into()
        } else {
            "no operation of the spec matches [api] operations / tags / paths".into()
        });
    }
    Ok((out, missing))
}

fn build(
    doc: &Value,
    swagger: bool,
    shared: &[Value],
    op: &Value,
    method: &str,
    path: &str,
) -> Result<Operation, String> {
    // Operation-level parameters override path-level ones of the same
    // name and location.
    let mut raw: Vec<Value> = Vec::new();
    let own: Vec<Value> = op
        .get("parameters")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for p in shared.iter().chain(own.iter()) {
        let p = resolve(doc, p)?;
        let key = |v: &Value| (v["name"].clone(), v["in"].clone());
        raw.retain(|q| key(q) != key(&p));
        raw.push(p);
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut params = Vec::new();
    let mut body = None;
    for p in &raw {
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a parameter without a name")?;
        let location = match p.get("in").and_then(Value::as_str) {
            Some("path") => In::Path,
            Some("query") => In::Query,
            Some("header") => In::Header,
            Some("formData") => In::Form,
            Some("body") => {
                let schema = resolve(doc, p.get("schema").unwrap_or(&json!({})))?;
                let property = free_property(&properties, "body");
                if p.get("required").and_then(Value::as_bool) == Some(true) {
                    required.push(Value::String(property.clone()));
                }
                properties.insert(property.clone(), clean_schema(schema, p));
                body = Some(property);
                continue;
            }
            // Cookies are the client's business, not a tool's input.
            Some("cookie") => continue,
            other => return Err(format!("parameter `{name}` is in {other:?}")),
        };
        let schema = if swagger {
            swagger_param_schema(p)
        } else {
            resolve(doc, p.get("schema").unwrap_or(&json!({})))?
        };
        let property = if properties.contains_key(name) {
            free_property(&properties, &format!("{}_{name}", location_word(location)))
        } else {
            name.to_owned()
        };
        if location == In::Path || p.get("required").and_then(Value::as_bool) == Some(true) {
            required.push(Value::String(property.clone()));
        }
        properties.insert(property.clone(), clean_schema(schema, p));
        params.push(Param {
            name: name.to_owned(),
            location,
            property,
        });
    }
    if !swagger && let Some(request_body) = op.get("requestBody") {
        let request_body = resolve(doc, request_body)?;
        let content = request_body.get("content").and_then(Value::as_object);
        let schema = content.and_then(|c| {
            c.iter()
                .find(|(media, _)| is_json_media(media))
                .map(|(_, m)| m.get("schema").cloned().unwrap_or(json!({})))
        });
        if let Some(schema) = schema {
            let schema = resolve(doc, &schema)?;
            let property = free_property(&properties, "body");
            if request_body.get("required").and_then(Value::as_bool) == Some(true) {
                required.push(Value::String(property.clone()));
            }
            properties.insert(property.clone(), clean_schema(schema, &request_body));
            body = Some(property);
        }
    }
    let mut input = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        input["required"] = Value::Array(required);
    }
    Ok(Operation {
        name: String::new(),
        description: describe(op, method, path),
        method: method.to_uppercase(),
        path: path.to_owned(),
        params,
        body,
        input_schema: input,
        output_schema: output_schema(doc, swagger, op)?,
    })
}

/// The success response's JSON schema, if it is an object.
fn output_schema(doc: &Value, swagger: bool, op: &Value) -> Result<Option<Value>, String> {
    let Some(responses) = op.get("responses").and_then(Value::as_object) else {
        return Ok(None);
    };
    let success = ["200", "201", "202", "2XX", "2xx"]
        .iter()
        .find_map(|code| responses.get(*code))
        .or_else(|| {
            responses
                .iter()
                .find(|(code, _)| code.starts_with('2'))
                .map(|(_, r)| r)
        });
    let Some(response) = success else {
        return Ok(None);
    };
    let response = resolve(doc, response)?;
    let schema = if swagger {
        response.get("schema").cloned()
    } else {
        response
            .get("content")
            .and_then(Value::as_object)
            .and_then(|c| c.iter().find(|(media, _)| is_json_media(media)))
            .and_then(|(_, m)| m.get("schema").cloned())
    };
    let Some(schema) = schema else {
        return Ok(None);
    };
    let schema = clean_schema(resolve(doc, &schema)?, &Value::Null);
    let is_object = schema.get("type").and_then(Value::as_str) == Some("object")
        || (schema.get("type").is_none() && schema.get("properties").is_some());
    Ok(is_object.then_some(schema))
}

fn describe(op: &Value, method: &str, path: &str) -> String {
    let text = |k: &str| {
        op.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or("")
    };
    let (summary, description) = (text("summary"), text("description"));
    let mut out = match (summary.is_empty(), description.is_empty()) {
        (false, false) if !description.starts_with(summary) => {
            format!("{summary}\n\n{description}")
        }
        (false, true) => summary.to_owned(),
        (_, false) => description.to_owned(),
        (true, true) => format!("{} {path}", method.to_uppercase()),
    };
    if out.len() > MAX_DESCRIPTION {
        out = format!("{}…", crate::text::truncate(&out, MAX_DESCRIPTION));
    }
    out
}

fn is_json_media(media: &str) -> bool {
    let essence = media.split(';').next().unwrap_or("").trim();
    essence == "application/json" || essence.ends_with("+json") || essence == "*/*"
}

fn location_word(location: In) -> &'static str {
    match location {
        In::Path => "path",
        In::Query => "query",
        In::Header => "header",
        In::Form => "form",
    }
}

fn free_property(properties: &Map<String, Value>, wanted: &str) -> String {
    let mut name = wanted.to_owned();
    let mut n = 2;
    while properties.contains_key(&name) {
        name = format!("{wanted}_{n}");
        n += 1;
    }
    name
}

/// A Swagger 2.0 non-body parameter's schema: its schema keywords, with the
/// type names some generators write (`int`, `float`, `file`) mapped.
fn swagger_param_schema(p: &Value) -> Value {
    let mut schema = Map::new();
    for key in [
        "type",
        "format",
        "items",
        "enum",
        "default",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "multipleOf",
    ] {
        if let Some(v) = p.get(key) {
            schema.insert(key.to_owned(), v.clone());
        }
    }
    Value::Object(schema)
}

/// A schema as JSON Schema validators and clients take it: the parameter's
/// (or body's) description carried over, OpenAPI 3.0's `nullable` as a
/// `null` type, Swagger 2.0's boolean exclusive bounds as numbers, and type
/// names outside JSON Schema mapped (`int` -> `integer`) or dropped.
fn clean_schema(mut schema: Value, owner: &Value) -> Value {
    fix_types(&mut schema);
    if let (Some(obj), Some(d)) = (
        schema.as_object_mut(),
        owner.get("description").and_then(Value::as_str),
    ) && !obj.contains_key("description")
    {
        obj.insert("description".into(), Value::String(d.to_owned()));
    }
    schema
}

fn fix_types(v: &mut Value) {
    match v {
        Value::Object(obj) => {
            if let Some(t) = obj.get("type").and_then(Value::as_str) {
                match json_type(t) {
                    Some(fixed) => {
                        obj.insert("type".into(), Value::String(fixed.into()));
                    }
                    None => {
                        obj.remove("type");
                    }
                }
            }
            if obj.remove("nullable") == Some(Value::Bool(true))
                && let Some(Value::String(t)) = obj.get("type").cloned()
            {
                obj.insert("type".into(), json!([t, "null"]));
            }
            for (bound, exclusive) in [
                ("minimum", "exclusiveMinimum"),
                ("maximum", "exclusiveMaximum"),
            ] {
                if let Some(Value::Bool(b)) = obj.get(exclusive).cloned() {
                    obj.remove(exclusive);
                    if b && let Some(n) = obj.remove(bound) {
                        obj.insert(exclusive.into(), n);
                    }
                }
            }
            for value in obj.values_mut() {
                fix_types(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(fix_types),
        _ => {}
    }
}

fn json_type(t: &str) -> Option<&'static str> {
    Some(match t {
        "string" | "str" | "file" => "string",
        "integer" | "int" | "long" => "integer",
        "number" | "float" | "double" => "number",
        "boolean" | "bool" => "boolean",
        "object" => "object",
        "array" => "array",
        "null" => "null",
        _ => return None,
    })
}

#[cfg(test)]
#[path = "openapi_tests.rs"]
mod tests;
