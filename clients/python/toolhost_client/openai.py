"""OpenAI-style function calling with toolhost tools (no dependency on the
`openai` package: tool calls are taken as its objects or as plain dicts).

    fc = OpenAITools(Client(url))
    reply = openai.chat.completions.create(model=..., messages=msgs, tools=fc.tools())
    for call in reply.choices[0].message.tool_calls or []:
        msgs.append(fc.run(call))      # {"role": "tool", "tool_call_id": ..., "content": ...}
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .client import Client
from .errors import ForbiddenError, ToolhostConnectionError, ToolhostError, UnauthorizedError

__all__ = ["OpenAITools"]

# Errors of the deployment, not of the call: raised, never handed to a model.
_RAISED = (ToolhostConnectionError, UnauthorizedError, ForbiddenError)


class OpenAITools:
    """The `tools` array of a server, and the execution of `tool_calls`."""

    def __init__(
        self,
        client: Client,
        tool_ids: Optional[Iterable[str]] = None,
        *,
        session: Optional[str] = None,
    ) -> None:
        self.client = client
        self.session = session
        self.tool_ids = list(tool_ids) if tool_ids is not None else None

    def tools(self) -> List[Dict[str, Any]]:
        """`[{"type":"function","function":{"name","description","parameters"}}]`,
        names being tool ids."""
        tools = self.client.openai_tools()
        if self.tool_ids is None:
            return tools
        by_name = {t["function"]["name"]: t for t in tools}
        return [by_name[i] for i in self.tool_ids if i in by_name]

    def run(self, tool_call: Any) -> Dict[str, Any]:
        """Execute one `tool_call` (an `openai` SDK object or its dict form)
        and return the `role: tool` message answering it. A failed call
        (bad arguments, unknown tool, the tool's own error, a limit) is
        answered as `error: [kind] message` for the model; an unreachable
        server or a refused token is raised."""
        call_id, name, arguments = _parse(tool_call)
        try:
            args = json.loads(arguments) if arguments and arguments.strip() else {}
        except ValueError as e:
            return _message(call_id, f"error: [invalid_input] the arguments are not JSON: {e}")
        if not isinstance(args, dict):
            return _message(call_id, "error: [invalid_input] the arguments must be a JSON object")
        if self.tool_ids is not None and name not in self.tool_ids:
            return _message(call_id, f"error: [not_found] no tool `{name}` here")
        try:
            result = self.client.invoke(name, args, session=self.session)
        except _RAISED:
            raise
        except ToolhostError as e:
            return _message(call_id, f"error: {e}")
        return _message(call_id, result.text)


def _message(call_id: str, content: str) -> Dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _parse(tool_call: Any) -> Tuple[str, str, str]:
    function = _get(tool_call, "function")
    name = _get(function, "name") if function is not None else None
    if not isinstance(name, str):
        raise ValueError(f"not a tool call (no function name): {tool_call!r}")
    arguments = _get(function, "arguments")
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments)
    return str(_get(tool_call, "id") or ""), name, arguments or ""
