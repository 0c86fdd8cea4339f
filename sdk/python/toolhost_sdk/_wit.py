"""The bridge to the WIT bindings that componentize-py generates.

Inside a component (and while componentize-py pre-initialises it at build time)
the package `wit_world` exists: it holds the generated types of the WIT package
`toolhost:plugin@0.1.0`, the host imports and the `Toolkit` protocol the exported
class implements. Outside a component (plain CPython: unit tests, `python -m
toolhost_sdk`) it does not, and small stand-ins with the same shape take its
place, so tools can be tried without building anything.
"""

from dataclasses import dataclass
from enum import Enum
from typing import Optional

try:
    from componentize_py_types import Err
    from wit_world import exports as _exports
    from wit_world.imports import host as wit_host
    from wit_world.imports import types as wit_types

    IN_COMPONENT = True
    ToolkitBase = _exports.Toolkit
except ImportError:  # plain CPython
    IN_COMPONENT = False
    wit_host = None
    ToolkitBase = object

    @dataclass(frozen=True)
    class Err(Exception):  # noqa: N818 - the name componentize-py uses
        """The error case of a WIT `result` (stand-in)."""

        value: object

    class _Types:
        """Stand-ins for the generated `wit_world.imports.types`."""

        @dataclass
        class ToolInfo:
            name: str
            description: str
            input_schema: str
            output_schema: Optional[str]

        @dataclass
        class Binary:
            media_type: str
            data: bytes
            name: Optional[str]

        @dataclass
        class Content_Text:  # noqa: N801
            value: str

        @dataclass
        class Content_Json:  # noqa: N801
            value: str

        @dataclass
        class Content_Binary:  # noqa: N801
            value: "_Types.Binary"

        @dataclass
        class ToolError_InvalidInput:  # noqa: N801
            value: str

        @dataclass
        class ToolError_Failed:  # noqa: N801
            value: str

        class LogLevel(Enum):
            TRACE = 0
            DEBUG = 1
            INFO = 2
            WARN = 3
            ERROR = 4

        @dataclass
        class Progress:
            message: str
            done: Optional[float]
            total: Optional[float]

    wit_types = _Types
