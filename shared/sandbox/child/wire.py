"""Wire protocol between sandbox child and bridge: 4-byte big-endian length + one JSON object, decoded defensively.

Child -> bridge ops: hello, tool_call, capability_events, progress, stdout, done
(their shapes: shared/sandbox/messages.py). Bridge -> child ops: start, tool_result.
Stdlib only: the same module is imported inside the sandbox and by the trusted bridge.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
from collections.abc import Mapping
from json.encoder import encode_basestring  # C-accelerated; the ensure_ascii=False form
from typing import Any

HEADER = struct.Struct(">I")
# One encoder for every frame (json.dumps with options builds a new one per call).
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
# Deeper JSON than this is refused everywhere (tool args/results, results): the
# C decoder would otherwise recurse ~1000 levels and walkers would go quadratic.
MAX_DEPTH = 64
# Python 3.11 refuses int<->str conversions past 4300 digits; bounding bit length
# first keeps the walker from doing any conversion work on huge ints at all.
MAX_INT_BITS = 14_000


class WireError(Exception):
    """Raised when a frame or value breaks the protocol (bad JSON, wrong shape, too big)."""


class ValueTooLarge(WireError):
    """Raised when a JSON value is too large: over its byte budget (ValueOverBudget) or an integer too long."""


class ValueOverBudget(ValueTooLarge):
    """Raised when a JSON value's encoding is larger than ``max_bytes`` (a size limit, not a shape)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"larger than {max_bytes} bytes")
        self.max_bytes = max_bytes


class ValueTooDeep(WireError):
    """Raised when a JSON value nests deeper than MAX_DEPTH."""


def encode(msg: dict[str, Any]) -> bytes:
    """One frame for ``msg`` (must be JSON-serialisable)."""
    body = _dumps(msg).encode()
    return HEADER.pack(len(body)) + body


def encode_with(msg: Mapping[str, Any], raw: Mapping[str, str]) -> bytes:
    """One frame for ``msg`` plus the members of ``raw``, whose values are JSON text already
    (from :func:`dumps_bounded`): a big payload is copied into the frame, never re-encoded."""
    if not raw.keys().isdisjoint(msg.keys()):
        raise ValueError(f"members both encoded and raw: {sorted(set(raw) & set(msg))}")
    head = ",".join([f"{encode_basestring(k)}:{_member(v)}" for k, v in msg.items()])
    chunks = [b"{", head.encode()]
    sep = b"," if head else b""
    for key, text in raw.items():
        chunks += (sep, encode_basestring(key).encode(), b":", text.encode())
        sep = b","
    chunks.append(b"}")
    return b"".join([HEADER.pack(sum(map(len, chunks))), *chunks])


def _member(value: Any) -> str:
    """JSON text of one member value: scalars written as json writes them, anything else encoded."""
    kind = type(value)
    if kind is str:
        return encode_basestring(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    return _dumps(value)


def encode_value(value: Any) -> str:
    """Compact JSON text of a value already walked (by :func:`check_value` or the result check)."""
    return _dumps(value)


def utf8_size(text: str) -> int:
    """Bytes ``text`` takes as UTF-8, without encoding it when it is ASCII (O(1) in CPython)."""
    return len(text) if text.isascii() else len(text.encode())


def decode(body: bytes) -> dict[str, Any]:
    """Parse one frame body; anything but a JSON object within the depth cap is a WireError."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise WireError(f"frame is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(obj, dict):
        raise WireError("frame is not a JSON object")
    return obj


def check_value(value: Any, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> None:
    """Walk a decoded-or-native value without recursion, bounding depth, node count and size.

    Each node costs at least one encoded byte, so the walk is O(max_bytes) even for
    shared-reference "bombs" whose encoding would be exponential.
    """
    budget = max_bytes
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise ValueTooDeep(f"nested deeper than {max_depth} levels")
        if isinstance(item, str):
            budget -= len(item) + 2
        elif isinstance(item, bool) or item is None:
            budget -= 4
        elif isinstance(item, int):
            if item.bit_length() > MAX_INT_BITS:
                raise ValueTooLarge("integer too large to encode")
            budget -= 1
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise WireError("NaN and infinity are not JSON")
            budget -= 3
        elif isinstance(item, (list, tuple)):
            budget -= len(item) + 2
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, dict):
            budget -= 2 * len(item) + 2
            for key, child in item.items():
                if not isinstance(key, str):
                    raise WireError("object keys must be strings")
                budget -= len(key) + 2
                stack.append((child, depth + 1))
        else:
            raise WireError(f"{type(item).__name__} is not JSON")
        if budget < 0:
            raise ValueOverBudget(max_bytes)


def dumps_bounded(value: Any, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> str:
    """JSON text for ``value`` or a WireError; never spends more than O(max_bytes) work."""
    check_value(value, max_bytes=max_bytes, max_depth=max_depth)
    try:
        text = _dumps(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise WireError(f"not JSON-encodable: {str(exc)[:200]}") from None
    if utf8_size(text) > max_bytes:  # escapes can grow strings past the walker's estimate
        raise ValueOverBudget(max_bytes)
    return text


def loads_bounded(text: str | bytes, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """Decode untrusted JSON text (e.g. a remote tool's reply) within size and depth caps."""
    if len(text) > max_bytes:
        raise ValueOverBudget(max_bytes)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise WireError(f"not valid JSON: {str(exc)[:200]}") from None
    check_value(value, max_bytes=max_bytes * 2 + 64, max_depth=max_depth)
    return value


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> dict[str, Any] | None:
    """Next frame, None on a clean EOF between frames; WireError on a truncated or oversized one."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise WireError("connection closed inside a frame header") from None
        return None
    (size,) = HEADER.unpack(header)
    if size > max_bytes:
        raise WireError(f"frame of {size} bytes exceeds the {max_bytes}-byte cap")
    try:
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise WireError("connection closed inside a frame") from None
    return decode(body)


def write_all(fd: int, data: bytes) -> None:
    """Blocking write of a whole buffer (used before the event loop exists)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_frame_blocking(fd: int, max_bytes: int) -> dict[str, Any] | None:
    """Blocking read of one frame from a raw fd; None on EOF."""
    header = _read_exact(fd, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > max_bytes:
        raise WireError(f"frame of {size} bytes exceeds the {max_bytes}-byte cap")
    body = _read_exact(fd, size)
    if body is None:
        raise WireError("connection closed inside a frame")
    return decode(body)


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks: list[bytes] = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
