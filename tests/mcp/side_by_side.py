"""What the official MCP Python SDK sees of one MCP server, called directly
and through toolhost, side by side.

    python side_by_side.py --direct URL | --direct-stdio 'CMD ARGS...' \
        --through http://127.0.0.1:PORT/mcp --prefix every_ \
        [--session ID] [--replace FROM=TO ...] [--mask REGEX ...] \
        [--skip-tool NAME ...] --calls CALLS.json [--check]
    python side_by_side.py --compare-report REPORT.json [--mask ...] [--skip-tool ...]

CALLS.json is a list of {"tool": NAME, "arguments": {...}} (the server's own
tool names), each with `"compare": "isError"` where only that is compared
(a call toolhost refuses before the server sees it, for bad arguments, in its
own words). Both sides are connected as an agent connects (`Client(...)`,
mode "auto"); toolhost's names are the server's with `--prefix`. Each tool
list and each result is dumped as the client parsed it (JSON, aliases, no
unset fields); toolhost's own `_meta` keys (`toolhost/...`) are left out, and
`--replace FROM=TO` rewrites the direct side: TO in its calls' arguments
becomes FROM, FROM in what it answers becomes TO (a folder on this machine
that is `/workspace` in toolhost's node). A call the client refuses (say, structured
content missing while the tool declares an output schema) is recorded as
`{"client_error": ...}`: that is what the agent would see.

Prints one JSON report: {"tools": {"direct": [...], "through": [...]},
"calls": [{"tool", "arguments", "direct", "through"}]}. With `--check` it
prints only the differences and exits 1 when there is one; `--compare-report`
does the same for a report another client made (`side_by_side.mjs`, the
official TypeScript SDK). Allowed differences:
- `"properties": {}` in an object schema (toolhost adds it: Qwen-Agent's MCP
  client refuses object schemas without it; a validator accepts the same);
- a tool's `execution` `{"taskSupport": "forbidden"}` against none (the spec
  reads a missing one as forbidden);
- `{"taskSupport": "required"}` directly against none through toolhost
  (toolhost asks the server for the task and waits for its result itself,
  so its callers call the tool plainly);
- `"isError": false` against none (the spec's default; servers differ in
  which they send, and a client that shows the wire sees either);
- the result's `_meta` `io.modelcontextprotocol/serverInfo` (through
  toolhost, toolhost is the server the client talks to);
- text matching a `--mask` (a time of day the server prints, say);
- tools named by `--skip-tool` (left out of the tool lists' comparison).
Run by tests/e2e/tests/gateway.rs; needs the venv of
`tests/venv.sh tests/mcp/requirements.txt`.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def strip_ours(value: Any) -> Any:
    """`value` without toolhost's own `_meta` keys (and `_meta` when nothing
    else is left in it)."""
    if isinstance(value, dict):
        out = {}
        for key, v in value.items():
            if key == "_meta" and isinstance(v, dict):
                v = {k: x for k, x in v.items() if not k.startswith("toolhost/")}
                if not v:
                    continue
            out[key] = strip_ours(v)
        return out
    if isinstance(value, list):
        return [strip_ours(v) for v in value]
    return value


def rewrite(value: Any, replace: list[tuple[str, str]]) -> Any:
    if not replace:
        return value
    text = json.dumps(value)
    for old, new in replace:
        text = text.replace(old, new)
    return json.loads(text)


def without_empty_properties(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            k: without_empty_properties(v)
            for k, v in schema.items()
            if not (k == "properties" and v == {})
        }
    if isinstance(schema, list):
        return [without_empty_properties(v) for v in schema]
    return schema


def comparable_tool(tool: dict) -> dict:
    tool = dict(tool)
    for key in ("inputSchema", "outputSchema"):
        if key in tool:
            tool[key] = without_empty_properties(tool[key])
    if tool.get("execution") == {"taskSupport": "forbidden"}:
        del tool["execution"]
    return tool


def comparable_result(result: dict, masks: list[str]) -> Any:
    result = dict(result)
    if result.get("isError") is False:
        del result["isError"]
    meta = dict(result.get("_meta") or {})
    meta.pop("io.modelcontextprotocol/serverInfo", None)
    if meta:
        result["_meta"] = meta
    else:
        result.pop("_meta", None)
    text = json.dumps(result, sort_keys=True)
    for mask in masks:
        text = re.sub(mask, "<masked>", text)
    return json.loads(text)


def differences(report: dict, masks: list[str], skip: list[str]) -> list[str]:
    found = []
    direct = {t["name"]: comparable_tool(t) for t in report["tools"]["direct"]}
    through = {t["name"]: comparable_tool(t) for t in report["tools"]["through"]}
    for name in sorted(set(direct) | set(through)):
        if name in skip:
            continue
        d, t = direct.get(name), through.get(name)
        if d and t and d.get("execution") == {"taskSupport": "required"} and "execution" not in t:
            # toolhost runs the server's task itself: its callers call the
            # tool plainly (tests/e2e/tests/gateway.rs calls it).
            d = {k: v for k, v in d.items() if k != "execution"}
        if d != t:
            found.append(f"tool {name}:\n  direct:  {json.dumps(d, sort_keys=True)}\n  through: {json.dumps(t, sort_keys=True)}")
    for call in report["calls"]:
        d = comparable_result(call["direct"], masks)
        t = comparable_result(call["through"], masks)
        if call.get("compare") == "isError":
            d, t = d.get("isError"), t.get("isError")
        if d != t:
            found.append(
                f"call {call['tool']} {json.dumps(call.get('arguments', {}))}:\n"
                f"  direct:  {json.dumps(d, sort_keys=True)}\n  through: {json.dumps(t, sort_keys=True)}"
            )
    return found


def answer_form(schema: dict) -> dict:
    """A filled form for `schema` (MCP's flat elicitation schemas): the
    same answer on both sides."""
    out = {}
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        if "enum" in prop:
            out[name] = prop["enum"][0]
        elif kind == "boolean":
            out[name] = True
        elif kind in ("number", "integer"):
            out[name] = prop.get("minimum", 3)
        elif kind == "array":
            items = (prop.get("items") or {}).get("enum") or ["a"]
            out[name] = items[:1]
        else:
            out[name] = prop.get("default", "answer") if prop.get("format") is None else "someone@example.org"
    return out


async def on_elicit(_context, params: types.ElicitRequestParams) -> types.ElicitResult:
    schema = params.model_dump(by_alias=True).get("requestedSchema") or {}
    return types.ElicitResult(action="accept", content=answer_form(schema))


async def on_sample(_context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    asked = " ".join(
        m.content.text for m in params.messages if isinstance(m.content, types.TextContent)
    )
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"sampled: {asked}"),
        model="side-by-side",
        stop_reason="endTurn",
    )


# The client answers the server's questions (elicitation, sampling) the
# same way on both sides: through toolhost they reach it as the caller.
CALLBACKS = {
    "elicitation_callback": on_elicit,
    "sampling_callback": on_sample,
}


def dump(model: Any) -> Any:
    return strip_ours(model.model_dump(mode="json", by_alias=True, exclude_none=True))


async def observe(client: Client, calls: list[dict], name_of) -> dict:
    """The tool list and each call's result, as this client sees them."""
    listed = await client.list_tools()
    tools = sorted((dump(t) for t in listed.tools), key=lambda t: t["name"])
    results = []
    for call in calls:
        try:
            result = await client.call_tool(name_of(call["tool"]), call.get("arguments", {}))
            results.append(dump(result))
        except Exception as e:  # what the agent would get instead of a result
            results.append({"client_error": f"{type(e).__name__}: {e}"})
    return {"tools": tools, "results": results}


async def main() -> int:
    p = argparse.ArgumentParser()
    side = p.add_mutually_exclusive_group(required=True)
    side.add_argument("--compare-report", help="check a report another client made")
    side.add_argument("--direct")
    side.add_argument("--direct-stdio")
    p.add_argument("--through")
    p.add_argument("--prefix")
    p.add_argument("--session")
    p.add_argument("--replace", action="append", default=[])
    p.add_argument("--mask", action="append", default=[])
    p.add_argument("--skip-tool", action="append", default=[])
    p.add_argument("--calls")
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    if args.compare_report:
        report = json.loads(open(args.compare_report).read())
        return check(report, args.mask, args.skip_tool)
    calls = json.loads(open(args.calls).read())
    replace = [tuple(r.split("=", 1)) for r in args.replace]

    if args.direct:
        direct_server: Any = args.direct
    else:
        cmd = shlex.split(args.direct_stdio)
        direct_server = StdioServerParameters(command=cmd[0], args=cmd[1:])
    # The direct side's calls name its own paths.
    direct_calls = [{**c, "arguments": rewrite(c.get("arguments", {}), [(n, o) for o, n in replace])} for c in calls]
    async with Client(direct_server, **CALLBACKS) as client:
        direct = await observe(client, direct_calls, lambda n: n)
    direct = rewrite(direct, replace)

    headers = {"X-Toolhost-Session": args.session} if args.session else {}
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    async with Client(streamable_http_client(args.through, http_client=http), **CALLBACKS) as client:
        through = await observe(client, calls, lambda n: args.prefix + n)
    # Only this server's tools, under the server's own names.
    through["tools"] = [
        {**t, "name": t["name"][len(args.prefix) :]}
        for t in through["tools"]
        if t["name"].startswith(args.prefix)
    ]

    report = {
        "tools": {"direct": direct["tools"], "through": through["tools"]},
        "calls": [
            {**call, "direct": d, "through": t}
            for call, d, t in zip(calls, direct["results"], through["results"])
        ],
    }
    if args.check:
        return check(report, args.mask, args.skip_tool)
    json.dump(report, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


def check(report: dict, masks: list[str], skip: list[str]) -> int:
    """Print every difference of `report` and a count; 1 when there is one."""
    found = differences(report, masks, skip)
    for d in found:
        print("DIFFERENT", d)
    print(
        f"{len(report['calls'])} calls and {len(report['tools']['direct'])} tools compared, "
        f"{len(found)} different"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
