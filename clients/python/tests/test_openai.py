"""OpenAI-style function calling: the `tools` array and `tool_call` execution."""

from __future__ import annotations

import json
from types import SimpleNamespace

from toolhost_client import Client
from toolhost_client.openai import OpenAITools


def test_tools_array(client: Client) -> None:
    fc = OpenAITools(client)
    tools = fc.tools()
    names = [t["function"]["name"] for t in tools]
    assert {"calc_evaluate", "image_resize", "files_write"} <= set(names)
    calc = next(t for t in tools if t["function"]["name"] == "calc_evaluate")
    assert calc["type"] == "function" and calc["function"]["parameters"]["required"] == ["expression"]
    only = OpenAITools(client, ["image_resize", "calc_evaluate"]).tools()
    assert [t["function"]["name"] for t in only] == ["image_resize", "calc_evaluate"]


def test_run_answers_the_tool_message(client: Client) -> None:
    fc = OpenAITools(client)
    as_dict = {"id": "call_1", "type": "function",
               "function": {"name": "calc_evaluate", "arguments": '{"expression": "2*(3+4)^2"}'}}
    msg = fc.run(as_dict)
    assert msg["role"] == "tool" and msg["tool_call_id"] == "call_1"
    assert json.loads(msg["content"])["value"] == 98.0
    # The openai SDK's objects (attributes, not keys).
    as_object = SimpleNamespace(id="call_2", type="function",
                                function=SimpleNamespace(name="calc_evaluate", arguments='{"expression": "6*7"}'))
    assert json.loads(fc.run(as_object)["content"])["value"] == 42.0


def test_failed_calls_are_answered_to_the_model(client: Client) -> None:
    fc = OpenAITools(client)

    def run(name: str, arguments: str) -> str:
        return str(fc.run({"id": "c", "function": {"name": name, "arguments": arguments}})["content"])

    assert run("calc_evaluate", '{"expression": ').startswith("error: [invalid_input] the arguments are not JSON")
    assert run("calc_evaluate", '{"expression": "1/0"}').startswith("error: [invalid_input] division by zero")
    assert run("calc_evaluate", "{}").startswith("error: [invalid_input]")
    assert run("no_such_tool", "{}").startswith("error: [not_found]")
    assert OpenAITools(client, ["calc_evaluate"]).run(
        {"id": "c", "function": {"name": "files_write", "arguments": "{}"}})["content"].startswith("error: [not_found]")
