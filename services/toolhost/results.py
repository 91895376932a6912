"""Turn an MCP ``CallToolResult`` into the plain value sandbox code receives."""

from __future__ import annotations

from typing import Any

import orjson
from mcp import types


def tool_value(result: types.CallToolResult, *, output_schema: dict[str, Any] | None) -> Any:
    """Structured content when the server gives it (unwrapped), else the content blocks."""
    structured = result.structured_content
    if structured is not None:
        return _unwrap(structured, output_schema)
    blocks = result.content
    if all(isinstance(b, types.TextContent) for b in blocks):
        texts = [b.text for b in blocks if isinstance(b, types.TextContent)]
        if len(texts) == 1:
            return _maybe_json(texts[0])
        return texts
    return [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in blocks]


def error_text(result: types.CallToolResult) -> str:
    """The error message a server put in an ``isError`` result."""
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    return "\n".join(texts) or "the tool reported an error without a message"


def _unwrap(structured: dict[str, Any], output_schema: dict[str, Any] | None) -> Any:
    # SDK servers wrap a non-object return value as {"result": value} and declare an output
    # schema whose only property is "result"; a tool really returning {"result": ...} under
    # a richer schema keeps its object.
    props = (output_schema or {}).get("properties")
    if set(structured) == {"result"} and isinstance(props, dict) and set(props) == {"result"}:
        return structured["result"]
    return structured


def _maybe_json(text: str) -> Any:
    # Many servers (e.g. mcp-server-time, server-memory) return JSON documents as text; give
    # code the object. Bare scalars stay strings: "007" must not become 7.
    stripped = text.lstrip()
    if stripped[:1] in {"{", "["}:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
    return text
