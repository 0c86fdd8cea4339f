"""A coding agent's session on toolhost's builder tools, with the official
MCP Python SDK (the venv of tests/mcp/requirements.txt), unmodified:

    python coding_agent.py --url http://127.0.0.1:PORT/admin/mcp --token TOKEN

It creates a build environment, writes a Python tool there, checks it with
a command in the environment, registers it (a build_tool task with an
example), follows the task to its end, reads a file back, tries to leave
/work, and destroys the environment. Prints one JSON object with what it
saw; exits 1 on the first surprise. Run by tests/e2e/tests/builder.rs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

SOURCE = '''from toolhost_sdk import Toolkit, tool  # noqa: F401


@tool
def shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: The text.
    """
    return text.upper() + "!"
'''


def data(result) -> dict:
    if result.is_error:
        raise SystemExit(f"FAILED: a builder tool answered an error: {result.content}")
    return result.structured_content


async def task_end(c, task_id: str) -> dict:
    """Follow task `task_id` (task_status) to its end: what is seen of it."""
    deadline = time.monotonic() + 240
    while True:
        status = data(await c.call_tool("task_status", {"task_id": task_id}))
        if status["status"] in ("completed", "failed", "cancelled"):
            return {"status": status["status"], "result": status["result"], "error": status["error"]}
        if time.monotonic() > deadline:
            raise SystemExit(f"FAILED: task {task_id} did not end: {status}")
        await anyio.sleep(0.5)


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--name", default="shouter")
    args = p.parse_args()
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {args.token}"}, timeout=60)
    seen: dict = {}
    async with Client(streamable_http_client(args.url, http_client=http), mode="legacy") as c:
        seen["tools"] = sorted(t.name for t in (await c.list_tools()).tools)
        env = data(await c.call_tool("create_env", {"memory_mb": 512, "cpus": 0.5}))["env_id"]
        data(await c.call_tool("write_file", {"env_id": env, "path": "app.py", "content": SOURCE}))
        ran = data(await c.call_tool("run", {
            "env_id": env,
            "command": "python3 -c \"import ast; ast.parse(open('app.py').read()); print('parsed')\"; ls; id -u",
        }))
        seen["run"] = ran
        net = data(await c.call_tool("run", {"env_id": env, "command": "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2)\""}))
        seen["network_exit"] = net["exit_code"]
        slow = data(await c.call_tool("run", {"env_id": env, "command": "sleep 30", "timeout_s": 1}))
        seen["slow"] = slow
        escape = await c.call_tool("read_file", {"env_id": env, "path": "../../registry.db"})
        seen["escape_is_error"] = escape.is_error
        reg = data(await c.call_tool("register_tool", {
            "env_id": env, "name": args.name, "description": "Shouts.", "language": "python",
            "source_path": "app.py",
            "examples": [{"tool": "shout", "input": {"text": "hi"}, "output": "HI!"}],
        }))
        seen["registered"] = reg
        seen["task"] = await task_end(c, reg["task_id"])
        back = data(await c.call_tool("read_file", {"env_id": env, "path": "app.py"}))
        seen["read_back"] = back["content"] == SOURCE
        # A uv project (seed 004 §7): made, a PyPI dependency added (fetched by
        # the host: the environment has no network), used by uv run.
        project = data(await c.call_tool("create_uv_project", {"env_id": env, "name": "demo"}))
        seen["uv_project"] = project
        added = data(await c.call_tool("uv_add_dependency", {"env_id": env, "project_dir": project["project_dir"], "package": "six==1.16.0"}))
        seen["uv_add"] = added
        used = data(await c.call_tool("run_in_uv", {
            "env_id": env, "project_dir": project["project_dir"],
            "command": "python -c 'import six, sys; print(six.__version__, sys.prefix)'",
        }))
        seen["uv_run"] = used
        missing = data(await c.call_tool("uv_add_dependency", {"env_id": env, "project_dir": "demo", "package": "no-such-package-toolhost-test"}))
        seen["uv_missing"] = missing
        hostile = await c.call_tool("uv_add_dependency", {"env_id": env, "project_dir": "demo", "package": "six; touch /tmp/owned"})
        seen["uv_hostile_is_error"] = hostile.is_error
        # Made anew with other caps: a new id, the same files, no port published.
        rebuilt = data(await c.call_tool("rebuild_docker_ports", {"env_id": env, "ports": [8080], "mem_limit_mb": 384}))
        seen["rebuilt"] = rebuilt
        old = env
        env = rebuilt["env_id"]
        kept = data(await c.call_tool("read_file", {"env_id": env, "path": "app.py"}))
        seen["rebuilt_kept_files"] = kept["content"] == SOURCE
        seen["old_env_gone"] = (await c.call_tool("run", {"env_id": old, "command": "true"})).is_error
        data(await c.call_tool("destroy_env", {"env_id": env}))
        gone = await c.call_tool("run", {"env_id": env, "command": "true"})
        seen["gone_is_error"] = gone.is_error
    print(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
