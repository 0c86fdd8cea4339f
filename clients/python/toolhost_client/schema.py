"""JSON Schema as the agent frameworks take it: local `$ref`s inlined (Qwen-Agent
accepts only `{type, properties, required}`), and Lagent's parameter types."""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional

_MAX_DEPTH = 16


def inline_refs(schema: Any) -> Any:
    """`schema` with every local `$ref` (`#/$defs/X`, `#/definitions/X`)
    replaced by its target, and the definitions dropped. A cycle deeper
    than 16 levels ends in `{}` (any value)."""
    if not isinstance(schema, dict):
        return schema
    defs: Dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            for name, target in schema[key].items():
                defs[f"#/{key}/{name}"] = target

    def walk(node: Any, depth: int) -> Any:
        if isinstance(node, list):
            return [walk(n, depth) for n in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref in defs:
            if depth >= _MAX_DEPTH:
                return {}
            merged = {**copy.deepcopy(defs[ref]), **{k: v for k, v in node.items() if k != "$ref"}}
            return walk(merged, depth + 1)
        return {k: walk(v, depth) for k, v in node.items() if k not in ("$defs", "definitions")}

    return walk(schema, 0)


def object_parameters(schema: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """A tool's input schema as `{"type":"object","properties","required"}`."""
    schema = inline_refs(schema or {})
    found = schema.get("properties")
    properties: Dict[str, Any] = found if isinstance(found, dict) else {}
    required = [r for r in schema.get("required") or [] if r in properties]
    return {"type": "object", "properties": properties, "required": required}


def json_type(prop: Dict[str, Any]) -> str:
    """The JSON type of a property: its `type` (the first that is not
    `null`), else that of its first `anyOf`/`oneOf` branch, else `string`."""
    t = prop.get("type")
    if isinstance(t, str):
        return t
    if isinstance(t, list):
        for x in t:
            if x != "null" and isinstance(x, str):
                return x
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in prop.get(key) or []:
            if isinstance(branch, dict) and branch.get("type") != "null":
                return json_type(branch)
    return "string"


# Lagent's names (`lagent.actions.base_action.tool_api`: str STRING, int
# NUMBER, float FLOAT, bool BOOLEAN, list Array).
_LAGENT_TYPES = {
    "string": "STRING",
    "integer": "NUMBER",
    "number": "FLOAT",
    "boolean": "BOOLEAN",
    "array": "Array",
    "object": "OBJECT",
}


def lagent_type(prop: Dict[str, Any]) -> str:
    return _LAGENT_TYPES.get(json_type(prop), "STRING")


def describe(prop: Dict[str, Any]) -> str:
    """A property's description, with its allowed values and range."""
    text = str(prop.get("description") or "").strip()
    extra: List[str] = []
    enum = _enum(prop)
    if enum:
        extra.append("one of " + ", ".join(repr(e) for e in enum))
    if "minimum" in prop and "maximum" in prop:
        extra.append(f"{prop['minimum']}..{prop['maximum']}")
    if extra:
        text = f"{text} ({'; '.join(extra)})" if text else "; ".join(extra)
    return text


def _enum(prop: Dict[str, Any]) -> List[Any]:
    if isinstance(prop.get("enum"), list):
        return [e for e in prop["enum"] if e is not None]
    for key in ("anyOf", "oneOf"):
        for branch in prop.get(key) or []:
            if isinstance(branch, dict):
                found = _enum(branch)
                if found:
                    return found
    return []
