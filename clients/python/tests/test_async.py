"""The async client against the real server: the same surface, awaited, and
calls in flight together on one pool."""

from __future__ import annotations

import asyncio
import base64

import pytest
from conftest import Server, png, png_size

from toolhost_client import AsyncClient, InvalidInputError, NotFoundError, Progress, Result


def test_async_calls(server: Server) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as th:
            assert (await th.health())["status"] == "ok"
            tools = await th.list_tools("calc", schemas=True)
            assert [t.tool_id for t in tools] == ["calc_evaluate"] and tools[0].input_schema
            assert (await th.search("arithmetic expression"))[0].tool_id == "calc_evaluate"
            # Twenty calls at once, each answering its own value.
            results = await asyncio.gather(
                *(th.invoke("calc_evaluate", {"expression": f"{i}*{i}"}) for i in range(20))
            )
            assert [r.value["value"] for r in results] == [float(i * i) for i in range(20)]
            with pytest.raises(InvalidInputError) as e:
                await th.invoke("calc_evaluate", {"expression": "1/0"})
            assert e.value.status == 422
            with pytest.raises(NotFoundError):
                await th.tool("no_such_tool")
            assert [t["function"]["name"] for t in await th.openai_tools("calc")] == ["calc_evaluate"]

    asyncio.run(main())


def test_async_stream_and_session(server: Server) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as th:
            source = base64.b64encode(png(48, 24)).decode()
            events = [e async for e in th.stream("image_resize", {"base64": source, "width": 12})]
            assert any(isinstance(e, Progress) for e in events)
            assert isinstance(events[-1], Result) and png_size(events[-1].images[0].data or b"") == (12, 6)
            with pytest.raises(InvalidInputError):
                async for _ in th.stream("calc_evaluate", {"expression": "1/0"}):
                    pass
            async with await th.session() as s:
                await s.upload("in/p.png", png(30, 30))
                r = await s.invoke("image_resize", {"path": "in/p.png", "width": 15})
                assert png_size(await s.download(r.content[0].json["output_path"])) == (15, 15)
                tree = await s.files()
                assert tree["children"][0]["name"] == "in"
                sid = s.id
            with pytest.raises(NotFoundError):
                await th.close_session(sid)

    asyncio.run(main())
