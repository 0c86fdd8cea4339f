"""my-plugin: a toolhost plugin template in Python (see README.md).

Each function decorated with @tool becomes a tool: its name is the function's,
its input schema comes from the type hints, its descriptions from the docstring.
Importing `Toolkit` is what exports the tools; keep that import.

Only modules imported at the top of this file (or by what it imports) exist
inside the component: import what the tools need here, not inside functions.
"""

from toolhost_sdk import Toolkit, ToolError, host, tool  # noqa: F401 - Toolkit is the export


@tool
def greet(name: str, excited: bool = False) -> str:
    """Greet someone by name.

    Args:
        name: Who to greet.
        excited: End with an exclamation mark instead of a full stop.
    """
    name = name.strip()
    if not name:
        raise ToolError.invalid_input("`name` is empty")
    greeting = host.config("greeting", "Hello")
    host.log("debug", f"greeting {name!r}")
    return f"{greeting}, {name}{'!' if excited else '.'}"
