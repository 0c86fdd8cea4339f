//! Local `$ref`s of an OpenAPI description, resolved inline within a budget
//! of JSON nodes (references that fan out are refused, not expanded).

use serde_json::{Map, Value, json};

/// The most JSON nodes one schema (a parameter, a body, a response) may
/// have once its `$ref`s are resolved. A cycle stops at its first repeat,
/// but references can also fan out (each schema naming the next twice): a
/// 3 KB spec would otherwise expand into gigabytes.
pub const MAX_RESOLVED_NODES: usize = 100_000;

/// The most JSON nodes all of a toolkit's schemas may have together.
pub const MAX_SPEC_NODES: usize = 4_000_000;

/// `value` with every local `$ref` replaced by what it points to (a
/// reference back into itself becomes an open schema, described); an error
/// past [`MAX_RESOLVED_NODES`].
pub fn resolve(doc: &Value, value: &Value) -> Result<Value, String> {
    resolve_in(doc, value, &mut Vec::new(), &mut 0)
}

/// JSON nodes in `v`.
pub fn nodes(v: &Value) -> usize {
    match v {
        Value::Object(o) => 1 + o.values().map(nodes).sum::<usize>(),
        Value::Array(a) => 1 + a.iter().map(nodes).sum::<usize>(),
        _ => 1,
    }
}

fn resolve_in(
    doc: &Value,
    value: &Value,
    stack: &mut Vec<String>,
    spent: &mut usize,
) -> Result<Value, String> {
    *spent += 1;
    if *spent > MAX_RESOLVED_NODES {
        return Err(format!(
            "a schema grows past {MAX_RESOLVED_NODES} nodes once its $refs are resolved \
             (references that fan out{}): refused",
            stack
                .last()
                .map(|r| format!(", at `{r}`"))
                .unwrap_or_default()
        ));
    }
    match value {
        Value::Object(obj) => {
            if let Some(Value::String(reference)) = obj.get("$ref") {
                if stack.contains(reference) || stack.len() > 32 {
                    return Ok(json!({"description": format!("(recursive: {reference})")}));
                }
                let target = lookup(doc, reference)?;
                stack.push(reference.clone());
                let mut resolved = resolve_in(doc, target, stack, spent)?;
                stack.pop();
                // 3.1 allows keywords beside `$ref`: they refine it.
                if let Value::Object(out) = &mut resolved {
                    for (k, v) in obj.iter().filter(|(k, _)| *k != "$ref") {
                        out.insert(k.clone(), resolve_in(doc, v, stack, spent)?);
                    }
                }
                return Ok(resolved);
            }
            let mut out = Map::new();
            for (k, v) in obj {
                // Examples are data, not schemas: never resolved.
                let v = if k == "example" || k == "examples" {
                    v.clone()
                } else {
                    resolve_in(doc, v, stack, spent)?
                };
                out.insert(k.clone(), v);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => items
            .iter()
            .map(|v| resolve_in(doc, v, stack, spent))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

pub fn lookup<'d>(doc: &'d Value, reference: &str) -> Result<&'d Value, String> {
    let Some(pointer) = reference.strip_prefix('#') else {
        return Err(format!(
            "$ref `{reference}` points into another document (only local `#/...` references are read)"
        ));
    };
    let pointer = percent_encoding::percent_decode_str(pointer).decode_utf8_lossy();
    doc.pointer(&pointer)
        .ok_or_else(|| format!("unresolvable $ref `{reference}`"))
}
