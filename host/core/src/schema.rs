//! Tool schemas as agent frameworks' own code accepts them.
//!
//! Plugins describe their input and output with whatever their language's
//! schema generator emits. Two details of those schemas break real clients,
//! so the catalog normalises every schema once, at registration, and every
//! surface (native, XAgent, MCP, the OpenAI / Lagent exports) publishes the
//! result:
//!
//! - An object schema without `properties` (a tool with no arguments:
//!   `{"type":"object"}`) makes Qwen-Agent's MCP manager refuse *every* tool
//!   of the server ("Missing required fields in schema"). Object schemas get
//!   `"properties": {}`, which changes nothing a validator accepts.
//! - `format` values that are not JSON Schema formats (schemars' `uint16`,
//!   `int64`, `double` ...) make Ajv warn on every schema. They are dropped;
//!   an integer format's range becomes `minimum` / `maximum` where the schema
//!   does not bound it already, so nothing is lost.
//!
//! Only schema positions are visited (`properties/*`, `items`, `anyOf/*` ...),
//! never data (`default`, `const`, `enum`, `examples`), so a property that
//! happens to be called `format` keeps its schema.

use serde_json::{Map, Value, json};

/// What `validator` finds wrong with `value`, at most `max`, each after
/// where it is (its JSON pointer) unless it is the whole value.
pub fn violations(validator: &jsonschema::Validator, value: &Value, max: usize) -> Vec<String> {
    validator
        .iter_errors(value)
        .take(max)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect()
}

/// The formats of JSON Schema (draft 2020-12, and `uuid` etc. from it).
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Keywords whose value is one schema.
const ONE_SCHEMA: &[&str] = &[
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
];

/// Keywords whose value is a list of schemas.
const SCHEMA_LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];

/// Keywords whose value maps names to schemas.
const SCHEMA_MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Normalise a tool's input schema: an object schema at the top (a schema
/// with no `type` and nothing that could say otherwise is taken as one, since
/// every input is a JSON object), then [`normalize`].
pub fn normalize_input(schema: &mut Value) {
    if let Value::Object(map) = schema {
        let open = ![
            "type", "$ref", "anyOf", "oneOf", "allOf", "const", "enum", "not",
        ]
        .iter()
        .any(|k| map.contains_key(*k));
        if open {
            map.insert("type".into(), json!("object"));
        }
    }
    normalize(schema);
}

/// Normalise `schema` and every schema inside it (see the module docs).
pub fn normalize(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    if is_object_type(map.get("type")) && !map.contains_key("properties") {
        map.insert("properties".into(), Value::Object(Map::new()));
    }
    if let Some(Value::String(format)) = map.get("format")
        && !STANDARD_FORMATS.contains(&format.as_str())
    {
        let format = format.clone();
        map.remove("format");
        if let Some((min, max)) = integer_range(&format) {
            if !map.contains_key("minimum") && !map.contains_key("exclusiveMinimum") {
                map.insert("minimum".into(), min);
            }
            if let Some(max) = max
                && !map.contains_key("maximum")
                && !map.contains_key("exclusiveMaximum")
            {
                map.insert("maximum".into(), max);
            }
        }
    }
    for key in ONE_SCHEMA {
        if let Some(sub) = map.get_mut(*key)
            && sub.is_object()
        {
            normalize(sub);
        }
    }
    for key in SCHEMA_LIST {
        if let Some(Value::Array(list)) = map.get_mut(*key) {
            list.iter_mut().for_each(normalize);
        }
    }
    for key in SCHEMA_MAP {
        if let Some(Value::Object(subs)) = map.get_mut(*key) {
            subs.values_mut().for_each(normalize);
        }
    }
}

fn is_object_type(ty: Option<&Value>) -> bool {
    match ty {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => false,
    }
}

/// The range of a schemars-style integer format; the upper bound only where
/// a JSON number holds it exactly (not for 64-bit types).
fn integer_range(format: &str) -> Option<(Value, Option<Value>)> {
    Some(match format {
        "uint8" => (json!(0), Some(json!(u8::MAX))),
        "uint16" => (json!(0), Some(json!(u16::MAX))),
        "uint32" => (json!(0), Some(json!(u32::MAX))),
        "uint64" | "uint128" | "uint" => (json!(0), None),
        "int8" => (json!(i8::MIN), Some(json!(i8::MAX))),
        "int16" => (json!(i16::MIN), Some(json!(i16::MAX))),
        "int32" => (json!(i32::MIN), Some(json!(i32::MAX))),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_schemas_get_properties() {
        let mut s = json!({"type": "object"});
        normalize_input(&mut s);
        assert_eq!(s, json!({"type": "object", "properties": {}}));

        // No type at all: an input is an object.
        let mut s = json!({"description": "anything"});
        normalize_input(&mut s);
        assert_eq!(s["type"], "object");
        assert_eq!(s["properties"], json!({}));

        // A combinator says what it is; it is left alone at the top.
        let mut s = json!({"anyOf": [{"type": "object"}, {"type": "null"}]});
        normalize_input(&mut s);
        assert!(s.get("type").is_none());
        assert_eq!(s["anyOf"][0]["properties"], json!({}));

        // Nested, and a type list.
        let mut s = json!({"type": "object", "properties": {
            "opts": {"type": ["object", "null"]},
            "list": {"type": "array", "items": {"type": "object"}}
        }});
        normalize(&mut s);
        assert_eq!(s["properties"]["opts"]["properties"], json!({}));
        assert_eq!(s["properties"]["list"]["items"]["properties"], json!({}));
        assert!(s["properties"]["list"].get("properties").is_none());
    }

    #[test]
    fn non_standard_formats_become_ranges() {
        let mut s = json!({"type": "object", "properties": {
            "port": {"type": "integer", "format": "uint16", "minimum": 1},
            "n": {"type": "integer", "format": "uint64"},
            "t": {"type": "integer", "format": "int8"},
            "x": {"type": "number", "format": "double"},
            "when": {"type": "string", "format": "date-time"},
            "format": {"type": "string", "default": {"format": "uint16"}},
        }, "$defs": {"D": {"type": "integer", "format": "uint32"}}});
        normalize(&mut s);
        let p = &s["properties"];
        assert_eq!(
            p["port"],
            json!({"type": "integer", "minimum": 1, "maximum": 65535})
        );
        assert_eq!(p["n"], json!({"type": "integer", "minimum": 0}));
        assert_eq!(
            p["t"],
            json!({"type": "integer", "minimum": -128, "maximum": 127})
        );
        assert_eq!(p["x"], json!({"type": "number"}));
        assert_eq!(p["when"]["format"], "date-time");
        // A property named `format` is a schema; data is never touched.
        assert_eq!(p["format"]["default"], json!({"format": "uint16"}));
        assert_eq!(s["$defs"]["D"]["maximum"], json!(u32::MAX));
    }
}
