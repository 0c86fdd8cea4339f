"""The asynchronous client: `AsyncClient` and its `AsyncSession`s, the same
methods as `Client` and `Session`, awaited."""

from __future__ import annotations

import os
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Union, cast

import httpx

from . import _wire
from ._wire import StreamEvent
from .client import PathLike
from .errors import ProtocolError
from .types import Result, Tool


class AsyncClient:
    """A toolhost server, for asyncio code. One `httpx.AsyncClient`
    (connection pool) serves every request.

        async with AsyncClient(url) as th:
            result = await th.invoke("calc_evaluate", {"expression": "1+1"})
    """

    def __init__(
        self,
        url: str = _wire.DEFAULT_URL,
        *,
        token: Optional[str] = None,
        timeout: float = 120.0,
        http: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self.url = _wire.base_url(url)
        self._http = http or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=10.0),
            headers=_wire.headers(token),
            cookies=_wire.no_cookies(),
        )
        if http is not None and token:
            self._http.headers["authorization"] = f"Bearer {token}"

    async def _send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            try:
                return await self._http.request(method, self.url + path, **kw)
            except httpx.TransportError as e:
                if not _wire.unanswered(e):
                    raise
                return await self._http.request(method, self.url + path, **kw)
        except httpx.TransportError as e:
            raise _wire.connection_error(self.url, e) from e

    async def _json(self, method: str, path: str, **kw: Any) -> Any:
        return _wire.json_of(await self._send(method, path, **kw))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def health(self) -> Dict[str, Any]:
        return cast(Dict[str, Any], await self._json("GET", "/health"))

    async def list_tools(self, category: Optional[str] = None, *, schemas: bool = False) -> List[Tool]:
        params = {"category": category} if category else {}
        summary = await self._json("GET", "/tools", params=params)
        openai = await self._json("GET", "/tools", params={**params, "format": "openai"}) if schemas else None
        return _wire.tools_of(summary, openai)

    async def tool(self, tool_id: str) -> Tool:
        return Tool.from_summary(await self._json("GET", f"/tools/{tool_id}"))

    async def search(self, query: str, top_k: int = 5) -> List[Tool]:
        found = await self._json("POST", "/retrieving_tools", json={"question": query, "top_k": top_k})
        return _wire.search_tools(found, await self.list_tools())

    async def openai_tools(self, category: Optional[str] = None) -> List[Dict[str, Any]]:
        params = {"format": "openai", **({"category": category} if category else {})}
        return list((await self._json("GET", "/tools", params=params))["tools"])

    async def invoke(
        self,
        tool_id: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        session: Optional[str] = None,
        limits: Optional[Mapping[str, Any]] = None,
        input: Optional[Union[str, Mapping[str, Any]]] = None,
    ) -> Result:
        response = await self._send(
            "POST",
            f"/tools/{tool_id}/invoke",
            json=_wire.invoke_body(params, limits, input),
            headers=_wire.session_headers(session),
        )
        return _wire.invoke_answer(response)

    async def stream(
        self,
        tool_id: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        session: Optional[str] = None,
        limits: Optional[Mapping[str, Any]] = None,
    ) -> AsyncIterator[StreamEvent]:
        """`Progress` items, then the `Result` (see `Client.stream`)."""
        request = self._http.build_request(
            "POST",
            self.url + f"/tools/{tool_id}/invoke",
            json=_wire.invoke_body(params, limits),
            headers={**_wire.session_headers(session), "accept": "text/event-stream"},
        )
        try:
            try:
                response = await self._http.send(request, stream=True)
            except httpx.TransportError as e:
                if not _wire.unanswered(e):
                    raise
                response = await self._http.send(request, stream=True)
        except httpx.TransportError as e:
            raise _wire.connection_error(self.url, e) from e
        try:
            if response.status_code >= 400:
                await response.aread()
                raise _wire.error_of(response)
            sid = response.headers.get(_wire.SESSION_HEADER)
            reader = _wire.SseReader()
            finished = False
            try:
                async for line in response.aiter_lines():
                    event = reader.feed(line)
                    if event is None:
                        continue
                    item = _wire.stream_event(event[0], event[1], sid, str(request.url))
                    if item is not None:
                        finished = isinstance(item, Result)
                        yield item
                        if finished:
                            return
            except httpx.TransportError as e:
                raise _wire.connection_error(self.url, e) from e
            if not finished:
                raise ProtocolError("the stream ended before the call's result", url=str(request.url))
        finally:
            await response.aclose()

    async def session(self, session_id: Optional[str] = None) -> "AsyncSession":
        """Open a session (see `Client.session`); `async with await th.session()`."""
        if session_id is None:
            body = await self._json("POST", "/get_cookie")
        else:
            body = await self._json("POST", "/reconnect_session", headers=_wire.cookie_headers(session_id))
        sid = body.get(_wire.COOKIE) if isinstance(body, dict) else None
        if not isinstance(sid, str):
            raise ProtocolError(f"no session id in {body!r}")
        return AsyncSession(self, sid)

    async def close_session(self, session_id: str) -> None:
        await self._json("DELETE", f"/sessions/{session_id}")


class AsyncSession:
    """A session of an `AsyncClient`."""

    def __init__(self, client: AsyncClient, session_id: str) -> None:
        self.client = client
        self.id = session_id
        self.closed = False

    async def invoke(
        self,
        tool_id: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        limits: Optional[Mapping[str, Any]] = None,
        input: Optional[Union[str, Mapping[str, Any]]] = None,
    ) -> Result:
        return await self.client.invoke(tool_id, params, session=self.id, limits=limits, input=input)

    def stream(
        self, tool_id: str, params: Optional[Mapping[str, Any]] = None, *, limits: Optional[Mapping[str, Any]] = None
    ) -> AsyncIterator[StreamEvent]:
        return self.client.stream(tool_id, params, session=self.id, limits=limits)

    async def upload(self, path: str, data: bytes) -> str:
        body = await self.client._json("PUT", _wire.file_route(self.id, path), content=data, headers=_wire.OCTETS)
        return str(body.get("path", path))

    async def upload_file(self, local: PathLike, path: Optional[str] = None) -> str:
        with open(local, "rb") as f:
            data = f.read()
        return await self.upload(path or os.path.basename(os.fspath(local)), data)

    async def download(self, path: str) -> bytes:
        response = await self.client._send("GET", _wire.file_route(self.id, path))
        if response.status_code >= 400:
            raise _wire.error_of(response)
        return response.content

    async def delete(self, path: str) -> None:
        await self.client._json("DELETE", _wire.file_route(self.id, path))

    async def list_files(self) -> List[Dict[str, Any]]:
        body = await self.client._json("GET", _wire.files_route(self.id))
        return cast(List[Dict[str, Any]], body.get("files", []))

    async def files(self) -> Dict[str, Any]:
        tree = await self.client._json("POST", "/get_workspace_structure", headers=_wire.cookie_headers(self.id))
        return cast(Dict[str, Any], tree)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.client.close_session(self.id)

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncSession({self.id!r})"
