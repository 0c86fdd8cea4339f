"""toolhost tools as Qwen-Agent tools (`qwen_agent.tools.BaseTool`).

Each tool becomes a `BaseTool` subclass registered with Qwen's
`register_tool` under its tool id, its `parameters` the tool's JSON Schema
(`$ref`s inlined), so an agent names it like any of Qwen's tools:

    from qwen_agent.agents import Assistant
    from toolhost_client import Client
    from toolhost_client.qwen import register_qwen_tools

    names = register_qwen_tools(Client(url), ["calc_evaluate", "image_resize"])
    bot = Assistant(llm={...}, function_list=names)

`call` takes Qwen's arguments (a JSON string, parsed with Qwen's own
`json_loads`: JSON, else JSON5, fenced blocks allowed; or a dict) and answers
a `str`, or a `List[ContentItem]` when the result holds images (written to
the tool's `work_dir`, as Qwen's own image tools do; other binaries as
`file` items). Every failure, the server's or the arguments', is answered as
an error text for the model (`Error: [kind] message`), never raised.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Type, Union

from qwen_agent.llm.schema import ContentItem
from qwen_agent.settings import DEFAULT_WORKSPACE
from qwen_agent.tools.base import BaseTool, register_tool
from qwen_agent.utils.utils import json_loads

from .client import Client
from .errors import ToolhostError
from .schema import object_parameters
from .types import Result, Tool

__all__ = ["ToolhostQwenTool", "qwen_tool_class", "register_qwen_tools", "qwen_tools"]


class ToolhostQwenTool(BaseTool):  # type: ignore[misc]  # qwen-agent is untyped
    """Base of the generated tool classes; `toolhost_client`,
    `toolhost_tool_id` and `toolhost_session` are class attributes, so Qwen
    can instantiate a registered tool by name (`function_list=["calc_evaluate"]`)."""

    toolhost_client: Optional[Client] = None
    toolhost_tool_id: str = ""
    toolhost_session: Optional[str] = None
    #: No session named: the client's agent session (`Client.agent_session`).
    toolhost_shared: bool = False

    @property
    def work_dir(self) -> str:
        return str(self.cfg.get("work_dir") or os.path.join(DEFAULT_WORKSPACE, "tools", self.name))

    def call(self, params: Union[str, Dict[str, Any]], **kwargs: Any) -> Union[str, List[ContentItem]]:
        client = self.toolhost_client
        if client is None:
            return f"Error: tool `{self.name}` is not bound to a toolhost server"
        if isinstance(params, str):
            try:
                args = json_loads(params) if params.strip() else {}
            except ValueError as e:
                return f"Error: the arguments of `{self.name}` are not JSON: {e}"
        else:
            args = params
        if not isinstance(args, dict):
            return f"Error: the arguments of `{self.name}` must be a JSON object, not {type(args).__name__}"
        try:
            session = client.agent_session().id if self.toolhost_shared else self.toolhost_session
            result = client.invoke(self.toolhost_tool_id, args, session=session)
        except ToolhostError as e:
            return f"Error: {e}"
        return self._answer(result)

    def _answer(self, result: Result) -> Union[str, List[ContentItem]]:
        if not result.binaries:
            return result.text
        items: List[ContentItem] = []
        for c in result.content:
            if c.type == "binary":
                path = c.save(self.work_dir)
                items.append(ContentItem(image=path) if c.is_image else ContentItem(file=path))
            else:
                items.append(ContentItem(text=c.as_text()))
        return items


def qwen_tool_class(
    client: Client,
    tool: Tool,
    *,
    session: Optional[str] = None,
    per_call_sessions: bool = False,
    register: bool = True,
    allow_overwrite: bool = True,
) -> Type[ToolhostQwenTool]:
    """The `BaseTool` subclass of one tool (with its schema), registered with
    Qwen's `register_tool` under the tool id unless `register` is false.
    Calls run in `session` when given, else in the client's agent session
    (one for every tool of the client, closed with it), or each in a new one
    with `per_call_sessions`."""
    if tool.input_schema is None:
        tool = client.tool(tool.tool_id)
    attrs: Dict[str, Any] = {
        "description": tool.description,
        "parameters": object_parameters(tool.input_schema),
        "toolhost_client": client,
        "toolhost_tool_id": tool.tool_id,
        "toolhost_session": session,
        "toolhost_shared": session is None and not per_call_sessions,
        "__doc__": tool.description,
    }
    cls: Type[ToolhostQwenTool] = type(f"Toolhost_{tool.tool_id}", (ToolhostQwenTool,), attrs)
    if register:
        cls = register_tool(tool.tool_id, allow_overwrite=allow_overwrite)(cls)
    else:
        cls.name = tool.tool_id
    return cls


def _selected(client: Client, tool_ids: Optional[Iterable[str]]) -> List[Tool]:
    tools = client.list_tools(schemas=True)
    if tool_ids is None:
        return tools
    by_id = {t.tool_id: t for t in tools}
    wanted = list(tool_ids)
    missing = [i for i in wanted if i not in by_id]
    if missing:
        raise ValueError(f"no active tool(s) {', '.join(missing)} at {client.url}")
    return [by_id[i] for i in wanted]


def register_qwen_tools(
    client: Client,
    tool_ids: Optional[Iterable[str]] = None,
    *,
    session: Optional[str] = None,
    per_call_sessions: bool = False,
    allow_overwrite: bool = True,
) -> List[str]:
    """Register the server's tools (or `tool_ids`) with Qwen-Agent; returns
    their names for `function_list`. A name Qwen already has (toolhost's
    `code_interpreter`, `storage`) is taken over unless `allow_overwrite` is
    false (then Qwen raises)."""
    return [
        qwen_tool_class(
            client, t, session=session, per_call_sessions=per_call_sessions, allow_overwrite=allow_overwrite
        ).name
        for t in _selected(client, tool_ids)
    ]


def qwen_tools(
    client: Client,
    tool_ids: Optional[Iterable[str]] = None,
    *,
    session: Optional[str] = None,
    per_call_sessions: bool = False,
    work_dir: Optional[str] = None,
    register: bool = False,
) -> List[BaseTool]:
    """Tool instances for `function_list`, without touching Qwen's registry
    unless `register`."""
    cfg = {"work_dir": work_dir} if work_dir else None
    return [
        qwen_tool_class(client, t, session=session, per_call_sessions=per_call_sessions, register=register)(cfg)
        for t in _selected(client, tool_ids)
    ]
