"""Qwen-Agent's own MCP manager against a running toolhost, unmodified.

    python qwen_mcp.py --url http://127.0.0.1:PORT/mcp

Qwen-Agent mounts an MCP server's tools as its own `BaseTool`s. It refuses a
server whole when one tool's input schema lacks `type`, `properties` or
`required`'s object shape ("Missing required fields in schema"), so a single
tool without arguments (`{"type": "object"}`) used to cost every tool. The
server runs the calc and hostile components (hostile has tools without
arguments). Prints `ok <step>` per step; the first failure prints
`FAILED <step>: <why>` and exits 1. Run by tests/e2e/tests/clients.rs; needs
the venv of `tests/venv.sh tests/qwen/requirements.txt`.
"""

from __future__ import annotations

import argparse
import json
import sys

from qwen_agent.tools.mcp_manager import MCPManager


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    args = p.parse_args()
    # As Qwen-Agent's README configures a streamable-HTTP server.
    config = {"mcpServers": {"toolhost": {"type": "streamable-http", "url": args.url}}}
    step = "init"
    try:
        tools = MCPManager().initConfig(config)
        by_name = {t.name: t for t in tools}
        for name in ["toolhost-calc_evaluate", "toolhost-hostile_env_dump"]:
            if name not in by_name:
                raise AssertionError(f"{name} not among {sorted(by_name)}")
        print(f"ok init ({len(tools)} tools)", flush=True)

        step = "schemas"
        for t in tools:
            params = t.parameters
            if params.get("type") != "object" or not isinstance(params.get("properties"), dict):
                raise AssertionError(f"{t.name}: {params}")
        print("ok schemas", flush=True)

        step = "call"
        # Qwen passes the model's arguments as a JSON string.
        out = by_name["toolhost-calc_evaluate"].call(json.dumps({"expression": "2*(3+4)^2"}))
        if "98" not in str(out):
            raise AssertionError(f"calc_evaluate answered {out!r}")
        print("ok call", flush=True)

        step = "no_arguments"
        out = by_name["toolhost-hostile_env_dump"].call("{}")
        if not isinstance(out, str):
            raise AssertionError(f"env_dump answered {out!r}")
        print("ok no_arguments", flush=True)
    except Exception as e:  # noqa: BLE001 - report the first failure
        print(f"FAILED {step}: {type(e).__name__}: {e}", flush=True)
        return 1
    finally:
        MCPManager().shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
