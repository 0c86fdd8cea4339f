//! What a toolkit's manifest (every kind's `<name>.toml`) declares about
//! its upkeep, beside its tools:
//!
//! ```toml
//! [health]
//! interval_s = 30                               # its looks (else [health] interval_s)
//! probe = { tool = "add", input = { a = 1 } }   # a cheap call made at each look
//!
//! [fallback]                                    # tool -> tool ids tried in order
//! compress = ["other_compress", "third_compress"]
//! ```
//!
//! A probe is an ordinary call (through the dispatcher, in a session of its
//! own): it fails when the call fails for trouble of the tool's own
//! ([`super::is_trouble`]) or answers the tool's error. A fallback is tried
//! when its tool cannot serve ([`crate::dispatch`]); it must take what the
//! tool takes ([`schema_disagreement`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A manifest's `[health]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Declared {
    /// Seconds between this toolkit's looks (else `[health] interval_s`).
    pub interval_s: Option<u64>,
    /// A call made at each look.
    pub probe: Option<ProbeCall>,
}

/// The probe's call: one of the toolkit's tools (its name within the
/// toolkit) and its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeCall {
    pub tool: String,
    #[serde(default = "empty_object")]
    pub input: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// A manifest's `[fallback]`: a tool's name -> the tool ids tried in order.
pub type Fallbacks = BTreeMap<String, Vec<String>>;

/// Why a call's input for a tool of schema `from` cannot be given to a
/// tool of schema `to`, if it cannot: `to` requires a property `from` does
/// not describe, or a property both describe has different types. What
/// `from` has and `to` does not describe is left out of the mapped input
/// ([`map_input`]).
pub fn schema_disagreement(from: &Value, to: &Value) -> Option<String> {
    let props = |s: &Value| s.get("properties").and_then(Value::as_object).cloned();
    let (from_props, to_props) = (
        props(from).unwrap_or_default(),
        props(to).unwrap_or_default(),
    );
    let required = to
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    for name in required {
        if !from_props.contains_key(name) {
            return Some(format!(
                "it requires `{name}`, which the tool's input does not have"
            ));
        }
    }
    for (name, theirs) in &to_props {
        let Some(ours) = from_props.get(name) else {
            continue;
        };
        let (a, b) = (ours.get("type"), theirs.get("type"));
        if let (Some(a), Some(b)) = (a, b)
            && a != b
        {
            return Some(format!("its `{name}` is {b}, the tool's is {a}"));
        }
    }
    None
}

/// `input` as the tool of schema `to` takes it: when `to` describes its
/// properties, only those.
pub fn map_input(input: &Value, to: &Value) -> Value {
    match (input, to.get("properties").and_then(Value::as_object)) {
        (Value::Object(given), Some(props)) => Value::Object(
            given
                .iter()
                .filter(|(k, _)| props.contains_key(*k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        _ => input.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_agree_where_the_fallback_takes_what_the_tool_takes() {
        let tool = json!({"type": "object", "required": ["text"], "properties": {
            "text": {"type": "string"}, "level": {"type": "integer"}}});
        let same = json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}});
        assert_eq!(schema_disagreement(&tool, &same), None);
        let more = json!({"type": "object", "required": ["text", "lang"], "properties": {
            "text": {"type": "string"}, "lang": {"type": "string"}}});
        assert!(
            schema_disagreement(&tool, &more)
                .unwrap()
                .contains("`lang`")
        );
        let typed = json!({"type": "object", "properties": {"level": {"type": "string"}}});
        let why = schema_disagreement(&tool, &typed).unwrap();
        assert!(
            why.contains("`level`") && why.contains("\"string\""),
            "{why}"
        );
        // Mapped: only what the fallback describes.
        let input = json!({"text": "hi", "level": 3});
        assert_eq!(map_input(&input, &same), json!({"text": "hi"}));
        assert_eq!(map_input(&input, &json!({"type": "object"})), input);
    }

    #[test]
    fn manifests_declare_probes_and_intervals() {
        let d: Declared =
            toml::from_str("interval_s = 5\nprobe = { tool = \"add\", input = { a = 1 } }")
                .unwrap();
        assert_eq!(d.interval_s, Some(5));
        assert_eq!(d.probe.unwrap().input, json!({"a": 1}));
        assert!(toml::from_str::<Declared>("every = 5").is_err());
    }
}
