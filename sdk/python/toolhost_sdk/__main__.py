"""Try a plugin's tools with plain CPython, without building a component.

    PYTHONPATH=sdk/python python3 -m toolhost_sdk plugins/textstats             # tools and schemas
    PYTHONPATH=sdk/python python3 -m toolhost_sdk plugins/textstats summary '{"text": "Hi."}'
    ... --module app --config key=value

Output mirrors `toolhost inspect` / `toolhost call` in shape. The local Python
is not the one inside the component (componentize-py bundles its own CPython)
and may import modules lazily where the component cannot: build and run the
real component before trusting a plugin.
"""

import argparse
import base64
import importlib
import json
import os
import sys

from . import Toolkit, host, tools
from ._wit import Err


def _content(item) -> dict:
    kind = type(item).__name__.split("_")[-1]
    if kind == "Text":
        return {"type": "text", "text": item.value}
    if kind == "Json":
        return {"type": "json", "json": json.loads(item.value)}
    b = item.value
    return {
        "type": "binary",
        "media_type": b.media_type,
        "name": b.name,
        "data": base64.b64encode(b.data).decode(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m toolhost_sdk", description=__doc__.split("\n\n")[0])
    ap.add_argument("plugin", help="the plugin directory (holding app.py)")
    ap.add_argument("tool", nargs="?", help="a tool to call; without it, list the tools")
    ap.add_argument("input", nargs="?", default="{}", help="the input, a JSON object (default {})")
    ap.add_argument("--module", default="app", help="the plugin's module (default: app)")
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a [config] value")
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.abspath(a.plugin))
    for kv in a.config:
        key, _, value = kv.partition("=")
        host.LOCAL_CONFIG[key] = value
    module = importlib.import_module(a.module)
    if getattr(module, "Toolkit", None) is not Toolkit:
        print(f"warning: `{a.module}` does not import toolhost_sdk.Toolkit; componentize-py will not find the export", file=sys.stderr)
    if a.tool is None:
        out = [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": json.loads(t.input_schema),
                "output_schema": json.loads(t.output_schema) if t.output_schema else None,
            }
            for t in tools()
        ]
        print(json.dumps({"tools": out}, indent=2, ensure_ascii=False))
        return 0
    try:
        items = Toolkit().call(a.tool, a.input)
    except Err as e:
        kind = "invalid_input" if type(e.value).__name__.endswith("InvalidInput") else "tool_error"
        print(json.dumps({"status": "error", "error": {"kind": kind, "message": e.value.value}}, indent=2, ensure_ascii=False))
        return 1
    print(json.dumps({"status": "success", "content": [_content(i) for i in items]}, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
