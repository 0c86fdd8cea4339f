"""The official MCP Python SDK against a running toolhost, unmodified.

    python mcp_client.py --url http://127.0.0.1:PORT/mcp \
        --plugins-dir DIR --extra-plugin calc.wasm

The server serves the calc, files and hostile components from DIR. Every
scenario runs twice: once as `Client(url)` connects by default (mode "auto":
`server/discover`, 2026-07-28 when the server offers it) and once with the
initialize handshake (mode "legacy", 2025-11-25). Each passing scenario prints
`ok <scenario> (<mode> <version>, <ms> ms)`; the first failure prints
`FAILED <scenario> (<mode>): <why>` and exits 1. Run by
tests/e2e/tests/mcp/; needs the venv of `tests/venv.sh tests/mcp/requirements.txt`.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
import traceback
import urllib.request
import uuid
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

SCENARIOS = [
    "list",
    "call",
    "tool_error",
    "bad_arguments",
    "unknown_tool",
    "limit",
    "progress",
    "cancel",
    "session",
    "list_changed",
]


class Failed(Exception):
    pass


def check(condition: bool, why: str) -> None:
    if not condition:
        raise Failed(why)


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def error_kind(result: types.CallToolResult) -> str | None:
    return (result.meta or {}).get("toolhost/error_kind")


class Run:
    def __init__(self, args: argparse.Namespace, mode: str) -> None:
        self.url: str = args.url
        self.base = self.url.rsplit("/mcp", 1)[0]
        self.plugins_dir = Path(args.plugins_dir)
        self.extra_plugin = Path(args.extra_plugin)
        self.mode = mode

    def client(self, session: str | None = None, **kw) -> Client:
        """A client as an agent makes one; `session` pins a toolhost session
        with the native API's header (passed through the SDK's http client)."""
        if session is None:
            return Client(self.url, mode=self.mode, **kw)
        http = httpx2.AsyncClient(headers={"X-Toolhost-Session": session}, timeout=30)
        return Client(streamable_http_client(self.url, http_client=http), mode=self.mode, **kw)

    def native(self, path: str) -> dict:
        with urllib.request.urlopen(self.base + path, timeout=10) as r:
            return json.load(r)

    # -- scenarios ---------------------------------------------------------

    async def list(self, c: Client) -> None:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for name in ["calc_evaluate", "files_read", "hostile_spin"]:
            check(name in tools, f"{name} missing from tools/list: {sorted(tools)}")
        calc = tools["calc_evaluate"]
        check(bool(calc.description), "calc_evaluate has no description")
        check(calc.input_schema.get("type") == "object", f"input schema: {calc.input_schema}")
        check("expression" in calc.input_schema.get("properties", {}), f"input schema: {calc.input_schema}")

    async def call(self, c: Client) -> None:
        r = await c.call_tool("calc_evaluate", {"expression": "2^10"})
        check(not r.is_error, f"isError on a good call: {r}")
        check(r.structured_content == {"value": 1024.0} or (r.structured_content or {}).get("value") == 1024.0,
              f"structured content: {r.structured_content}")
        check(json.loads(text_of(r))["value"] == 1024.0, f"text content: {text_of(r)}")
        check("toolhost/version" in (r.meta or {}), f"_meta: {r.meta}")

    async def tool_error(self, c: Client) -> None:
        r = await c.call_tool("hostile_fail", {"invalid": False})
        check(r.is_error, f"a failing tool is an isError result: {r}")
        check(error_kind(r) == "tool_error", f"kind: {r.meta}")
        check(text_of(r).startswith("[tool_error]") and "on purpose" in text_of(r), text_of(r))

    async def bad_arguments(self, c: Client) -> None:
        r = await c.call_tool("calc_evaluate", {"expr": "1"})
        check(r.is_error, f"arguments against the schema are an isError result: {r}")
        check(error_kind(r) == "invalid_input", f"kind: {r.meta} {text_of(r)}")

    async def unknown_tool(self, c: Client) -> None:
        try:
            r = await c.call_tool("no_such_tool", {})
        except MCPError as e:
            check(e.code == types.INVALID_PARAMS, f"code {e.code}: {e}")
            check("no_such_tool" in str(e), str(e))
        else:
            raise Failed(f"an unknown tool is a protocol error, got a result: {r}")
        r = await c.call_tool("calc_evaluate", {"expression": "1+1"})
        check(not r.is_error, "the session still works after a protocol error")

    async def limit(self, c: Client) -> None:
        for tool, kind in [("hostile_spin", "timeout"), ("hostile_hog", "out_of_memory")]:
            r = await c.call_tool(tool, {})
            check(r.is_error, f"{tool}: a limit breach is an isError result: {r}")
            check(error_kind(r) == kind, f"{tool}: kind {r.meta} {text_of(r)}")
            check(text_of(r).startswith(f"[{kind}]"), text_of(r))

    async def progress(self, c: Client) -> None:
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        r = await c.call_tool("hostile_host_calls", {"key": "greeting"}, progress_callback=on_progress)
        check(not r.is_error, f"{r}")
        check(text_of(r) == "hello from the manifest", text_of(r))
        # The server sends progress before the result on the same stream, so
        # the callback has run by the time the result is returned.
        check(seen == [(1.0, 2.0, "half")], f"progress notifications: {seen}")

    async def cancel(self, c: Client) -> None:
        before = self.native("/tools/hostile_spin")["stats"]["call_count"]
        check(before >= 1, "the limit scenario's spin is counted (so a finished spin would be too)")
        started = time.monotonic()
        with anyio.move_on_after(0.3):
            await c.call_tool("hostile_spin", {})
            raise Failed("the spin returned before it was cancelled")
        # The SDK sends notifications/cancelled when the caller gives up; the
        # server drops the wasm call: it never completes and is never counted
        # (it would end at its 2 s time limit with a timeout otherwise).
        await anyio.sleep(2.5)
        after = self.native("/tools/hostile_spin")["stats"]["call_count"]
        check(after == before, f"the cancelled call ran to its end: call_count {before} -> {after}")
        r = await c.call_tool("calc_evaluate", {"expression": "3*3"})
        check(not r.is_error and (r.structured_content or {}).get("value") == 9.0, f"after cancel: {r}")
        check(time.monotonic() - started < 10, "cancel scenario took too long")

    async def session(self, c: Client) -> None:
        note = f"from {self.mode}"
        if c.protocol_version < "2026":
            # One MCP session = one toolhost session (workspace): the same
            # client reads back what it wrote, another client does not see it.
            r = await c.call_tool("files_write", {"path": "note.txt", "content": note})
            check(not r.is_error, f"files_write: {text_of(r)}")
            r = await c.call_tool("files_read", {"path": "note.txt"})
            check(note in text_of(r), f"same session reads its file: {text_of(r)}")
        # Sessionless (2026-07-28) clients keep a workspace by pinning a
        # toolhost session with the header; so can handshake clients.
        pinned = f"py-{self.mode}-{uuid.uuid4().hex[:8]}"
        async with self.client(session=pinned) as p:
            r = await p.call_tool("files_write", {"path": "pinned.txt", "content": note})
            check(not r.is_error, f"pinned files_write: {text_of(r)}")
        async with self.client(session=pinned) as p:
            r = await p.call_tool("files_read", {"path": "pinned.txt"})
            check(note in text_of(r), f"a pinned session outlives its client: {text_of(r)}")
        async with self.client() as other:
            for path in ["note.txt", "pinned.txt"]:
                r = await other.call_tool("files_read", {"path": path})
                check(r.is_error, f"another client must not see {path}: {text_of(r)}")

    async def list_changed(self, c: Client) -> None:
        extra = self.plugins_dir / "extra.wasm"
        modern = c.protocol_version >= "2026"
        changed = anyio.Event()

        async def added() -> bool:
            return any(t.name == "extra_evaluate" for t in (await c.list_tools(cache_mode="refresh")).tools)

        async def hot_load_and_wait(wait) -> None:
            shutil.copy(self.extra_plugin, extra)
            try:
                with anyio.fail_after(15):
                    await wait()
            except TimeoutError:
                raise Failed("no tools/list_changed within 15 s of dropping a component in")
            check(await added(), "extra_evaluate is listed after list_changed")

        try:
            if modern:
                async with c.listen(tools_list_changed=True) as sub:

                    async def next_event() -> None:
                        async for _ in sub:
                            return

                    await hot_load_and_wait(next_event)
            else:
                self.on_message = lambda m: changed.set() if isinstance(m, types.ToolListChangedNotification) else None
                # Give the client's GET stream time to open (it starts after
                # initialize); the notification goes out on it.
                await anyio.sleep(0.5)
                await hot_load_and_wait(changed.wait)
        finally:
            self.on_message = None
            extra.unlink(missing_ok=True)
        with anyio.fail_after(15):
            while await added():
                await anyio.sleep(0.1)

    on_message = None

    async def handle(self, message) -> None:
        if self.on_message is not None:
            self.on_message(message)

    async def run(self) -> bool:
        async with self.client(message_handler=self.handle) as c:
            version = c.protocol_version
            for name in SCENARIOS:
                started = time.monotonic()
                try:
                    await getattr(self, name)(c)
                except Exception as e:  # report and stop: the first failure says most
                    why = e if isinstance(e, Failed) else "".join(traceback.format_exception(e))
                    print(f"FAILED {name} ({self.mode} {version}): {why}", flush=True)
                    return False
                ms = (time.monotonic() - started) * 1000
                print(f"ok {name} ({self.mode} {version}, {ms:.0f} ms)", flush=True)
        return True


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--plugins-dir", required=True)
    p.add_argument("--extra-plugin", required=True)
    p.add_argument("--mode", action="append", choices=["auto", "legacy"])
    args = p.parse_args()
    # The SDK's own complaints about the server (e.g. a session end answered
    # with a status it does not accept: "Session termination failed: 202").
    complaints: list[str] = []

    class Complaints(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            complaints.append(record.getMessage())

    logging.getLogger("mcp").addHandler(Complaints(level=logging.WARNING))
    for mode in args.mode or ["auto", "legacy"]:
        if not await Run(args, mode).run():
            return 1
        if complaints:
            print(f"FAILED sdk_warnings ({mode}): {complaints}", flush=True)
            return 1
        print(f"ok sdk_warnings ({mode}: the SDK logged no warning, session end included)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
