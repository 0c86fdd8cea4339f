"""Write toolhost plugins in Python.

A tool is a plain, type-annotated function. The SDK derives the JSON Schema of
its input from the type hints and the descriptions from its Google-style
docstring; `Toolkit` is the class componentize-py exports, so importing it into
the plugin's module is all the wiring there is:

    from toolhost_sdk import tool, Toolkit, ToolError, Json, Binary, host

    @tool
    def word_count(text: str, top: int = 10) -> Json:
        \"\"\"Count words in text.

        Args:
            text: The text to analyse.
            top: How many of the most frequent words to return.
        \"\"\"
        if top < 1:
            raise ToolError.invalid_input("`top` must be at least 1")
        ...
        return Json({"words": n, "top": common})

A tool returns `str` (text), `Json(value)` or a dict / list / number (JSON),
`Binary(data, media_type, name=None)`, `None` (no content) or a list mixing
these (`Text("...")` marks text in such a list). `ToolError.invalid_input` is
the agent's fault (it may retry with other input), `ToolError.failed` the
tool's; any other exception becomes `failed` with its type, message and a short
traceback, except MemoryError, which ends the call (the host reports
`out_of_memory`).

Inside a component only modules imported at build time exist (componentize-py
snapshots the interpreter after importing the app): import what the tools need
at the top of the module, never inside a function.
"""

import dataclasses
import enum
import inspect
import json
import os
import re
import sys
import traceback
import typing
from typing import Any, Callable, Dict, List, Optional, Union

from . import _docstring, _schema, host
from ._wit import IN_COMPONENT, Err, ToolkitBase, wit_types

__all__ = [
    "tool",
    "Toolkit",
    "ToolError",
    "Json",
    "Text",
    "Binary",
    "host",
    "tools",
]

__version__ = "0.1.0"

#: The WIT package this SDK speaks.
WIT_PACKAGE = "toolhost:plugin@0.1.0"

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_MAX_TRACEBACK_FRAMES = 8
_MAX_ERROR_CHARS = 4000
_SDK_DIR = os.path.dirname(os.path.abspath(__file__))


# --------------------------------------------------------------------------- errors


class ToolError(Exception):
    """A tool's own error: `ToolError.invalid_input(msg)` or `ToolError.failed(msg)`."""

    INVALID_INPUT = "invalid_input"
    FAILED = "failed"

    def __init__(self, kind: str, message: str):
        if kind not in (self.INVALID_INPUT, self.FAILED):
            raise ValueError(f"unknown ToolError kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = str(message)

    @classmethod
    def invalid_input(cls, message: str) -> "ToolError":
        """The input was wrong (the agent's fault): it may retry with other input."""
        return cls(cls.INVALID_INPUT, message)

    @classmethod
    def failed(cls, message: str) -> "ToolError":
        """The tool failed while running on valid input."""
        return cls(cls.FAILED, message)

    def __repr__(self) -> str:
        return f"ToolError.{self.kind}({self.message!r})"

    def _wit(self):
        if self.kind == self.INVALID_INPUT:
            return wit_types.ToolError_InvalidInput(self.message)
        return wit_types.ToolError_Failed(self.message)


# -------------------------------------------------------------------------- content


def _json_default(value):
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _dumps(value) -> str:
    try:
        return json.dumps(
            value,
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
            default=_json_default,
        )
    except (TypeError, ValueError) as e:
        raise ToolError.failed(f"the result is not valid JSON: {e}") from e


class Json:
    """A JSON result: `Json({"words": 12})`. Dicts and lists returned bare are JSON too."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        return f"Json({self.value!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Json) and other.value == self.value

    def _content(self):
        return wit_types.Content_Json(_dumps(self.value))


class Text:
    """A text result; a bare `str` is text too. Useful in a list of mixed content."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = str(text)

    def __repr__(self) -> str:
        return f"Text({self.text!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Text) and other.text == self.text

    def _content(self):
        return wit_types.Content_Text(self.text)


class Binary:
    """Bytes with a media type: `Binary(png, "image/png", name="chart.png")`."""

    __slots__ = ("data", "media_type", "name")

    def __init__(self, data: Union[bytes, bytearray, memoryview], media_type: str, name: Optional[str] = None):
        self.data = bytes(data)
        self.media_type = str(media_type)
        self.name = name

    def __repr__(self) -> str:
        return f"Binary(<{len(self.data)} bytes>, {self.media_type!r}, name={self.name!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Binary) and (other.data, other.media_type, other.name) == (
            self.data,
            self.media_type,
            self.name,
        )

    def _content(self):
        return wit_types.Content_Binary(wit_types.Binary(self.media_type, self.data, self.name))


