"""What the client hands back: tools, call results and their content, progress."""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class Tool:
    """A tool of the catalogue. `category` is its toolkit (the plugin), `name`
    its name inside it, `tool_id` the id calls use (`calc_evaluate`).
    `input_schema` is the JSON Schema of its input, when it was asked for."""

    tool_id: str
    name: str
    category: str
    description: str
    status: str = "active"
    input_schema: Optional[Dict[str, Any]] = None

    @classmethod
    def from_summary(cls, item: Dict[str, Any], schema: Optional[Dict[str, Any]] = None) -> "Tool":
        return cls(
            tool_id=str(item["tool_id"]),
            name=str(item.get("name") or item["tool_id"]),
            category=str(item.get("category") or ""),
            description=str(item.get("description") or ""),
            status=str(item.get("status") or "active"),
            input_schema=schema if schema is not None else item.get("input_schema"),
        )


@dataclass(frozen=True)
class Content:
    """One item of a result: `text`, `json` or `binary` (bytes in `data`,
    with `media_type` and a file `name`)."""

    type: str
    text: Optional[str] = None
    json: Any = None
    data: Optional[bytes] = None
    media_type: Optional[str] = None
    name: Optional[str] = None

    @classmethod
    def from_wire(cls, item: Dict[str, Any]) -> "Content":
        kind = item.get("type")
        if kind == "text":
            return cls("text", text=str(item.get("text", "")))
        if kind == "json":
            return cls("json", json=item.get("json"))
        if kind == "binary":
            return cls(
                "binary",
                data=base64.b64decode(item.get("data") or ""),
                media_type=str(item.get("media_type") or "application/octet-stream"),
                name=item.get("name"),
            )
        # An item of a newer server: kept as JSON.
        return cls("json", json=item)

    @property
    def is_image(self) -> bool:
        return self.type == "binary" and (self.media_type or "").startswith("image/")

    def save(self, directory: str) -> str:
        """Write a binary item into `directory` (made if missing) under its
        own name; returns the absolute path."""
        if self.type != "binary":
            raise ValueError(f"a {self.type} item has no bytes to save")
        os.makedirs(directory, exist_ok=True)
        name = os.path.basename(self.name or "") or "result.bin"
        path = os.path.abspath(os.path.join(directory, name))
        with open(path, "wb") as f:
            f.write(self.data or b"")
        return path

    def as_text(self) -> str:
        """The item as text for a model: text as is, JSON compact, binary as a
        one-line note."""
        if self.type == "text":
            return self.text or ""
        if self.type == "json":
            return json.dumps(self.json, ensure_ascii=False)
        size = len(self.data or b"")
        return f"[{self.media_type} `{self.name}`, {size} bytes]"


@dataclass(frozen=True)
class Result:
    """A successful call: its `content` items, `value` (the server's
    convenient form: one text or JSON item as itself, else the items), the
    session it ran in, and the server's figures."""

    content: List[Content]
    value: Any = None
    session: Optional[str] = None
    elapsed_ms: Optional[float] = None
    fuel: Optional[int] = None
    version: Optional[str] = None

    @property
    def text(self) -> str:
        """Every item as text, one per line (see `Content.as_text`)."""
        return "\n".join(c.as_text() for c in self.content)

    @property
    def images(self) -> List[Content]:
        return [c for c in self.content if c.is_image]

    @property
    def binaries(self) -> List[Content]:
        return [c for c in self.content if c.type == "binary"]


@dataclass(frozen=True)
class Progress:
    """A progress report of a streamed call (`done` of `total`, either may be None)."""

    message: Optional[str] = None
    done: Optional[float] = None
    total: Optional[float] = None
    raw: Dict[str, Any] = field(default_factory=dict)
