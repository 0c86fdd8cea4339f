"""Unit tests of toolhost_sdk on plain CPython (3.10+), stdlib only:

    PYTHONPATH=sdk/python python3 -m unittest discover -s sdk/python/tests
"""

import json
import unittest
from enum import Enum
from typing import Annotated, Any, List, Literal, Optional, TypedDict, Union

import toolhost_sdk
from toolhost_sdk import Binary, Json, Text, Toolkit, ToolError, host, tool
from toolhost_sdk import _docstring, _schema
from toolhost_sdk._wit import Err


def schema_of(name):
    t = toolhost_sdk._REGISTRY[name]
    return json.loads(t.input_schema)


def call(name, **params):
    """Run a tool through the export; (kind, payload) with kind ok / invalid_input / failed."""
    try:
        items = Toolkit().call(name, json.dumps(params))
    except Err as e:
        kind = "invalid_input" if type(e.value).__name__.endswith("InvalidInput") else "failed"
        return kind, e.value.value
    return "ok", items


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Point(TypedDict):
    """A point in the plane."""

    x: float
    y: float


class Out(TypedDict):
    total: int


@tool
def t_word_count(text: str, top: int = 10) -> Json:
    """Count words in text.

    The count is naive.

    Args:
        text: The text to analyse.
        top (int): How many of the most frequent
            words to return.

    Returns:
        Counts.
    """
    words = text.split()
    return Json({"words": len(words), "top": top})


@tool(name="t-kinds", description="All the kinds.")
def t_kinds(
    s: str,
    i: int,
    f: float,
    b: bool,
    tags: list[str],
    opt: Optional[int] = None,
    new_opt: str | None = "x",
    lit: Literal["a", "b"] = "a",
    color: Color = Color.RED,
    point: Optional[Point] = None,
    mapping: dict[str, float] = {},  # noqa: B006
    anything: Any = None,
    either: Union[int, str] = 0,
    described: Annotated[int, "Annotated description.", {"minimum": 1}] = 1,
    implicit_none: int = None,  # type: ignore[assignment]
    seq: tuple[int, ...] = (),
) -> dict:
    return {
        "s": s,
        "i": i,
        "f": f,
        "b": b,
        "tags": tags,
        "opt": opt,
        "new_opt": new_opt,
        "lit": lit,
        "color": color,
        "point": point,
        "mapping": mapping,
        "anything": anything,
        "either": either,
        "described": described,
        "implicit_none": implicit_none,
        "seq": seq,
        "types": [type(v).__name__ for v in (i, f, color, seq)],
    }


@tool
def t_fail(kind: str) -> str:
    """Fail in various ways."""
    if kind == "invalid":
        raise ToolError.invalid_input("bad input")
    if kind == "failed":
        raise ToolError.failed("it broke")
    if kind == "memory":
        raise MemoryError()
    return str(1 / 0)


@tool
def t_outputs(kind: str):
    """Return various things."""
    return {
        "text": "hello",
        "dict": {"a": 1},
        "list": [1, 2],
        "none": None,
        "bytes": b"\x00\x01",
        "mixed": ["caption", Binary(b"png", "image/png", name="a.png"), Json([1]), {"k": "v"}],
        "nan": Json(float("nan")),
        "object": Json(object()),
        "set": Json({"s": {3, 1, 2}, "c": Color.BLUE}),
        "text_obj": Text("t"),
    }[kind]


@tool
def t_typed_out(n: int) -> Out:
    """Typed output."""
    return {"total": n}


@tool
def t_host() -> Json:
    """Use the host."""
    host.log("info", "hello")
    host.progress("half", done=1, total=2)
    return Json({"key": host.config("key"), "missing": host.config("missing", "d")})


