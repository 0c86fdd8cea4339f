"""The HTTP shapes of toolhost, shared by the sync and async clients: request
bodies, answer parsing, errors, the SSE reader. No I/O here."""

from __future__ import annotations

import http.cookiejar
import json
import posixpath
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union
from urllib.parse import quote

import httpx

from .errors import InputRequiredError, ProtocolError, ToolhostConnectionError, ToolhostError, error_from_answer
from .types import Content, Progress, Result, Tool

SESSION_HEADER = "x-toolhost-session"
#: The XAgent session cookie; the workspace routes read the session from it.
COOKIE = "node_id"
DEFAULT_URL = "http://127.0.0.1:8001"

StreamEvent = Union[Progress, Result]


def base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"toolhost URL must start with http:// or https://: {url!r}")
    return url


def headers(token: Optional[str]) -> Dict[str, str]:
    h = {"accept": "application/json", "user-agent": "toolhost-client/0.1"}
    if token:
        h["authorization"] = f"Bearer {token}"
    return h


def no_cookies() -> http.cookiejar.CookieJar:
    """A jar that keeps nothing: sessions are named per request, never by a
    cookie the server set on an earlier answer."""
    return http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


def session_headers(session: Optional[str]) -> Dict[str, str]:
    h = {SESSION_HEADER: session} if session else {}
    h.update(trace_headers())
    return h


_propagate: Any = None


def trace_headers() -> Dict[str, str]:
    """The caller's trace context (W3C `traceparent`, `tracestate`) when
    OpenTelemetry is installed and a span is current: toolhost's spans of
    the call are then children of the caller's."""
    global _propagate
    if _propagate is None:
        try:
            from opentelemetry import propagate

            _propagate = propagate
        except ImportError:
            _propagate = False
    if not _propagate:
        return {}
    carrier: Dict[str, str] = {}
    _propagate.inject(carrier)
    return carrier


def cookie_headers(session: str) -> Dict[str, str]:
    return {"cookie": f"{COOKIE}={session}"}


def invoke_body(
    params: Optional[Mapping[str, Any]],
    limits: Optional[Mapping[str, Any]],
    input: Any = None,
) -> Dict[str, Any]:
    body: Dict[str, Any] = {"params": dict(params) if params is not None else {}}
    if limits:
        body["limits"] = dict(limits)
    if input is not None:
        body["input"] = input if isinstance(input, str) else dict(input)
    return body


def connection_error(url: str, exc: Exception) -> ToolhostConnectionError:
    if isinstance(exc, httpx.TimeoutException):
        what = f"no answer from toolhost at {url} in time ({type(exc).__name__})"
    else:
        what = f"cannot reach toolhost at {url}: {exc or type(exc).__name__}"
    return ToolhostConnectionError(what, url=url)


def unanswered(exc: Exception) -> bool:
    """A kept-alive connection the server closed as the request went out:
    nothing was read or answered, the request can be sent again. (A server
    may close a connection after an error answer, e.g. a 401 sent before the
    request's body was read; a client that reuses it at that moment sees this.)"""
    return isinstance(exc, httpx.RemoteProtocolError) and "without sending a response" in str(exc)


def error_of(response: httpx.Response, body: Any = None) -> ToolhostError:
    if body is None:
        try:
            body = response.json()
        except ValueError:
            body = response.text
    return error_from_answer(
        response.status_code,
        body,
        url=str(response.request.url),
        retry_after=response.headers.get("retry-after"),
    )


def json_of(response: httpx.Response) -> Any:
    """The JSON answer of a successful request, or the error it carries."""
    if response.status_code >= 400:
        raise error_of(response)
    try:
        return response.json()
    except ValueError:
        raise ProtocolError(
            f"toolhost answered {response.status_code} with a body that is not JSON: {response.text[:200]!r}",
            status=response.status_code,
            url=str(response.request.url),
        ) from None


def result_of(body: Any, session: Optional[str]) -> Result:
    if isinstance(body, dict) and body.get("status") == "input_required":
        asked = body.get("input_required") or {}
        raise InputRequiredError(list(asked.get("questions") or []), str(asked.get("state", "")), body)
    if not isinstance(body, dict) or body.get("status") != "success":
        raise ProtocolError(f"not a toolhost call result: {str(body)[:200]}")
    items = body.get("content") or []
    return Result(
        content=[Content.from_wire(i) for i in items if isinstance(i, dict)],
        value=body.get("result"),
        session=session,
        elapsed_ms=body.get("elapsed_ms"),
        fuel=body.get("fuel"),
        version=body.get("version"),
    )


