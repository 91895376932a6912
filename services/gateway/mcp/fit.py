"""Every MCP reply fits what MCP clients accept, with headroom: large parts are left out, and said so.

The Python SDK's streamable HTTP client refuses a server-sent event over 1 MiB
(``DEFAULT_MAX_SSE_EVENT_SIZE`` in ``mcp/client/streamable_http.py``) and then never sees the
reply, not even the execution's id. A tool result carries the execution twice (the
structured content, and the same JSON as text, escaped once more), so the cap
(``AGENTCARDS_MCP_REPLY_MAX_BYTES``, 256 KiB by default) is measured on both. Over it, the
largest of result/tool_calls/tool_failures are left out whole (JSON cannot be cut and stay
JSON) and stdout keeps the prefix that fits; ``truncated`` names each part, its full size and
where to read on: ``get_execution`` with ``part``, ``offset`` and ``max_bytes``.
"""

from __future__ import annotations

from typing import Any

import orjson

from shared.executions.pages import Part, ReplyTruncation, TruncatedPart

# The JSON-RPC envelope and the SSE framing around the tool result (id, field names).
ENVELOPE_BYTES = 1024
_WHOLE_PARTS: tuple[Part, ...] = ("result", "tool_calls", "tool_failures")
_EMPTY: dict[str, Any] = {"result": None, "tool_calls": [], "tool_failures": [], "stdout": ""}
_ERROR_TEXT_BYTES = 16 << 10  # an error's message and traceback each, when nothing else helps


def reply_bytes(data: dict[str, Any]) -> int:
    """What a tool result carrying ``data`` costs on the wire: structured content + its JSON as text."""
    compact = orjson.dumps(data)
    return len(compact) + len(orjson.dumps(compact.decode())) + ENVELOPE_BYTES


def fits(data: dict[str, Any], max_bytes: int) -> bool:
    """``reply_bytes(data) <= max_bytes``, without escaping a copy that cannot fit anyway."""
    compact = orjson.dumps(data)
    if 2 * len(compact) + ENVELOPE_BYTES > max_bytes:  # the text copy is never smaller
        return False
    return len(compact) + len(orjson.dumps(compact.decode())) + ENVELOPE_BYTES <= max_bytes


def fit(data: dict[str, Any], *, max_bytes: int, execution_id: str) -> dict[str, Any]:
    """``data`` (an ExecutionView dumped as JSON) as it may go in one reply of ``max_bytes``."""
    if fits(data, max_bytes):
        return data
    fitted = {**data, "stdout": ""}
    left_out: list[TruncatedPart] = []
    sizes = {part: len(orjson.dumps(data[part])) for part in _WHOLE_PARTS}
    for part in sorted(_WHOLE_PARTS, key=lambda p: -sizes[p]):  # the largest goes first
        if fits(_marked(fitted, left_out, max_bytes, execution_id), max_bytes):
            break
        if data[part] not in (None, []):
            fitted[part] = _EMPTY[part]
            left_out.append(
                TruncatedPart(part=part, total_bytes=sizes[part], inline_bytes=0, next_offset=0)
            )
    if not fits(_marked(fitted, left_out, max_bytes, execution_id), max_bytes):
        fitted["error"] = _clipped_error(fitted.get("error"))
    stdout = str(data.get("stdout") or "")
    if stdout:
        total = len(stdout.encode())
        stdout_entry = TruncatedPart(
            part="stdout", total_bytes=total, inline_bytes=total, next_offset=total
        )
        prefix = _longest_prefix(fitted, left_out, stdout_entry, stdout, max_bytes, execution_id)
        if prefix != stdout:
            inline = len(prefix.encode())
            stdout_entry.inline_bytes = stdout_entry.next_offset = inline
            left_out.append(stdout_entry)
        fitted["stdout"] = prefix
    return _marked(fitted, left_out, max_bytes, execution_id)


def _longest_prefix(
    fitted: dict[str, Any],
    left_out: list[TruncatedPart],
    entry: TruncatedPart,
    stdout: str,
    max_bytes: int,
    execution_id: str,
) -> str:
    """The longest prefix of ``stdout`` with which the reply (marked as cut) still fits."""

    def fits_with(n: int) -> bool:
        marks = left_out if n == len(stdout) else [*left_out, entry]
        marked = _marked({**fitted, "stdout": stdout[:n]}, marks, max_bytes, execution_id)
        return fits(marked, max_bytes)

    if fits_with(len(stdout)):
        return stdout
    # fits_with(low) holds (an empty stdout always fits by now); a character costs at least
    # two bytes (structured and text copy), so no longer prefix than max_bytes / 2 can fit.
    low, high = 0, min(len(stdout), max_bytes // 2 + 1)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits_with(middle) else (low, middle)
    return stdout[:low]


def _marked(
    fitted: dict[str, Any], left_out: list[TruncatedPart], max_bytes: int, execution_id: str
) -> dict[str, Any]:
    if not left_out:
        return {**fitted, "truncated": None}
    cut = "; ".join(
        f"{p.part} ({p.total_bytes} bytes) left out"
        if p.inline_bytes == 0
        else f"{p.part}: the first {p.inline_bytes} of {p.total_bytes} bytes inline"
        for p in left_out
    )
    first = left_out[0]
    message = (
        f"this reply was cut to fit MCP clients' message size (AGENTCARDS_MCP_REPLY_MAX_BYTES="
        f"{max_bytes}): {cut}. Read the rest in pages with get_execution(execution_id="
        f"{execution_id!r}, part={first.part!r}, offset={first.next_offset}, max_bytes=...) and "
        "continue from each page's next_offset until it is null; the result's pages joined "
        f"are its JSON text. Over REST: GET /v1/executions/{execution_id} (whole, or "
        "?part=&offset=&max_bytes=)."
    )
    truncation = ReplyTruncation(message=message, max_bytes=max_bytes, parts=left_out)
    return {**fitted, "truncated": truncation.model_dump(mode="json")}


def _clipped_error(error: dict[str, Any] | None) -> dict[str, Any] | None:
    if not error:
        return error
    clipped = dict(error)
    for key in ("message", "traceback"):
        text = clipped.get(key)
        if isinstance(text, str) and len(text.encode()) > _ERROR_TEXT_BYTES:
            head = text.encode()[:_ERROR_TEXT_BYTES].decode(errors="ignore")
            clipped[key] = f"{head}… [cut: {len(text.encode())} bytes in all]"
    return clipped


def clip_text(text: str, *, max_bytes: int, rest: str) -> str:
    """``text`` cut to about ``max_bytes`` (UTF-8), saying how long it was and where the rest is."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    head = data[:max_bytes].decode(errors="ignore")
    return f"{head}… [cut here: {len(data)} bytes in all; {rest}]"
