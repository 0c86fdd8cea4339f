"""The synchronous client: `Client` and its `Session`s."""

from __future__ import annotations

import os
import uuid
import weakref
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union, cast

import httpx

from . import _wire
from ._wire import StreamEvent
from .errors import NotFoundError, ProtocolError, ToolhostError
from .types import Result, Tool

PathLike = Union[str, "os.PathLike[str]"]


class Client:
    """A toolhost server: discovery, calls, sessions.

    One `httpx.Client` (a connection pool) serves every request, so
    consecutive calls reuse their connection. Close the client (or use it as
    a context manager) to release it.

        with Client("http://127.0.0.1:8001", token="...") as th:
            th.invoke("calc_evaluate", {"expression": "2*(3+4)^2"}).value
    """

    def __init__(
        self,
        url: str = _wire.DEFAULT_URL,
        *,
        token: Optional[str] = None,
        timeout: float = 120.0,
        http: Optional[httpx.Client] = None,
    ) -> None:
        self.url = _wire.base_url(url)
        self._http = http or httpx.Client(
            timeout=httpx.Timeout(timeout, connect=10.0),
            headers=_wire.headers(token),
            cookies=_wire.no_cookies(),
        )
        if http is not None and token:
            self._http.headers["authorization"] = f"Bearer {token}"
        self._agent: Optional[Session] = None

    # -- plumbing --------------------------------------------------------

    def _send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            try:
                return self._http.request(method, self.url + path, **kw)
            except httpx.TransportError as e:
                if not _wire.unanswered(e):
                    raise
                return self._http.request(method, self.url + path, **kw)
        except httpx.TransportError as e:
            raise _wire.connection_error(self.url, e) from e

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        return _wire.json_of(self._send(method, path, **kw))

    def close(self) -> None:
        """Close the agent session, if one was used, and the connections.
        The session's close is best effort: a server that is gone, or that
        refuses, leaves it to the server's idle timeout."""
        if self._agent is not None:
            try:
                self._agent.close()
            except ToolhostError:
                pass
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- discovery -------------------------------------------------------

    def health(self) -> Dict[str, Any]:
        """`GET /health` (answers without a token)."""
        return cast(Dict[str, Any], self._json("GET", "/health"))

    def list_tools(self, category: Optional[str] = None, *, schemas: bool = False) -> List[Tool]:
        """The active tools (of one toolkit with `category`); with `schemas`,
        each with its input schema (one more request)."""
        params = {"category": category} if category else {}
        summary = self._json("GET", "/tools", params=params)
        openai = self._json("GET", "/tools", params={**params, "format": "openai"}) if schemas else None
        return _wire.tools_of(summary, openai)

    def tool(self, tool_id: str) -> Tool:
        """One tool with its input schema (`GET /tools/{id}`); NotFoundError
        when the server has no such tool."""
        return Tool.from_summary(self._json("GET", f"/tools/{tool_id}"))

    def search(self, query: str, top_k: int = 5) -> List[Tool]:
        """The tools that best match `query` (the server's BM25 over names,
        descriptions and parameters), best first, with their schemas."""
        found = self._json("POST", "/retrieving_tools", json={"question": query, "top_k": top_k})
        return _wire.search_tools(found, self.list_tools())

    def openai_tools(self, category: Optional[str] = None) -> List[Dict[str, Any]]:
        """The tools as OpenAI's `tools` array (`GET /tools?format=openai`)."""
        params = {"format": "openai", **({"category": category} if category else {})}
        return list(self._json("GET", "/tools", params=params)["tools"])

    # -- calls -----------------------------------------------------------

    def invoke(
        self,
        tool_id: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        session: Optional[str] = None,
        limits: Optional[Mapping[str, Any]] = None,
        input: Optional[Union[str, Mapping[str, Any]]] = None,
    ) -> Result:
        """Call a tool and wait for its result. Errors are raised as the
        `ToolhostError` subclass of their kind (`InvalidInputError` with the
        schema violations in `details`, `NotFoundError`, ...)."""
        response = self._send(
            "POST",
            f"/tools/{tool_id}/invoke",
            json=_wire.invoke_body(params, limits, input),
            headers=_wire.session_headers(session),
        )
        return _wire.invoke_answer(response)

    def stream(
        self,
        tool_id: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        session: Optional[str] = None,
        limits: Optional[Mapping[str, Any]] = None,
    ) -> Iterator[StreamEvent]:
        """Call a tool with its progress streamed: yields a `Progress` per
        report, then the `Result` last (or raises the call's error). Leaving
        the loop early closes the stream, which cancels the call."""
        request = self._http.build_request(
            "POST",
            self.url + f"/tools/{tool_id}/invoke",
            json=_wire.invoke_body(params, limits),
            headers={**_wire.session_headers(session), "accept": "text/event-stream"},
        )
        try:
            try:
                response = self._http.send(request, stream=True)
            except httpx.TransportError as e:
                if not _wire.unanswered(e):
                    raise
                response = self._http.send(request, stream=True)
        except httpx.TransportError as e:
            raise _wire.connection_error(self.url, e) from e
        try:
            if response.status_code >= 400:
                response.read()
                raise _wire.error_of(response)
            sid = response.headers.get(_wire.SESSION_HEADER)
            reader = _wire.SseReader()
            finished = False
            try:
                for line in response.iter_lines():
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
            response.close()

    # -- sessions --------------------------------------------------------

    def session(self, session_id: Optional[str] = None) -> "Session":
        """Open a session (a workspace, and state such as Docker nodes, shared
        by its calls): a new one, or `session_id` (made if the server has no
        such session). Close it, or use it as a context manager."""
        if session_id is None:
            body = self._json("POST", "/get_cookie")
        else:
            body = self._json("POST", "/reconnect_session", headers=_wire.cookie_headers(session_id))
        sid = body.get(_wire.COOKIE) if isinstance(body, dict) else None
        if not isinstance(sid, str):
            raise ProtocolError(f"no session id in {body!r}")
        return Session(self, sid)

    def close_session(self, session_id: str) -> None:
        """Close a session: its nodes are removed and its workspace deleted."""
        self._json("DELETE", f"/sessions/{session_id}")

    def agent_session(self) -> "Session":
        """The session the framework adapters (Lagent, Qwen-Agent) share by
        default, so that an agent's calls see each other's files, shell
        state and variables: named here (128 random bits), made on the
        server by its first call, closed by `close()` (or the `with` block's
        end, or at the interpreter's exit). A new one after it is closed."""
        if self._agent is None or self._agent.closed:
            self._agent = Session(self, uuid.uuid4().hex, lazy=True)
            # At exit, if nobody closed it: its nodes are not left running
            # until the server's idle timeout.
            self._agent._finalizer = weakref.finalize(
                self._agent, _close_quietly, self._http, self.url, self._agent.id
            )
        return self._agent


