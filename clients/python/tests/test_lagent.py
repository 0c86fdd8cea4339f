"""toolhost toolkits inside Lagent's own ActionExecutor (lagent 0.2.4 from PyPI)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from conftest import Server, png, png_size
from lagent.actions import ActionExecutor, BaseAction
from lagent.actions.parser import JsonParser
from lagent.schema import ActionReturn, ActionStatusCode, ActionValidCode

from toolhost_client import Client
from toolhost_client.lagent import ToolhostToolkit, lagent_actions


@pytest.fixture
def executor(client: Client, tmp_path: Path) -> ActionExecutor:
    return ActionExecutor(lagent_actions(client, ["calc", "image"], output_dir=str(tmp_path)))


def test_toolkits_as_lagent_describes_them(executor: ActionExecutor) -> None:
    assert set(executor.action_names()) == {"calc", "image"}
    assert all(isinstance(a, BaseAction) and a.is_toolkit for a in executor.actions.values())
    info = {a["name"]: a for a in executor.get_actions_info()}
    assert {"calc.evaluate", "image.resize", "image.zoom_in"} <= set(info)
    calc = info["calc.evaluate"]
    assert calc["required"] == ["expression"]
    assert calc["parameters"] == [
        {"name": "expression", "type": "STRING", "description": calc["parameters"][0]["description"]}
    ]
    assert calc["parameter_description"] == JsonParser.PARAMETER_DESCRIPTION
    types = {p["name"]: p["type"] for p in info["image.resize"]["parameters"]}
    assert types["width"] == "NUMBER" and types["scale"] == "FLOAT"
    assert types["keep_aspect"] == "BOOLEAN" and types["path"] == "STRING"
    formats = next(p for p in info["image.resize"]["parameters"] if p["name"] == "format")
    assert "'png'" in formats["description"]  # the enum behind a $ref, spelled out


def test_a_call_through_the_executor(executor: ActionExecutor) -> None:
    ret = executor("calc.evaluate", '{"expression": "2*(3+4)^2"}')
    assert isinstance(ret, ActionReturn)
    assert ret.state == ActionStatusCode.SUCCESS and ret.valid == ActionValidCode.OPEN
    assert ret.type == "calc" and ret.args == {"expression": "2*(3+4)^2"}
    assert [i["type"] for i in ret.result] == ["text"]
    assert json.loads(ret.result[0]["content"])["value"] == 98.0
    # Lagent's fenced JSON, as its JsonParser takes it.
    ret = executor("calc.evaluate", '```json\n{"expression": "6*7"}\n```')
    assert ret.state == ActionStatusCode.SUCCESS and "42" in ret.format_result()


def test_an_image_result(executor: ActionExecutor, tmp_path: Path) -> None:
    source = base64.b64encode(png(40, 30)).decode()
    ret = executor("image.resize", json.dumps({"base64": source, "width": 8}))
    assert ret.state == ActionStatusCode.SUCCESS, ret.errmsg
    kinds = [i["type"] for i in ret.result]
    assert kinds == ["text", "image"]
    path = Path(ret.result[1]["content"])
    assert path.parent == tmp_path and png_size(path.read_bytes()) == (8, 6)
    assert f"[image]({path})" in ret.format_result()


def test_argument_errors(executor: ActionExecutor) -> None:
    # Refused by Lagent's parser: not JSON, an unknown or a missing argument.
    for command in ("not json", '{"expr": "1"}', "{}"):
        ret = executor("calc.evaluate", command)
        assert ret.state == ActionStatusCode.ARGS_ERROR, (command, ret)
    # Refused by the server: the schema (width >= 1), or the tool itself.
    ret = executor("image.resize", json.dumps({"base64": base64.b64encode(png(4, 4)).decode(), "width": 0}))
    assert ret.state == ActionStatusCode.ARGS_ERROR and ret.errmsg.startswith("[invalid_input]")
    ret = executor("calc.evaluate", '{"expression": "1/0"}')
    assert ret.state == ActionStatusCode.ARGS_ERROR and "division by zero" in ret.errmsg


def test_unknown_apis(executor: ActionExecutor) -> None:
    ret = executor("calc.nope", "{}")
    assert ret.state == ActionStatusCode.API_ERROR and "nope" in ret.errmsg
    ret = executor("nosuchkit.run", "{}")  # Lagent's own InvalidAction
    assert ret.valid == ActionValidCode.INVALID


def test_a_session_keeps_the_workspace(client: Client) -> None:
    with client.session() as s:
        [files] = lagent_actions(client, ["files"], session=s.id)
        assert isinstance(files, ToolhostToolkit) and files.tool_ids["write"] == "files_write"
        ex = ActionExecutor([files])
        ret = ex("files.write", json.dumps({"path": "plan.md", "content": "ship it\n"}))
        assert ret.state == ActionStatusCode.SUCCESS, ret.errmsg
        ret = ex("files.read", json.dumps({"path": "plan.md"}))
        assert "ship it" in ret.format_result()
        assert s.download("plan.md") == b"ship it\n"


def test_unknown_toolkits_are_refused(client: Client) -> None:
    with pytest.raises(ValueError, match="nosuchkit"):
        lagent_actions(client, ["calc", "nosuchkit"])


def test_an_agent_keeps_one_session_until_its_client_closes(server: Server, tmp_path: Path) -> None:
    """Built as the README shows (no session given), the actions share the
    client's agent session: a file written by one call is read by the next;
    closing the client closes the session (its workspace deleted)."""
    workspaces = server.root / "data" / "workspaces"
    client = Client(server.url)
    executor = ActionExecutor(lagent_actions(client, ["files"], output_dir=str(tmp_path)))
    ret = executor("files.write", '{"path": "notes/kept.txt", "content": "kept between calls"}')
    assert ret.state == ActionStatusCode.SUCCESS, ret.errmsg
    ret = executor("files.read", '{"path": "notes/kept.txt"}')
    assert ret.state == ActionStatusCode.SUCCESS, ret.errmsg
    assert "kept between calls" in ret.result[0]["content"]
    sid = client.agent_session().id
    assert len(sid) == 32 and (workspaces / sid / "notes" / "kept.txt").is_file()
    client.close()
    assert not (workspaces / sid).exists(), "closed with the client"

    # A new session per call only when asked: the read finds nothing.
    with Client(server.url) as apart:
        executor = ActionExecutor(lagent_actions(apart, ["files"], per_call_sessions=True))
        ret = executor("files.write", '{"path": "gone.txt", "content": "x"}')
        assert ret.state == ActionStatusCode.SUCCESS, ret.errmsg
        ret = executor("files.read", '{"path": "gone.txt"}')
        assert ret.state != ActionStatusCode.SUCCESS


def test_an_agent_session_no_call_used_closes_quietly(server: Server) -> None:
    with Client(server.url) as client:
        lagent_actions(client, ["calc"])
        client.agent_session()
    # Left to the end of the process: closed at exit (a finalizer), quietly.
    client = Client(server.url)
    assert client.agent_session().id != ""
