"""Google-style docstrings: the summary becomes the tool's description, the
`Args:` section the parameters' descriptions.

    def word_count(text: str, top: int = 10):
        \"\"\"Count words in text.

        Args:
            text: The text to analyse.
            top (int): How many of the most frequent words
                to return.
        \"\"\"
"""

import inspect
import re
from typing import Dict, List, Tuple

_ARG_SECTIONS = {
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "kwargs",
}
_OTHER_SECTIONS = {
    "returns",
    "return",
    "yields",
    "yield",
    "raises",
    "example",
    "examples",
    "note",
    "notes",
    "see also",
    "warning",
    "warnings",
    "todo",
    "attributes",
    "references",
}
_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_PARAM = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_LIST_ITEM = re.compile(r"^(?:[-*+]\s|\d+[.)]\s)")


def parse(doc: str) -> Tuple[str, Dict[str, str]]:
    """Split a docstring into (description, {parameter: description})."""
    lines = inspect.cleandoc(doc or "").splitlines()
    desc: List[str] = []
    params: Dict[str, str] = {}
    section = None  # None: description; "args"; "other"
    current = None
    base_indent = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _HEADER.match(line)
        if header and indent == 0:
            name = header.group(1).strip().lower()
            if name in _ARG_SECTIONS or name in _OTHER_SECTIONS:
                section = "args" if name in _ARG_SECTIONS else "other"
                current, base_indent = None, None
                continue
        if section is not None and stripped and indent == 0:
            section = None  # text after a section, back at the margin
        if section is None:
            desc.append(line)
        elif section == "args" and stripped:
            if base_indent is None:
                base_indent = indent
            m = _PARAM.match(stripped)
            if m and indent <= base_indent:
                current = m.group(1)
                params[current] = m.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {stripped}".strip()
    return _unwrap(desc), {k: v for k, v in params.items() if v}


def _unwrap(lines: List[str]) -> str:
    """Join hard-wrapped lines of a paragraph; keep paragraphs and list items."""
    paragraphs: List[str] = []
    cur: List[str] = []
    for line in lines:
        s = line.strip()
        if not s:
            if cur:
                paragraphs.append("\n".join(cur))
                cur = []
        elif cur and not _LIST_ITEM.match(s) and not line.startswith(" "):
            cur[-1] = f"{cur[-1]} {s}"
        else:
            cur.append(line.rstrip() if line.startswith(" ") else s)
    if cur:
        paragraphs.append("\n".join(cur))
    return "\n\n".join(paragraphs).strip()
