"""The sync client against the real server: discovery, calls, typed errors,
streamed progress, sessions and workspace files, connection reuse."""

from __future__ import annotations

import base64

import httpx
import pytest
from conftest import Server, png, png_size

from toolhost_client import (
    ERRORS_BY_KIND,
    Client,
    InputRequiredError,
    InvalidInputError,
    LimitError,
    NotFoundError,
    OutOfFuelError,
    Progress,
    Result,
    ToolError,
    ToolhostError,
)


def test_the_server_answers_at_once(server: Server) -> None:
    # /health answered within seconds of the spawn, and before any plugin
    # had loaded (the server listens first, plugins load behind it).
    assert server.health_s < 10, server.health_s
    log = server.log()
    assert 0 <= log.find("toolhost listening") < log.find("plugin loaded"), log


def test_list_and_describe_tools(client: Client) -> None:
    tools = {t.tool_id: t for t in client.list_tools()}
    assert {"calc_evaluate", "image_resize", "files_read"} <= set(tools)
    calc = tools["calc_evaluate"]
    assert (calc.category, calc.name, calc.status) == ("calc", "evaluate", "active")
    assert calc.input_schema is None  # the summary; schemas on request
    only_image = client.list_tools("image", schemas=True)
    assert only_image and all(t.category == "image" for t in only_image)
    resize = next(t for t in only_image if t.tool_id == "image_resize")
    assert resize.input_schema and "width" in resize.input_schema["properties"]
    full = client.tool("calc_evaluate")
    assert full.input_schema and full.input_schema["required"] == ["expression"]
    with pytest.raises(NotFoundError) as e:
        client.tool("no_such_tool")
    assert e.value.status == 404 and "no_such_tool" in e.value.message


def test_search_ranks_the_right_tool_first(client: Client) -> None:
    found = client.search("evaluate an arithmetic expression", top_k=3)
    assert found[0].tool_id == "calc_evaluate"
    assert found[0].input_schema and "expression" in found[0].input_schema["properties"]
    assert client.search("resize an image to a smaller width")[0].category == "image"


def test_invoke_answers_the_value(client: Client) -> None:
    r = client.invoke("calc_evaluate", {"expression": "2*(3+4)^2"})
    assert r.value == {"expression": "2*(3+4)^2", "value": 98.0}
    assert r.content[0].type == "json" and r.content[0].json["value"] == 98.0
    assert r.session and r.elapsed_ms is not None and r.fuel and r.fuel > 0
    assert '"value": 98.0' in r.text


def test_errors_are_typed(client: Client) -> None:
    with pytest.raises(InvalidInputError) as e:
        client.invoke("calc_evaluate", {"expression": "1/0"})
    assert (e.value.status, e.value.kind) == (422, "invalid_input")
    assert "division by zero" in e.value.message
    with pytest.raises(InvalidInputError) as e:
        client.invoke("calc_evaluate", {"expr": "1"})
    assert any("expression" in d for d in e.value.details), e.value.details
    assert str(e.value).startswith("[invalid_input] ")
    with pytest.raises(NotFoundError) as e2:
        client.invoke("calc_nope", {})
    assert e2.value.status == 404 and isinstance(e2.value, ToolhostError)
    # A limit lowered for one call: the sandbox runs out of fuel.
    with pytest.raises(OutOfFuelError) as e3:
        client.invoke("calc_evaluate", {"expression": "2+2"}, limits={"fuel": 10})
    assert isinstance(e3.value, LimitError) and e3.value.status == 500


def test_one_class_per_kind() -> None:
    kinds = {
        "not_found", "invalid_input", "tool_error", "out_of_fuel", "out_of_memory", "timeout", "trap",
        "output_too_large", "overloaded", "backend_unavailable", "not_active", "internal", "unauthorized",
        "forbidden", "rate_limited", "conflict", "node_lost",
    }
    assert kinds <= set(ERRORS_BY_KIND)
    classes = list(ERRORS_BY_KIND.values())
    assert len(set(classes)) == len(classes)
    assert all(issubclass(c, ToolhostError) and c.kind == k for k, c in ERRORS_BY_KIND.items())


def test_images_come_back_as_bytes(client: Client) -> None:
    source = base64.b64encode(png(40, 30)).decode()
    r = client.invoke("image_resize", {"base64": source, "width": 20})
    assert r.content[0].json["width"] == 20
    [image] = r.images
    assert image.media_type == "image/png" and image.name and image.name.endswith(".png")
    assert png_size(image.data or b"") == (20, 15)


