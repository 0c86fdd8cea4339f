"""Client of toolhost, the tool server for LLM agents.

`Client` / `AsyncClient`: discovery, calls, streamed progress, sessions and
their workspace files; errors as one `ToolhostError` subclass per kind.
Adapters (each imports its framework only when imported):
`toolhost_client.lagent` (Lagent actions), `toolhost_client.qwen`
(Qwen-Agent tools), `toolhost_client.openai` (function calling).
"""

from .aio import AsyncClient, AsyncSession
from .client import Client, Session
from .errors import (
    ERRORS_BY_KIND,
    BackendUnavailableError,
    BuilderError,
    CallTimeoutError,
    ConflictError,
    ForbiddenError,
    InputRequiredError,
    InternalError,
    InvalidInputError,
    LimitError,
    NodeLostError,
    NotActiveError,
    NotFoundError,
    OutOfFuelError,
    OutOfMemoryError,
    OutputTooLargeError,
    OverBudgetError,
    OverloadedError,
    ProtocolError,
    RateLimitedError,
    ToolError,
    ToolhostConnectionError,
    ToolhostError,
    TrapError,
    UnauthorizedError,
)
from .types import Content, Progress, Result, Tool

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncSession",
    "BackendUnavailableError",
    "BuilderError",
    "CallTimeoutError",
    "Client",
    "ConflictError",
    "Content",
    "ERRORS_BY_KIND",
    "ForbiddenError",
    "InputRequiredError",
    "InternalError",
    "InvalidInputError",
    "LimitError",
    "NodeLostError",
    "NotActiveError",
    "NotFoundError",
    "OutOfFuelError",
    "OutOfMemoryError",
    "OutputTooLargeError",
    "OverBudgetError",
    "OverloadedError",
    "Progress",
    "ProtocolError",
    "RateLimitedError",
    "Result",
    "Session",
    "Tool",
    "ToolError",
    "ToolhostConnectionError",
    "ToolhostError",
    "TrapError",
    "UnauthorizedError",
]