def invoke_answer(response: httpx.Response) -> Result:
    body = json_of(response)
    return result_of(body, response.headers.get(SESSION_HEADER))


def tools_of(summary: Any, openai: Optional[Any] = None) -> List[Tool]:
    """`GET /tools` (+ `?format=openai` for the schemas) as `Tool`s."""
    schemas: Dict[str, Any] = {}
    if openai is not None:
        for t in openai.get("tools", []):
            f = t.get("function") or {}
            if "name" in f:
                schemas[f["name"]] = f.get("parameters")
    tools = []
    for item in summary.get("tools", []):
        if openai is not None and item.get("tool_id") not in schemas:
            continue  # unloaded between the two requests
        tools.append(Tool.from_summary(item, schemas.get(item.get("tool_id"))))
    return tools


def file_route(session: str, path: str) -> str:
    """The native route of workspace file `path` in `session`
    (`/sessions/{id}/files/{path}`)."""
    path = path.strip().lstrip("/")
    if not posixpath.basename(path):
        raise ValueError(f"file path {path!r} names no file")
    return f"/sessions/{quote(session, safe='')}/files/{quote(path, safe='/')}"


def files_route(session: str) -> str:
    """The native route of `session`'s file list."""
    return f"/sessions/{quote(session, safe='')}/files"


OCTETS = {"content-type": "application/octet-stream"}


def upload_parts(path: str, data: bytes) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """The multipart form of `/upload_file`: the file and its directory."""
    path = path.strip().lstrip("/")
    directory, name = posixpath.split(path)
    if not name:
        raise ValueError(f"upload path {path!r} names no file")
    files = {"file": (name, data, "application/octet-stream")}
    form = {"path": directory} if directory else {}
    return files, form


class SseReader:
    """Server-sent events, fed line by line: yields (event, data) pairs."""

    def __init__(self) -> None:
        self._event = "message"
        self._data: List[str] = []

    def feed(self, line: str) -> Optional[Tuple[str, str]]:
        line = line.rstrip("\r")
        if line == "":
            if not self._data:
                self._event = "message"
                return None
            out = (self._event, "\n".join(self._data))
            self._event, self._data = "message", []
            return out
        if line.startswith(":"):
            return None  # a comment (keep-alive)
        key, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if key == "event":
            self._event = value
        elif key == "data":
            self._data.append(value)
        return None


def stream_event(event: str, data: str, session: Optional[str], url: str) -> Optional[StreamEvent]:
    """One SSE event of a streamed call: Progress, a Result, or an error raised."""
    try:
        body = json.loads(data)
    except ValueError:
        raise ProtocolError(f"a streamed event that is not JSON: {data[:200]!r}", url=url) from None
    if event == "progress":
        chunk = body.get("chunk") or {}
        return Progress(
            message=chunk.get("message"),
            done=chunk.get("done"),
            total=chunk.get("total"),
            raw=chunk,
        )
    if event == "result":
        return result_of(body, session)
    if event == "error":
        error = body.get("error") or {}
        status = _STATUS_OF_KIND.get(str(error.get("kind")), 500)
        raise error_from_answer(status, body, url=url)
    return None


# The status the JSON answer would have had, for errors that arrive in a stream.
_STATUS_OF_KIND = {
    "not_found": 404,
    "invalid_input": 422,
    "timeout": 504,
    "overloaded": 429,
    "backend_unavailable": 503,
    "not_active": 409,
}


def search_tools(found: Any, tools: List[Tool]) -> List[Tool]:
    """`/retrieving_tools` as `Tool`s, in its order, joined with the listing."""
    by_id = {t.tool_id: t for t in tools}
    schemas = {t.get("name"): t.get("parameters") for t in found.get("tools_json", [])}
    out = []
    for tool_id in found.get("retrieved_tools", []):
        t = by_id.get(tool_id)
        if t is not None:
            out.append(
                Tool(t.tool_id, t.name, t.category, t.description, t.status, schemas.get(tool_id))
            )
    return out
