"""toolhost toolkits as Lagent actions (Lagent 0.2: `BaseAction`, `ActionExecutor`).

Each toolkit (plugin) becomes one toolkit action whose `api_list` holds its
tools, so Lagent's `ActionExecutor` lists them as `{toolkit}.{api}` and runs
`executor("calc.evaluate", '{"expression": "1+1"}')`:

    from lagent.actions import ActionExecutor
    from toolhost_client import Client
    from toolhost_client.lagent import lagent_actions

    executor = ActionExecutor(lagent_actions(Client(url), toolkits=["calc"]))

Results are `ActionReturn`s: `SUCCESS` with `result` items `{"type":
"text"|"image"|"file", "content"}` (an image or other binary is written to
`output_dir` and its path is the content); `ARGS_ERROR` when Lagent's parser
or the server's schema refuses the arguments; `API_ERROR` for every other
error the server answers (an unknown or unloaded tool, a tool failure, a
limit); `HTTP_ERROR` when the server does not answer. `errmsg` is the
server's `[kind] message`.
"""

from __future__ import annotations

import tempfile
from typing import Any, Dict, Iterable, List, Optional, Type

from lagent.actions import BaseAction
from lagent.actions.parser import BaseParser, JsonParser, ParseError
from lagent.schema import ActionReturn, ActionStatusCode

from .client import Client
from .errors import InvalidInputError, ToolhostConnectionError, ToolhostError
from .schema import describe, inline_refs, lagent_type
from .types import Result, Tool

__all__ = ["ToolhostToolkit", "lagent_actions", "lagent_api"]


def lagent_api(tool: Tool) -> Dict[str, Any]:
    """One tool as a Lagent API description: `name`, `description`,
    `parameters` `[{name, type, description}]` with Lagent's type names,
    `required`."""
    schema = inline_refs(tool.input_schema or {})
    props = schema.get("properties") or {}
    parameters = [
        {"name": name, "type": lagent_type(p), "description": describe(p)} for name, p in props.items()
    ]
    required = [r for r in schema.get("required") or [] if r in props]
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": parameters,
        "required": required,
    }


class ToolhostToolkit(BaseAction):  # type: ignore[misc]  # lagent is untyped
    """A toolhost toolkit as a Lagent toolkit action: one API per tool."""

    def __init__(
        self,
        client: Client,
        toolkit: str,
        tools: Iterable[Tool],
        *,
        description: str = "",
        session: Optional[str] = None,
        per_call_sessions: bool = False,
        output_dir: Optional[str] = None,
        parser: Type[BaseParser] = JsonParser,
        enable: bool = True,
    ) -> None:
        tools = list(tools)
        if not tools:
            raise ValueError(f"toolkit `{toolkit}` has no tools")
        self._client = client
        self._session = session
        # Without a session named: the client's agent session, shared by all
        # its adapters (a new session per call only when asked).
        self._shared = session is None and not per_call_sessions
        self._output_dir = output_dir
        self._tool_ids = {t.name: t.tool_id for t in tools}
        spec = {
            "name": toolkit,
            "description": description or f"toolhost toolkit `{toolkit}`: " + "; ".join(
                f"{t.name}: {t.description.split('. ')[0]}" for t in tools
            ),
            "api_list": [lagent_api(t) for t in tools],
        }
        super().__init__(description=spec, parser=parser, enable=enable)

    @property
    def is_toolkit(self) -> bool:
        return True

    @property
    def tool_ids(self) -> Dict[str, str]:
        """API name -> toolhost tool id."""
        return dict(self._tool_ids)

    def output_dir(self) -> str:
        if self._output_dir is None:
            self._output_dir = tempfile.mkdtemp(prefix=f"toolhost-{self.name}-")
        return self._output_dir

    def __call__(self, inputs: Any, name: str = "run") -> ActionReturn:
        fallback = {"inputs": inputs, "name": name}
        tool_id = self._tool_ids.get(name)
        if tool_id is None:
            return ActionReturn(
                fallback, type=self.name, errmsg=f"invalid API: {name}", state=ActionStatusCode.API_ERROR
            )
        try:
            args = self._parser.parse_inputs(inputs, name)
        except ParseError as e:
            return ActionReturn(fallback, type=self.name, errmsg=e.err_msg, state=ActionStatusCode.ARGS_ERROR)
        try:
            session = self._client.agent_session().id if self._shared else self._session
            result = self._client.invoke(tool_id, args, session=session)
        except InvalidInputError as e:
            return ActionReturn(args, type=self.name, errmsg=str(e), state=ActionStatusCode.ARGS_ERROR)
        except ToolhostConnectionError as e:
            return ActionReturn(args, type=self.name, errmsg=str(e), state=ActionStatusCode.HTTP_ERROR)
        except ToolhostError as e:
            return ActionReturn(args, type=self.name, errmsg=str(e), state=ActionStatusCode.API_ERROR)
        return ActionReturn(args, type=self.name, result=self._items(result))

    def _items(self, result: Result) -> List[Dict[str, str]]:
        items = []
        for c in result.content:
            if c.type == "binary":
                kind = "image" if c.is_image else "file"
                items.append({"type": kind, "content": c.save(self.output_dir())})
            else:
                items.append({"type": "text", "content": c.as_text()})
        return items


def lagent_actions(
    client: Client,
    toolkits: Optional[Iterable[str]] = None,
    *,
    session: Optional[str] = None,
    per_call_sessions: bool = False,
    output_dir: Optional[str] = None,
    parser: Type[BaseParser] = JsonParser,
) -> List[ToolhostToolkit]:
    """One `ToolhostToolkit` per toolkit of the server (or of `toolkits`),
    its tools as APIs. Calls run in `session` when given, else in the
    client's agent session (`Client.agent_session`: one for all of them,
    closed with the client), or each in a new one with `per_call_sessions`."""
    wanted = set(toolkits) if toolkits is not None else None
    by_kit: Dict[str, List[Tool]] = {}
    for tool in client.list_tools(schemas=True):
        if wanted is None or tool.category in wanted:
            by_kit.setdefault(tool.category, []).append(tool)
    if wanted is not None and wanted - set(by_kit):
        missing = ", ".join(sorted(wanted - set(by_kit)))
        raise ValueError(f"no active tools in toolkit(s) {missing} at {client.url}")
    return [
        ToolhostToolkit(
            client,
            kit,
            tools,
            session=session,
            per_call_sessions=per_call_sessions,
            output_dir=output_dir,
            parser=parser,
        )
        for kit, tools in by_kit.items()
    ]