def _close_quietly(http: httpx.Client, url: str, session_id: str) -> None:
    """Close a session at exit, whatever comes of it (it may never have been
    made, the server may be gone)."""
    if http.is_closed:
        return
    try:
        http.delete(f"{url}/sessions/{session_id}", timeout=5.0)
    except Exception:  # noqa: BLE001 - at exit, nothing to tell
        pass


class Session:
    """A session of a `Client`: calls sharing one workspace."""

    def __init__(self, client: Client, session_id: str, *, lazy: bool = False) -> None:
        self.client = client
        self.id = session_id
        self.closed = False
        # Named here, made by the server on its first call: closing one that
        # no call made is no error.
        self._lazy = lazy
        self._finalizer: Optional["weakref.finalize[Any, Any]"] = None

    def invoke(
        self,
        tool_id: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        limits: Optional[Mapping[str, Any]] = None,
        input: Optional[Union[str, Mapping[str, Any]]] = None,
    ) -> Result:
        return self.client.invoke(tool_id, params, session=self.id, limits=limits, input=input)

    def stream(
        self, tool_id: str, params: Optional[Mapping[str, Any]] = None, *, limits: Optional[Mapping[str, Any]] = None
    ) -> Iterator[StreamEvent]:
        return self.client.stream(tool_id, params, session=self.id, limits=limits)

    def upload(self, path: str, data: bytes) -> str:
        """Write `data` to `path` in the workspace (parents made; the
        session made if new); returns the path written."""
        body = self.client._json("PUT", _wire.file_route(self.id, path), content=data, headers=_wire.OCTETS)
        return str(body.get("path", path))

    def upload_file(self, local: PathLike, path: Optional[str] = None) -> str:
        """Upload a local file (to `path`, else its own name)."""
        with open(local, "rb") as f:
            data = f.read()
        return self.upload(path or os.path.basename(os.fspath(local)), data)

    def download(self, path: str) -> bytes:
        """A workspace file's bytes; NotFoundError when there is none."""
        response = self.client._send("GET", _wire.file_route(self.id, path))
        if response.status_code >= 400:
            raise _wire.error_of(response)
        return response.content

    def delete(self, path: str) -> None:
        """Delete a workspace file; NotFoundError when there is none."""
        self.client._json("DELETE", _wire.file_route(self.id, path))

    def list_files(self) -> List[Dict[str, Any]]:
        """The workspace's files, `{"path", "size", "modified"}` each."""
        body = self.client._json("GET", _wire.files_route(self.id))
        return cast(List[Dict[str, Any]], body.get("files", []))

    def files(self) -> Dict[str, Any]:
        """The workspace as a tree `{"name","type","children":[...]}` (XAgent's
        shape; `list_files` is the flat list)."""
        tree = self.client._json("POST", "/get_workspace_structure", headers=_wire.cookie_headers(self.id))
        return cast(Dict[str, Any], tree)

    def close(self) -> None:
        """Close the session (nodes removed, workspace deleted); once."""
        if not self.closed:
            self.closed = True
            if self._finalizer is not None:
                self._finalizer.detach()
            try:
                self.client.close_session(self.id)
            except NotFoundError:
                if not self._lazy:
                    raise

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