class Schemas(unittest.TestCase):
    def test_description_and_params_from_docstring(self):
        info = toolhost_sdk._REGISTRY["t_word_count"].info()
        self.assertEqual(info.description, "Count words in text.\n\nThe count is naive.")
        s = json.loads(info.input_schema)
        self.assertEqual(s["type"], "object")
        self.assertFalse(s["additionalProperties"])
        self.assertEqual(s["required"], ["text"])
        self.assertEqual(s["properties"]["text"], {"description": "The text to analyse.", "type": "string"})
        self.assertEqual(
            s["properties"]["top"],
            {
                "description": "How many of the most frequent words to return.",
                "type": "integer",
                "default": 10,
            },
        )
        self.assertIsNone(info.output_schema)

    def test_kinds(self):
        s = schema_of("t-kinds")
        p = s["properties"]
        self.assertEqual(s["required"], ["s", "i", "f", "b", "tags"])
        self.assertEqual(p["f"], {"type": "number"})
        self.assertEqual(p["b"], {"type": "boolean"})
        self.assertEqual(p["tags"], {"type": "array", "items": {"type": "string"}})
        self.assertEqual(p["opt"], {"type": ["integer", "null"], "default": None})
        self.assertEqual(p["new_opt"], {"type": ["string", "null"], "default": "x"})
        self.assertEqual(p["lit"], {"type": "string", "enum": ["a", "b"], "default": "a"})
        self.assertEqual(p["color"], {"type": "string", "enum": ["red", "blue"], "default": "red"})
        self.assertEqual(p["point"]["type"], ["object", "null"])
        self.assertEqual(p["point"]["required"], ["x", "y"])
        self.assertEqual(p["point"]["description"], "A point in the plane.")
        self.assertEqual(p["mapping"], {"type": "object", "additionalProperties": {"type": "number"}, "default": {}})
        self.assertEqual(p["anything"], {"default": None})
        self.assertEqual(p["either"], {"anyOf": [{"type": "integer"}, {"type": "string"}], "default": 0})
        self.assertEqual(
            p["described"],
            {"type": "integer", "description": "Annotated description.", "minimum": 1, "default": 1},
        )
        self.assertEqual(p["implicit_none"], {"type": ["integer", "null"], "default": None})
        self.assertEqual(p["seq"], {"type": "array", "items": {"type": "integer"}, "default": []})

    def test_typed_output_schema(self):
        out = json.loads(toolhost_sdk._REGISTRY["t_typed_out"].output_schema)
        self.assertEqual(out["properties"], {"total": {"type": "integer"}})

    def test_rejects_bad_tools(self):
        with self.assertRaises(TypeError):

            @tool
            def no_hint(x) -> str:
                """Doc."""

        with self.assertRaises(TypeError):

            @tool
            def varargs(*x: int) -> str:
                """Doc."""

        with self.assertRaises(ValueError):

            @tool
            def undocumented(x: int) -> str:
                pass

        with self.assertRaises(ValueError):

            @tool(name="bad name")
            def named(x: int) -> str:
                """Doc."""

        with self.assertRaises(TypeError):

            @tool
            def weird(x: complex) -> str:
                """Doc."""

        with self.assertRaises(ValueError):

            @tool(name="t_fail")
            def duplicate(kind: str) -> str:
                """Doc."""


class Docstrings(unittest.TestCase):
    def test_sections(self):
        desc, params = _docstring.parse(
            """Summary line
            continues here.

            - a list item
            - another

            Arguments:
                a: First.
                *args: Ignored.
                b (str, optional): Second,
                    wrapped.

            Raises:
                ValueError: never.

            Trailing paragraph.
            """
        )
        self.assertEqual(desc, "Summary line continues here.\n\n- a list item\n- another\n\nTrailing paragraph.")
        self.assertEqual(params, {"a": "First.", "args": "Ignored.", "b": "Second, wrapped."})

    def test_empty(self):
        self.assertEqual(_docstring.parse(""), ("", {}))


