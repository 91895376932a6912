"""An execution's large parts read in pages: byte ranges of the result's JSON text and of stdout.

MCP clients cap one message (the Python SDK's streamable HTTP client refuses any server-sent
event over 1 MiB: ``DEFAULT_MAX_SSE_EVENT_SIZE`` in ``mcp/client/streamable_http.py``), so a
reply leaves a large part out and says where to read it: ``get_execution`` (or
``GET /v1/executions/{id}``) with ``part``, ``offset`` and ``max_bytes``. Offsets count bytes
of the part's UTF-8 text; a page never splits a character, and its ``next_offset`` is where the
next one starts (null at the end). The pages of ``result`` joined are its JSON text exactly,
so ``json.loads`` of them is the result.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import orjson
from pydantic import BaseModel, Field

from shared.errors import ValidationFailed

Part = Literal["result", "stdout", "tool_calls", "tool_failures"]
PARTS: tuple[str, ...] = get_args(Part)
PART_DESCRIPTION = (
    "read one part in pages: `result` (its JSON text), `stdout`, `tool_calls` or "
    "`tool_failures` (their JSON text); the reply's `page` holds the text and `next_offset`"
)


class OutputPage(BaseModel):
    """One page of a part of an execution."""

    part: Part
    offset: int = Field(description="the first byte of this page in the part's UTF-8 text")
    text: str = Field(
        description="the page; for result, tool_calls and tool_failures a slice of their JSON text"
    )
    next_offset: int | None = Field(
        description="where the next page starts; null: this is the last"
    )
    total_bytes: int = Field(description="the whole part's size in bytes")


class TruncatedPart(BaseModel):
    """A part of an execution that is not (or not all) in this reply."""

    part: Part
    total_bytes: int = Field(
        description="the whole part's size in bytes (result: of its JSON text)"
    )
    inline_bytes: int = Field(
        description="how many of its first bytes are in this reply (0: left out)"
    )
    next_offset: int = Field(
        description="read on from here with get_execution(part=..., offset=...)"
    )


class ReplyTruncation(BaseModel):
    """Why this reply is not the whole execution, and how to read the rest."""

    message: str
    max_bytes: int = Field(description="the reply size cap (AGENTCARDS_MCP_REPLY_MAX_BYTES)")
    parts: list[TruncatedPart]


def part_text(view: Any, part: str) -> str:
    """The part as text: stdout as printed, the others as their JSON text (compact)."""
    if part == "stdout":
        return str(view.stdout)
    value = getattr(view, part)
    if part != "result":
        value = [item.model_dump(mode="json") for item in value]
    return orjson.dumps(value).decode()


def page_of(text: str, *, part: Part, offset: int, max_bytes: int) -> OutputPage:
    """``max_bytes`` (at most) of ``text`` from byte ``offset``, cut before a split character."""
    data = text.encode()
    if offset < 0 or offset > len(data):
        raise ValidationFailed(
            f"offset {offset} is outside {part} (0 to {len(data)} bytes)", field="offset"
        )
    if offset < len(data) and _continuation(data[offset]):
        raise ValidationFailed(
            f"offset {offset} falls inside a character of {part}: start at 0 or at a "
            "page's next_offset",
            field="offset",
        )
    end = min(len(data), offset + max(4, max_bytes))  # 4: room for any one character
    while end < len(data) and _continuation(data[end]):
        end -= 1
    return OutputPage(
        part=part,
        offset=offset,
        text=data[offset:end].decode(),
        next_offset=end if end < len(data) else None,
        total_bytes=len(data),
    )


def _continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80
