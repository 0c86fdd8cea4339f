"""toolhost tools inside Qwen-Agent (qwen-agent 0.0.34 from PyPI): registered
with its register_tool, called by its own function-calling loop (Assistant),
driven by a scripted chat model, the one fake here."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple, Union

import pytest
from conftest import Server, png, png_size
from qwen_agent.agents import Assistant
from qwen_agent.llm import BaseChatModel
from qwen_agent.llm.schema import ASSISTANT, FUNCTION, ContentItem, FunctionCall, Message
from qwen_agent.tools import TOOL_REGISTRY, BaseTool

from toolhost_client import Client
from toolhost_client.qwen import ToolhostQwenTool, qwen_tools, register_qwen_tools


class ScriptedModel(BaseChatModel):
    """A chat model that answers the function calls it was given, in order,
    then a final text quoting the last function result. It records the
    messages and function lists Qwen-Agent sent it."""

    def __init__(self, calls: List[Tuple[str, str]], multimodal: bool = False) -> None:
        super().__init__({"model": "scripted"})
        self.calls = list(calls)
        self.multimodal = multimodal
        self.seen: List[Tuple[List[Message], List[Dict[str, Any]]]] = []

    @property
    def support_multimodal_input(self) -> bool:
        return self.multimodal

    def _chat_with_functions(
        self, messages: List[Message], functions: List[Dict[str, Any]], stream: bool, delta_stream: bool,
        generate_cfg: dict, lang: str,
    ) -> Union[List[Message], Iterator[List[Message]]]:
        self.seen.append((messages, functions))
        if self.calls:
            name, arguments = self.calls.pop(0)
            out = [Message(role=ASSISTANT, content="", function_call=FunctionCall(name=name, arguments=arguments),
                           extra={"function_id": str(len(self.seen))})]
        else:
            last = messages[-1]
            text = last.content if isinstance(last.content, str) else json.dumps([i.model_dump() for i in last.content])
            out = [Message(role=ASSISTANT, content=f"final: {text}")]
        return iter([out]) if stream else out

    def _chat_stream(self, messages: List[Message], delta_stream: bool, generate_cfg: dict) -> Iterator[List[Message]]:
        return iter([[Message(role=ASSISTANT, content="no functions")]])

    def _chat_no_stream(self, messages: List[Message], generate_cfg: dict) -> List[Message]:
        return [Message(role=ASSISTANT, content="no functions")]


def run(bot: Assistant) -> List[Message]:
    *_, response = bot.run([{"role": "user", "content": "use the tools"}])
    return [m if isinstance(m, Message) else Message(**m) for m in response]


def test_registered_tools_carry_the_schemas(client: Client) -> None:
    names = register_qwen_tools(client, ["calc_evaluate", "image_resize"])
    assert names == ["calc_evaluate", "image_resize"]
    for name in names:
        assert issubclass(TOOL_REGISTRY[name], ToolhostQwenTool)
    tool = TOOL_REGISTRY["image_resize"]()  # as Qwen makes it from a name: validates `parameters`
    assert isinstance(tool, BaseTool)
    params = tool.function["parameters"]
    assert set(params) == {"type", "properties", "required"}
    assert "$ref" not in json.dumps(params) and params["properties"]["format"]["anyOf"][0]["enum"][0] == "png"


def test_text_and_image_through_the_agent_loop(client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # Qwen's default workspace is relative
    names = register_qwen_tools(client, ["calc_evaluate", "image_resize"])
    source = base64.b64encode(png(40, 30)).decode()
    model = ScriptedModel(
        [
            # Qwen's JSON5 leniency: unquoted keys, single quotes, a trailing comma.
            ("calc_evaluate", "{expression: '2*(3+4)^2',}"),
            ("image_resize", json.dumps({"base64": source, "width": 8})),
        ],
        multimodal=True,
    )
    response = run(Assistant(llm=model, function_list=names))
    functions = [m for m in response if m.role == FUNCTION]
    assert [m.name for m in functions] == ["calc_evaluate", "image_resize"]
    assert isinstance(functions[0].content, str) and json.loads(functions[0].content)["value"] == 98.0
    items = functions[1].content
    assert isinstance(items, list) and all(isinstance(i, ContentItem) for i in items)
    assert [i.type for i in items] == ["text", "image"]
    image = Path(items[1].value)
    assert image.is_absolute() and image.is_relative_to(tmp_path / "workspace" / "tools" / "image_resize")
    assert png_size(image.read_bytes()) == (8, 6)
    # The model was offered the tools with their schemas, and was shown the results.
    offered = {f["name"]: f for f in model.seen[0][1]}
    assert offered["calc_evaluate"]["parameters"]["required"] == ["expression"]
    assert any("98.0" in str(m.content) for m in model.seen[1][0] if m.role == FUNCTION)
    shown = [m.content for m in model.seen[2][0] if m.role == FUNCTION][-1]
    assert isinstance(shown, list) and any(i.type == "image" and i.value == str(image) for i in shown), shown
    assert response[-1].role == ASSISTANT and "final:" in str(response[-1].content)


def test_errors_are_answered_to_the_model(client: Client, tmp_path: Path) -> None:
    tools = qwen_tools(client, ["calc_evaluate", "image_resize"], work_dir=str(tmp_path))
    model = ScriptedModel(
        [
            ("calc_evaluate", "{expression: "),  # neither JSON nor JSON5
            ("calc_evaluate", '{"expression": "1/0"}'),
            ("image_resize", '{"width": 0}'),
        ]
    )
    response = run(Assistant(llm=model, function_list=tools))
    answers = [m.content for m in response if m.role == FUNCTION]
    assert len(answers) == 3 and all(isinstance(a, str) and a.startswith("Error: ") for a in answers), answers
    assert "not JSON" in answers[0]
    assert answers[1].startswith("Error: [invalid_input] division by zero")
    assert answers[2].startswith("Error: [invalid_input]") and "width" in answers[2]


def test_direct_calls_and_dict_arguments(client: Client, tmp_path: Path) -> None:
    [calc] = qwen_tools(client, ["calc_evaluate"], work_dir=str(tmp_path))
    assert calc.name == "calc_evaluate"
    assert json.loads(calc.call({"expression": "6*7"}))["value"] == 42.0
    assert json.loads(calc.call('```json\n{"expression": "1+1"}\n```'))["value"] == 2.0
    assert calc.call("[1, 2]").startswith("Error: ")
    with pytest.raises(ValueError, match="no_such_tool"):
        qwen_tools(client, ["no_such_tool"])


def test_qwen_tools_share_the_client_s_agent_session(server: Server, tmp_path: Path) -> None:
    workspaces = server.root / "data" / "workspaces"
    client = Client(server.url)
    write, read = qwen_tools(client, ["files_write", "files_read"], work_dir=str(tmp_path))
    assert "Error" not in write.call({"path": "q/kept.txt", "content": "one session"})
    assert "one session" in read.call({"path": "q/kept.txt"})
    sid = client.agent_session().id
    assert (workspaces / sid / "q" / "kept.txt").is_file()
    client.close()
    assert not (workspaces / sid).exists()
    with Client(server.url) as apart:
        write, read = qwen_tools(apart, ["files_write", "files_read"], per_call_sessions=True)
        write.call({"path": "gone.txt", "content": "x"})
        assert read.call({"path": "gone.txt"}).startswith("Error")
