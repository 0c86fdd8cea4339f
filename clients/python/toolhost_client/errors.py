"""One exception class per error kind the server answers, under `ToolhostError`.

The server renders every failure as
`{"status":"error","result":null,"error":{"kind","message"[,"details"]}}` with
a status per kind (README, "Errors"); the XAgent routes the client uses for
workspace files answer `{"detail": message}`, mapped here by status.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Type


class ToolhostError(Exception):
    """Any failure of a toolhost call.

    `kind` is the server's error kind (`not_found`, `invalid_input`, ...),
    `status` the HTTP status (None when no answer came), `details` the
    server's list of schema violations, `body` the error body as sent.
    """

    kind: str = "error"

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        kind: Optional[str] = None,
        details: Sequence[str] = (),
        body: Any = None,
        url: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        if kind is not None:
            self.kind = kind
        self.details: List[str] = list(details)
        self.body = body
        self.url = url
        self.retry_after = retry_after

    def __str__(self) -> str:
        text = f"[{self.kind}] {self.message}"
        for d in self.details:
            text += f"\n- {d}"
        return text


class ToolhostConnectionError(ToolhostError):
    """No answer: the server is down, unreachable, or did not answer in time."""

    kind = "connection"


class ProtocolError(ToolhostError):
    """An answer that is not what toolhost sends (not JSON, a wrong shape)."""

    kind = "protocol"


class NotFoundError(ToolhostError):
    """404: an unknown tool (never loaded, or unloaded since it was listed),
    plugin, session, workspace file or route."""

    kind = "not_found"


class InvalidInputError(ToolhostError):
    """400 / 413 / 422: malformed JSON, a body over the size limit, input not
    matching the tool's schema (`details` lists the violations) or refused by
    the tool."""

    kind = "invalid_input"


class ToolError(ToolhostError):
    """500: the tool ran and failed."""

    kind = "tool_error"


class LimitError(ToolhostError):
    """A limit ended the call (its sandbox was thrown away)."""


class OutOfFuelError(LimitError):
    kind = "out_of_fuel"


class OutOfMemoryError(LimitError):
    kind = "out_of_memory"


class CallTimeoutError(LimitError):
    """504: the call ran past its time limit (kind `timeout`)."""

    kind = "timeout"


class TrapError(LimitError):
    kind = "trap"


class OutputTooLargeError(LimitError):
    kind = "output_too_large"


class OverloadedError(ToolhostError):
    """429 / 503: the plugin's concurrency slots and queue are full, or the
    server has too many sessions open (`retry_after` seconds)."""

    kind = "overloaded"


class BackendUnavailableError(ToolhostError):
    """503: the tool's backend is down (Docker engine, node image, an HTTP API
    or MCP server); wasm tools still answer."""

    kind = "backend_unavailable"


class NotActiveError(ToolhostError):
    """409: the tool exists but is not active (staging, inactive, building)."""

    kind = "not_active"


class ConflictError(ToolhostError):
    """409: a state change the resource refuses (admin routes, tasks)."""

    kind = "conflict"


class InternalError(ToolhostError):
    """500: the host failed; the details are in the server's log only."""

    kind = "internal"


class UnauthorizedError(ToolhostError):
    """401: no or wrong bearer token."""

    kind = "unauthorized"


class ForbiddenError(ToolhostError):
    """403: an admin route on a server with no admin token configured."""

    kind = "forbidden"


class RateLimitedError(ToolhostError):
    """429: the token's request rate is exceeded (`retry_after` seconds)."""

    kind = "rate_limited"


class OverBudgetError(ToolhostError):
    """422: a tool-building task over the server's budget."""

    kind = "over_budget"


class BuilderError(ToolhostError):
    """The tool builder failed."""

    kind = "builder_error"


class NodeLostError(ToolhostError):
    """503: the engine running the session's node died; the next call gets a
    fresh node on a live engine."""

    kind = "node_lost"


class InputRequiredError(ToolhostError):
    """The tool asks its caller for input mid-call (200, `status:
    input_required`). `questions` are what it asks (`key`, `kind`, `params`);
    call again with `input={"state": e.state, "answers": {key: answer}}`,
    or `input="none"` to tell the tool no input is available."""

    kind = "input_required"

    def __init__(self, questions: List[Any], state: str, body: Any = None) -> None:
        keys = ", ".join(str(q.get("key")) for q in questions if isinstance(q, dict))
        super().__init__(f"the tool asks for input: {keys}", status=200, body=body)
        self.questions = questions
        self.state = state


#: The class of each server error kind.
ERRORS_BY_KIND: Dict[str, Type[ToolhostError]] = {
    cls.kind: cls
    for cls in (
        NotFoundError,
        InvalidInputError,
        ToolError,
        OutOfFuelError,
        OutOfMemoryError,
        CallTimeoutError,
        TrapError,
        OutputTooLargeError,
        OverloadedError,
        BackendUnavailableError,
        NotActiveError,
        ConflictError,
        InternalError,
        UnauthorizedError,
        ForbiddenError,
        RateLimitedError,
        OverBudgetError,
        BuilderError,
        NodeLostError,
    )
}

# Answers without a kind (`{"detail": ...}` of the XAgent routes): by status.
_BY_STATUS: Dict[int, Type[ToolhostError]] = {
    400: InvalidInputError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: InvalidInputError,
    422: InvalidInputError,
    429: RateLimitedError,
    500: InternalError,
    503: BackendUnavailableError,
    504: CallTimeoutError,
}


def error_from_answer(
    status: int,
    body: Any,
    *,
    url: Optional[str] = None,
    retry_after: Optional[str] = None,
) -> ToolhostError:
    """The exception for an error answer: by the body's kind, else by status."""
    after: Optional[float] = None
    if retry_after is not None:
        try:
            after = float(retry_after)
        except ValueError:
            after = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("kind"), str):
        kind = error["kind"]
        cls = ERRORS_BY_KIND.get(kind, ToolhostError)
        details = error.get("details") or []
        return cls(
            str(error.get("message", "")),
            status=status,
            kind=kind,
            details=[str(d) for d in details] if isinstance(details, list) else [],
            body=body,
            url=url,
            retry_after=after,
        )
    if isinstance(body, dict) and "detail" in body:
        detail = body["detail"]
        message = detail if isinstance(detail, str) else str(detail)
    elif isinstance(body, str) and body:
        message = body
    else:
        message = f"HTTP {status}"
    cls = _BY_STATUS.get(status, ToolhostError)
    kind = cls.kind if cls is not ToolhostError else f"http_{status}"
    return cls(message, status=status, kind=kind, body=body, url=url, retry_after=after)
