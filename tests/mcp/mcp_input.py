"""Input requests over MCP with the official MCP Python SDK, unmodified.

    python mcp_input.py --url http://127.0.0.1:PORT/mcp

The server serves the `files` plugin, whose `files_delete` asks to confirm.
Runs as `Client(url)` connects by default (mode "auto": 2026-07-28, where the
question comes back as an InputRequiredResult the SDK answers and calls again
with) and with the initialize handshake (mode "legacy", 2025-11-25: an
`elicitation/create` request on the session's stream). In each: a client that
declines keeps the file, one that confirms deletes it, one without an
elicitation callback gets "no input available" (2025-11-25) or -32021 naming
the elicitation capability (2026-07-28), and the file stays. Prints
`ok <scenario> (<mode> <version>)` per scenario, `FAILED ...` and exit 1 on
the first failure. Run by tests/e2e/tests/input.rs.
"""

from __future__ import annotations

import argparse
import sys
import uuid

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

# The failure and text helpers of the client test beside this one.
from mcp_client import check, text_of


def client(url: str, mode: str, session: str, **kw) -> Client:
    http = httpx2.AsyncClient(headers={"X-Toolhost-Session": session}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), mode=mode, **kw)


async def run(url: str, mode: str) -> None:
    session = f"mcp-input-{mode}-{uuid.uuid4().hex[:8]}"
    asked: list[types.ElicitRequestParams] = []
    answer: dict = {}

    async def on_elicit(_context, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(**answer)

    async def exists(c: Client, path: str) -> bool:
        r = await c.call_tool("files_read", {"path": path})
        if r.is_error:
            check("does not exist" in text_of(r), f"files_read {path}: {text_of(r)}")
            return False
        return True

    async with client(url, mode, session, elicitation_callback=on_elicit) as c:
        version = c.protocol_version
        r = await c.call_tool("files_write", {"path": "doomed.txt", "content": "bye"})
        check(not r.is_error, f"files_write: {text_of(r)}")

        answer.update(action="decline")
        r = await c.call_tool("files_delete", {"path": "doomed.txt"})
        check(not r.is_error and "kept" in text_of(r), f"declined: {r}")
        check(len(asked) == 1, f"asked {len(asked)} times")
        check("doomed.txt" in asked[0].message, f"the question: {asked[0]}")
        check(
            asked[0].requested_schema["properties"]["confirm"]["type"] == "boolean",
            f"the schema: {asked[0].requested_schema}",
        )
        check(await exists(c, "doomed.txt"), "declined, yet deleted")
        print(f"ok declined ({mode} {version})", flush=True)

        answer.clear()
        answer.update(action="accept", content={"confirm": True})
        r = await c.call_tool("files_delete", {"path": "doomed.txt"})
        check(not r.is_error and text_of(r) == "deleted doomed.txt", f"confirmed: {r}")
        check(len(asked) == 2, f"asked {len(asked)} times")
        check(not await exists(c, "doomed.txt"), "confirmed, yet still there")
        print(f"ok confirmed ({mode} {version})", flush=True)

        r = await c.call_tool("files_write", {"path": "kept.txt", "content": "stay"})
        check(not r.is_error, f"files_write: {text_of(r)}")

    # A client that cannot answer (no elicitation capability).
    # 2025-11-25: the tool's own error ("no input available"); 2026-07-28:
    # -32021 naming the missing capability (the call failed for want of it).
    async with client(url, mode, session) as c:
        try:
            r = await c.call_tool("files_delete", {"path": "kept.txt"})
        except MCPError as e:
            check(c.protocol_version >= "2026-07-28", f"-32021 before 2026-07-28: {e!r}")
            check(e.code == -32021, f"the error: {e!r}")
            check("elicitation" in (e.data or {}).get("requiredCapabilities", {}), f"{e.data}")
        else:
            check(c.protocol_version < "2026-07-28", f"no -32021 in 2026-07-28: {r}")
            check(r.is_error, f"nobody could confirm, yet: {r}")
            check("no input available" in text_of(r) and "not deleted" in text_of(r), text_of(r))
        check(await exists(c, "kept.txt"), "deleted without a confirmation")
        print(f"ok unanswerable ({mode} {c.protocol_version})", flush=True)


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    args = p.parse_args()
    for mode in ["auto", "legacy"]:
        try:
            await run(args.url, mode)
        except Exception as e:  # report and stop: the first failure says most
            print(f"FAILED ({mode}): {e!r}", flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