def test_stream_yields_progress_then_the_result(client: Client) -> None:
    source = base64.b64encode(png(64, 32)).decode()
    events = list(client.stream("image_resize", {"base64": source, "width": 16}))
    assert all(isinstance(e, Progress) for e in events[:-1])
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress and any("resizing" in (p.message or "") for p in progress), progress
    last = events[-1]
    assert isinstance(last, Result) and png_size(last.images[0].data or b"") == (16, 8)
    # A call without progress reports: the result alone.
    events = list(client.stream("calc_evaluate", {"expression": "6*7"}))
    assert len(events) == 1 and isinstance(events[0], Result) and events[0].value["value"] == 42.0
    # Its error is raised, typed, from the stream.
    with pytest.raises(InvalidInputError):
        list(client.stream("image_resize", {"base64": "bm90IGFuIGltYWdl", "width": 4}))
    with pytest.raises(NotFoundError):
        list(client.stream("no_such_tool", {}))


def test_sessions_share_a_workspace(client: Client) -> None:
    with client.session() as s:
        assert s.upload("photos/in.png", png(40, 20)) == "photos/in.png"
        r = s.invoke("image_resize", {"path": "photos/in.png", "width": 10})
        out = r.content[0].json["output_path"]
        assert out == "photos/in.resize.png" and r.session == s.id
        assert png_size(s.download(out)) == (10, 5)
        names = [c["name"] for c in s.files()["children"][0]["children"]]
        assert names == ["in.png", "in.resize.png"]
        s.invoke("files_write", {"path": "notes.txt", "content": "hello\n"})
        assert s.download("notes.txt") == b"hello\n"
        with pytest.raises(NotFoundError):
            s.download("missing.txt")
        listed = {f["path"]: f["size"] for f in s.list_files()}
        assert listed["notes.txt"] == 6 and "photos/in.resize.png" in listed
        s.delete("notes.txt")
        assert "notes.txt" not in {f["path"] for f in s.list_files()}
        with pytest.raises(NotFoundError):
            s.delete("notes.txt")
        # Names that need quoting in a URL path.
        assert s.upload("a dir/q?#%.txt", b"odd") == "a dir/q?#%.txt"
        assert s.download("a dir/q?#%.txt") == b"odd"
        sid = s.id
    assert s.closed
    with pytest.raises(NotFoundError):  # closed, workspace deleted
        client.close_session(sid)
    # A call outside the session does not see its files.
    with pytest.raises(InvalidInputError):
        client.invoke("files_read", {"path": "notes.txt"})


def test_a_tool_that_asks_is_answered_and_resumed(client: Client) -> None:
    with client.session() as s:
        s.invoke("files_write", {"path": "old.txt", "content": "bye\n"})
        with pytest.raises(InputRequiredError) as asked:
            s.invoke("files_delete", {"path": "old.txt"})
        e = asked.value
        assert [q["key"] for q in e.questions] == ["confirm"] and e.state
        r = s.invoke(
            "files_delete",
            {"path": "old.txt"},
            input={"state": e.state, "answers": {"confirm": {"action": "accept", "content": {"confirm": True}}}},
        )
        assert r.value == "deleted old.txt"
        # A caller that cannot answer says so: the tool gets no input.
        s.invoke("files_write", {"path": "keep.txt", "content": "stay\n"})
        with pytest.raises(ToolError):
            s.invoke("files_delete", {"path": "keep.txt"}, input="none")
        assert s.download("keep.txt") == b"stay\n"


def test_named_sessions_reconnect(client: Client) -> None:
    first = client.session("py-client-named")
    assert first.id == "py-client-named"
    first.upload("a.txt", b"kept")
    again = client.session("py-client-named")
    assert again.download("a.txt") == b"kept"
    r = client.invoke("files_read", {"path": "a.txt"}, session="py-client-named")
    assert "kept" in r.text
    again.close()
    with pytest.raises(InvalidInputError):  # not an id the server takes
        client.session("../etc")


def test_connections_are_reused(server: Server) -> None:
    connects = []

    def trace(name: str, info: dict) -> None:
        if name == "connection.connect_tcp.complete":
            connects.append(info)

    def hook(request: httpx.Request) -> None:
        request.extensions["trace"] = trace

    with Client(server.url, http=httpx.Client(event_hooks={"request": [hook]}, timeout=30)) as c:
        for i in range(5):
            assert c.invoke("calc_evaluate", {"expression": f"{i}+1"}).value["value"] == i + 1
        c.list_tools()
        list(c.stream("calc_evaluate", {"expression": "1"}))
    assert len(connects) == 1, connects


def test_the_extras_bring_what_the_frameworks_import_undeclared() -> None:
    from importlib.metadata import requires

    reqs = requires("toolhost-client") or []

    def extra(name: str, package: str) -> bool:
        return any(
            r.startswith(package) and r.replace("'", '"').endswith(f'extra == "{name}"') for r in reqs
        )

    assert extra("lagent", "lagent") and extra("lagent", "cachetools")
    assert extra("qwen", "qwen-agent") and extra("qwen", "soundfile") and extra("qwen", "tqdm")
