//! Tool sources the tests request builds of (seed 004's tasks).

/// A Python tool: `count` counts the words of a text.
pub const WORDCOUNT: &str = r#"
from toolhost_sdk import Toolkit, tool  # noqa: F401


@tool
def count(text: str) -> int:
    """Count the words of a text.

    Args:
        text: The text.
    """
    return len(text.split())
"#;