_ITEMS = (Json, Text, Binary)


def _item(value):
    if isinstance(value, _ITEMS):
        return value._content()
    if isinstance(value, str):
        return wit_types.Content_Text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Binary(value, "application/octet-stream")._content()
    return Json(value)._content()


def _contents(value) -> list:
    """A tool's return value as a list of WIT content items."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)) and any(isinstance(v, _ITEMS) for v in value):
        return [_item(v) for v in value]  # a list of content items
    return [_item(value)]  # a str, bytes, wrapper, or a JSON value (lists included)


# ---------------------------------------------------------------------------- tools


class _Tool:
    """One registered tool: its function, descriptor and argument types."""

    def __init__(self, fn: Callable, name: str, description: Optional[str], output_schema):
        if not _NAME.match(name):
            raise ValueError(f"tool name {name!r} must match [A-Za-z0-9_-]{{1,64}}")
        self.fn = fn
        self.name = name
        where = f"tool `{name}`"
        doc_description, doc_params = _docstring.parse(inspect.getdoc(fn) or "")
        self.description = (description or doc_description).strip()
        if not self.description:
            raise ValueError(f"{where}: give it a docstring (or description=...): agents choose tools by it")
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except Exception as e:  # unresolvable forward references
            raise TypeError(f"{where}: cannot resolve its type hints: {e}") from e
        self.params: Dict[str, Any] = {}
        self.defaults: Dict[str, Any] = {}
        properties: Dict[str, Any] = {}
        required: List[str] = []
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
                raise TypeError(f"{where}: parameter `{p.name}` must be a plain or keyword-only parameter")
            if p.name not in hints:
                raise TypeError(f"{where}: parameter `{p.name}` needs a type annotation (use Any for any JSON)")
            tp = hints[p.name]
            if p.default is None and not _accepts_none(tp):
                tp = Optional[tp]  # `x: int = None`
            schema = _schema.schema_for(tp, f"{where}, parameter `{p.name}`")
            if p.name in doc_params and "description" not in schema:
                schema = {"description": doc_params[p.name], **schema}
            if p.default is p.empty:
                required.append(p.name)
            else:
                self.defaults[p.name] = p.default
                default = _jsonable(p.default)
                if default is not _NOT_JSON:
                    schema["default"] = default
            self.params[p.name] = tp
            properties[p.name] = schema
        for extra in set(doc_params) - set(properties):
            print(f"toolhost_sdk: {where}: docstring documents unknown parameter `{extra}`", file=sys.stderr)
        input_schema: Dict[str, Any] = {"$schema": _SCHEMA_DIALECT, "type": "object", "properties": properties}
        if required:
            input_schema["required"] = required
        input_schema["additionalProperties"] = False
        self.input_schema = json.dumps(input_schema, ensure_ascii=False)
        if output_schema is None:
            ret = hints.get("return")
            if ret is not None and _schema.is_typeddict(ret):
                output_schema = _schema.typeddict_schema(ret, f"{where}, return type")
        if output_schema is not None:
            if not isinstance(output_schema, dict):
                raise TypeError(f"{where}: output_schema must be a dict (a JSON Schema)")
            output_schema = json.dumps({"$schema": _SCHEMA_DIALECT, **output_schema}, ensure_ascii=False)
        self.output_schema: Optional[str] = output_schema

    def info(self):
        return wit_types.ToolInfo(self.name, self.description, self.input_schema, self.output_schema)

    def arguments(self, input_text: str) -> Dict[str, Any]:
        try:
            data = json.loads(input_text)
        except ValueError as e:
            raise ToolError.invalid_input(f"the input is not JSON: {e}") from None
        if not isinstance(data, dict):
            raise ToolError.invalid_input(f"the input must be a JSON object, not {_schema.json_type(data)}")
        unknown = [k for k in data if k not in self.params]
        if unknown:
            raise ToolError.invalid_input(
                f"unknown parameter{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(f'`{k}`' for k in unknown)} (expected: {', '.join(self.params) or 'none'})"
            )
        missing = [k for k in self.params if k not in data and k not in self.defaults]
        if missing:
            raise ToolError.invalid_input(f"missing required parameter {', '.join(f'`{k}`' for k in missing)}")
        args = {}
        for k, v in data.items():
            try:
                args[k] = _schema.convert(self.params[k], v, k)
            except _schema.Mismatch as e:
                raise ToolError.invalid_input(str(e)) from None
        return args

    def run(self, input_text: str) -> list:
        return _contents(self.fn(**self.arguments(input_text)))


_NOT_JSON = object()


def _jsonable(value):
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, (tuple, set, frozenset)):
        value = list(value)
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return _NOT_JSON


def _accepts_none(tp) -> bool:
    if tp is Any or tp is type(None):
        return True
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _accepts_none(typing.get_args(tp)[0])
    return origin in _schema._UNION_TYPES and type(None) in typing.get_args(tp)


_REGISTRY: Dict[str, _Tool] = {}


def tool(fn: Optional[Callable] = None, *, name: Optional[str] = None, description: Optional[str] = None, output_schema: Optional[dict] = None):
    """Register a function as a tool. Use as `@tool` or `@tool(name=..., ...)`.

    The tool's name is the function's (or `name`); the host shows it to agents
    as `<plugin>_<name>`. The description is the docstring's text before its
    sections (or `description`); parameter descriptions come from its `Args:`
    section or `Annotated[T, "description"]`. `output_schema` is an optional JSON
    Schema of a JSON result; a TypedDict return annotation provides one too.
    The function itself is returned unchanged, so it can be called in tests.
    """

    def register(f: Callable) -> Callable:
        t = _Tool(f, name or f.__name__, description, output_schema)
        if t.name in _REGISTRY and _REGISTRY[t.name].fn is not f:
            raise ValueError(f"two tools are named `{t.name}`")
        _REGISTRY[t.name] = t
        return f

    return register(fn) if fn is not None else register


def tools() -> List[_Tool]:
    """The registered tools, in registration order."""
    return list(_REGISTRY.values())


# --------------------------------------------------------------------- the export


def _failure(exc: BaseException) -> str:
    """`Type: message` and a short traceback without the SDK's own frames."""
    tb = exc.__traceback__
    while tb is not None and os.path.dirname(os.path.abspath(tb.tb_frame.f_code.co_filename)) == _SDK_DIR:
        tb = tb.tb_next
    frames = traceback.extract_tb(tb)
    if len(frames) > _MAX_TRACEBACK_FRAMES:  # the tool's own frame and the innermost ones
        lines = traceback.format_list(frames[:2]) + ["  ...\n"]
        lines += traceback.format_list(frames[2 - _MAX_TRACEBACK_FRAMES :])
    else:
        lines = traceback.format_list(frames)
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if lines:
        text += "\n\nTraceback (most recent call last):\n" + "".join(lines).rstrip()
    if len(text) > _MAX_ERROR_CHARS:
        text = text[: _MAX_ERROR_CHARS - 15] + "\n... (truncated)"
    return text


class Toolkit(ToolkitBase):
    """The `toolkit` export of the WIT world `plugin` (componentize-py looks up a
    class of this name in the app module): lists the registered tools and runs
    them. Import it into the plugin module; there is nothing to subclass."""

    def list_tools(self) -> list:
        return [t.info() for t in _REGISTRY.values()]

    def call(self, name: str, input: str) -> list:  # noqa: A002 - the WIT name
        try:
            t = _REGISTRY.get(name)
            if t is None:
                raise ToolError.invalid_input(f"this plugin has no tool named `{name}`")
            return t.run(input)
        except ToolError as e:
            raise Err(e._wit()) from None
        except MemoryError:
            # Out of linear memory: let the call trap, so the host reports
            # `out_of_memory` against the plugin's memory limit.
            raise
        except Exception as e:  # noqa: BLE001 - every failure becomes a tool error
            raise Err(wit_types.ToolError_Failed(_failure(e))) from None
