"""Type hints -> JSON Schema, and JSON values -> the hinted Python values.

Supported hints: str, int, float, bool, list[X] / List[X] / tuple[X, ...] /
set[X], dict / dict[str, X], Optional[X] / X | None, Union[A, B], Literal[...],
Enum subclasses, TypedDict classes (nested objects), Any, and
Annotated[X, "description", {"minimum": 1}] (a description and/or extra JSON
Schema keywords, which the host checks before the call; the SDK does not).
"""

import enum
import types
import typing
from typing import Any, Dict, List, Literal, Union

try:  # Python 3.10+
    from typing import is_typeddict
except ImportError:  # pragma: no cover
    def is_typeddict(tp) -> bool:
        return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__total__")


_NONE = type(None)
_UNION_TYPES = (Union, getattr(types, "UnionType", Union))
_SEQUENCES = (list, tuple, set, frozenset)


class Mismatch(Exception):
    """A JSON value that does not fit the hinted type."""


def json_type(value) -> str:
    """The JSON type name of a decoded JSON value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _nullable(schema: Dict[str, Any]) -> Dict[str, Any]:
    schema = dict(schema)
    if "enum" in schema:
        if None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
        if isinstance(schema.get("type"), str):
            schema["type"] = [schema["type"], "null"]
        return schema
    if isinstance(schema.get("type"), str):
        schema["type"] = [schema["type"], "null"]
        return schema
    if not schema:
        return schema  # any value, null included
    return {"anyOf": [schema, {"type": "null"}]}


def _enum_schema(values: List[Any]) -> Dict[str, Any]:
    schema: Dict[str, Any] = {"enum": list(values)}
    kinds = {json_type(v) for v in values}
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    return schema


def schema_for(tp, where: str) -> Dict[str, Any]:
    """The JSON Schema of values of type `tp`; TypeError if it has none."""
    if tp is Any or tp is object:
        return {}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        schema = schema_for(args[0], where)
        for meta in args[1:]:
            if isinstance(meta, str):
                schema = {**schema, "description": meta}
            elif isinstance(meta, dict):  # extra JSON Schema keywords, e.g. {"minimum": 1}
                schema = {**schema, **meta}
        return schema
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is _NONE or tp is None:
        return {"type": "null"}
    if tp in _SEQUENCES:
        return {"type": "array"}
    if tp is dict:
        return {"type": "object"}
    if origin in _UNION_TYPES:
        members = [a for a in args if a is not _NONE]
        if len(members) == 1:
            schema = schema_for(members[0], where)
        else:
            schema = {"anyOf": [schema_for(m, where) for m in members]}
        return _nullable(schema) if len(members) < len(args) else schema
    if origin is Literal:
        return _enum_schema(list(args))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema([m.value for m in tp])
    if origin in (list, set, frozenset) or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        schema = {"type": "array", "items": schema_for(args[0], where)} if args else {"type": "array"}
        if origin in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if origin is tuple:
        return {
            "type": "array",
            "prefixItems": [schema_for(a, where) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin is dict:
        if args and args[0] is not str:
            raise TypeError(f"{where}: dict keys must be str (JSON object keys), not {args[0]!r}")
        return {"type": "object", "additionalProperties": schema_for(args[1], where)} if args else {"type": "object"}
    if is_typeddict(tp):
        return typeddict_schema(tp, where)
    raise TypeError(
        f"{where}: unsupported type {tp!r} (use str, int, float, bool, list[...], "
        "dict[str, ...], Optional[...], Literal[...], an Enum or a TypedDict)"
    )


def typeddict_schema(tp, where: str) -> Dict[str, Any]:
    hints = typing.get_type_hints(tp, include_extras=True)
    required = getattr(tp, "__required_keys__", set(hints) if tp.__total__ else set())
    schema: Dict[str, Any] = {
        "type": "object",
        "properties": {k: schema_for(h, f"{where}.{k}") for k, h in hints.items()},
    }
    req = [k for k in hints if k in required]
    if req:
        schema["required"] = req
    schema["additionalProperties"] = False
    doc = tp.__doc__
    if doc and not doc.startswith(f"{tp.__name__}("):  # not the generated one
        schema["description"] = " ".join(doc.split())
    return schema


def convert(tp, value, path: str):
    """Check `value` (decoded JSON) against `tp` and convert it (tuple, set, Enum,
    whole floats for int). Raises Mismatch with a message naming `path`."""
    if tp is Any or tp is object:
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return convert(args[0], value, path)
    if tp is str:
        if isinstance(value, str):
            return value
        raise _mismatch(path, "a string", value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _mismatch(path, "a boolean", value)
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _mismatch(path, "an integer", value)
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _mismatch(path, "a number", value)
    if tp is _NONE or tp is None:
        if value is None:
            return None
        raise _mismatch(path, "null", value)
    if origin in _UNION_TYPES:
        if value is None and _NONE in args:
            return None
        members = [a for a in args if a is not _NONE]
        if len(members) == 1:
            return convert(members[0], value, path)
        for member in members:
            try:
                return convert(member, value, path)
            except Mismatch:
                pass
        raise _mismatch(path, " or ".join(_describe(m) for m in members), value)
    if origin is Literal:
        for choice in args:
            if value == choice and type(value) is type(choice):
                return choice
        raise Mismatch(f"`{path}` must be one of {list(args)!r}, not {value!r}")
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for member in tp:
            if member.value == value and type(member.value) is type(value):
                return member
        raise Mismatch(f"`{path}` must be one of {[m.value for m in tp]!r}, not {value!r}")
    if tp in _SEQUENCES or origin in _SEQUENCES:
        if not isinstance(value, list):
            raise _mismatch(path, "an array", value)
        kind = origin or tp
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise Mismatch(f"`{path}` must have {len(args)} items, not {len(value)}")
            return tuple(convert(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
        item = args[0] if args else Any
        items = [convert(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
        return kind(items) if kind is not list else items
    if tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise _mismatch(path, "an object", value)
        if len(args) == 2:
            return {k: convert(args[1], v, f"{path}.{k}") for k, v in value.items()}
        return value
    if is_typeddict(tp):
        if not isinstance(value, dict):
            raise _mismatch(path, "an object", value)
        hints = typing.get_type_hints(tp, include_extras=True)
        required = getattr(tp, "__required_keys__", set(hints))
        missing = [k for k in hints if k in required and k not in value]
        if missing:
            raise Mismatch(f"`{path}` is missing {', '.join(f'`{k}`' for k in missing)}")
        extra = [k for k in value if k not in hints]
        if extra:
            raise Mismatch(f"`{path}` has unknown {', '.join(f'`{k}`' for k in extra)}")
        return {k: convert(hints[k], v, f"{path}.{k}") for k, v in value.items()}
    return value


def _describe(tp) -> str:
    """What values of `tp` look like in JSON, for messages."""
    try:
        t = schema_for(tp, "")
    except TypeError:
        t = {}
    kind = t.get("type")
    if isinstance(kind, list):
        kind = "/".join(kind)
    if "enum" in t:
        return f"one of {t['enum']!r}"
    return {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
            "array": "an array", "object": "an object", "null": "null"}.get(kind, kind or "any value")


def _mismatch(path: str, expected: str, value) -> Mismatch:
    return Mismatch(f"`{path}` must be {expected}, not {json_type(value)}")