class Calls(unittest.TestCase):
    def test_ok_and_conversion(self):
        kind, items = call(
            "t-kinds",
            s="x",
            i=3.0,
            f=2,
            b=True,
            tags=["a"],
            color="blue",
            point={"x": 1, "y": 2},
            seq=[1, 2],
            either="z",
        )
        self.assertEqual(kind, "ok")
        out = json.loads(items[0].value)
        self.assertEqual(out["i"], 3)
        self.assertEqual(out["f"], 2.0)
        self.assertEqual(out["color"], "blue")
        self.assertEqual(out["point"], {"x": 1.0, "y": 2.0})
        self.assertEqual(out["seq"], [1, 2])
        self.assertEqual(out["either"], "z")
        self.assertEqual(out["types"], ["int", "float", "Color", "tuple"])

    def test_invalid_arguments(self):
        base = dict(s="x", i=1, f=1, b=False, tags=[])
        cases = [
            ({**base, "i": "1"}, "`i` must be an integer, not string"),
            ({**base, "i": True}, "`i` must be an integer, not boolean"),
            ({**base, "tags": ["a", 1]}, "`tags[1]` must be a string, not integer"),
            ({**base, "lit": "c"}, "`lit` must be one of ['a', 'b'], not 'c'"),
            ({**base, "color": "green"}, "`color` must be one of ['red', 'blue'], not 'green'"),
            ({**base, "point": {"x": 1}}, "`point` is missing `y`"),
            ({**base, "nope": 1}, "unknown parameter `nope`"),
            ({"s": "x"}, "missing required parameter `i`, `f`, `b`, `tags`"),
        ]
        for params, message in cases:
            kind, msg = call("t-kinds", **params)
            self.assertEqual(kind, "invalid_input", params)
            self.assertIn(message, msg)

    def test_not_json_and_unknown_tool(self):
        with self.assertRaises(Err) as e:
            Toolkit().call("t_fail", "[1]")
        self.assertIn("must be a JSON object", e.exception.value.value)
        self.assertEqual(call("nope"), ("invalid_input", "this plugin has no tool named `nope`"))

    def test_errors(self):
        self.assertEqual(call("t_fail", kind="invalid"), ("invalid_input", "bad input"))
        self.assertEqual(call("t_fail", kind="failed"), ("failed", "it broke"))
        kind, msg = call("t_fail", kind="other")
        self.assertEqual(kind, "failed")
        self.assertTrue(msg.startswith("ZeroDivisionError: division by zero\n\nTraceback"), msg)
        self.assertIn("in t_fail", msg)
        self.assertNotIn("toolhost_sdk", msg)
        with self.assertRaises(MemoryError):
            Toolkit().call("t_fail", '{"kind": "memory"}')

    def test_outputs(self):
        def out(kind):
            k, items = call("t_outputs", kind=kind)
            return k, [(type(i).__name__.split("_")[-1], i.value) for i in items]

        self.assertEqual(out("text"), ("ok", [("Text", "hello")]))
        self.assertEqual(out("text_obj"), ("ok", [("Text", "t")]))
        self.assertEqual(out("dict"), ("ok", [("Json", '{"a":1}')]))
        self.assertEqual(out("list"), ("ok", [("Json", "[1,2]")]))
        self.assertEqual(out("none"), ("ok", []))
        k, items = out("bytes")
        self.assertEqual(items[0][0], "Binary")
        self.assertEqual(items[0][1].media_type, "application/octet-stream")
        k, items = out("mixed")
        self.assertEqual([i[0] for i in items], ["Text", "Binary", "Json", "Json"])
        self.assertEqual(items[1][1].name, "a.png")
        self.assertEqual(items[3][1], '{"k":"v"}')
        self.assertEqual(out("set"), ("ok", [("Json", '{"s":[1,2,3],"c":"blue"}')]))
        kind, msg = call("t_outputs", kind="nan")
        self.assertEqual(kind, "failed")
        self.assertIn("not valid JSON", msg)
        kind, msg = call("t_outputs", kind="object")
        self.assertEqual(kind, "failed")

    def test_host_fallbacks(self):
        host.LOCAL_CONFIG["key"] = "v"
        try:
            kind, items = call("t_host")
        finally:
            host.LOCAL_CONFIG.clear()
        self.assertEqual(json.loads(items[0].value), {"key": "v", "missing": "d"})
        with self.assertRaises(ValueError):
            host.log("loud", "x")

    def test_functions_stay_callable(self):
        self.assertEqual(t_word_count("a b c"), Json({"words": 3, "top": 10}))


class SchemaHelpers(unittest.TestCase):
    def test_nullable_enum_and_any(self):
        self.assertEqual(
            _schema.schema_for(Optional[Literal[1, 2]], "x"), {"type": ["integer", "null"], "enum": [1, 2, None]}
        )
        self.assertEqual(_schema.schema_for(Optional[Any], "x"), {})
        self.assertEqual(
            _schema.schema_for(Optional[List[int]], "x"), {"type": ["array", "null"], "items": {"type": "integer"}}
        )
        self.assertEqual(
            _schema.schema_for(Optional[Union[int, str]], "x"),
            {"anyOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"type": "null"}]},
        )


if __name__ == "__main__":
    unittest.main()
