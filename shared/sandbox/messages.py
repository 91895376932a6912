"""What the untrusted sandbox child may send the bridge: one slotted class and one validator per message type.

A validator checks a decoded frame's shape and returns the typed message, or raises
:class:`ProtocolViolation` (the run then ends as ``protocol_error``). Checks that need
the session's state (fresh ids, granted capabilities, open calls) are the bridge's.
Every value is type-checked before it is hashed or compared, so no frame can raise
anything but ``ProtocolViolation``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

from shared.errors import CHILD_ERRORS, ErrorType, error_dict

_MAX_TOOL_ID = 256
_MAX_URI = 8_192
_MAX_EVENTS_PER_FRAME = 4_096  # the child sends at most 256; more is a protocol error
_MAX_CAPABILITY_ERROR = 2_000
_MAX_ERROR_MESSAGE = 4_000
_MAX_TRACEBACK = 16_000  # the end is kept: it names the failing line
# An error's details (a syntax error's line and column, a bad result's path): a few
# scalars, each string capped; anything else from the child is dropped, not trusted.
_MAX_DETAILS = 8
_MAX_DETAIL_CHARS = 500


class ProtocolViolation(Exception):
    """Raised when a frame from the child is well-formed JSON but not a valid message."""


@dataclass(slots=True)
class ToolCallMessage:
    """``tool_call``: the child asks the bridge to call ``tool`` (reply keyed by ``id``)."""

    id: int
    tool: str
    args: dict[str, Any]
    parent: str | None  # the calling capability's id, as the child claims it


@dataclass(slots=True)
class ResourceReadMessage:
    """``resource_read``: the child asks to read ``uri`` from ``server`` (reply keyed by ``id``)."""

    id: int
    server: str
    uri: str


@dataclass(slots=True)
class StdoutMessage:
    """``stdout``: a chunk of what agent code printed."""

    data: str


@dataclass(slots=True)
class ProgressMessage:
    """``progress``: a report from ``progress(message, done, total)``."""

    message: str
    done: float | None
    total: float | None


@dataclass(slots=True)
class CapabilityStartMessage:
    """``["s", seq, name, parent name, ts µs]`` inside ``capability_events``."""

    seq: int
    name: str
    parent: str | None
    ts_us: float


@dataclass(slots=True)
class CapabilityEndMessage:
    """``["e", seq, duration µs, error]`` inside ``capability_events``."""

    seq: int
    duration_us: float
    error: dict[str, Any] | None  # normalised: a child error type, a bounded message


@dataclass(slots=True)
class CapabilityEventsMessage:
    """``capability_events``: a batch of capability starts and ends, in the child's order."""

    events: list[CapabilityStartMessage | CapabilityEndMessage]


@dataclass(slots=True)
class DoneMessage:
    """``done``: the code returned ``result`` (``ok``) or failed with ``error``."""

    ok: bool
    stdout_truncated: bool
    result: Any
    error: dict[str, Any] | None  # normalised: a child error type, bounded message and traceback


ChildMessage = (
    ToolCallMessage
    | ResourceReadMessage
    | StdoutMessage
    | ProgressMessage
    | CapabilityEventsMessage
    | DoneMessage
)


def parse(frame: dict[str, Any]) -> ChildMessage:
    """The typed message for a decoded frame; ProtocolViolation for an unknown op or a bad shape."""
    op = frame.get("op")
    validator = _VALIDATORS.get(op) if isinstance(op, str) else None
    if validator is None:
        raise ProtocolViolation(f"unknown op {str(op)[:40]!r}")
    return validator(frame)


def parse_tool_call(frame: dict[str, Any]) -> ToolCallMessage:
    """``{"op": "tool_call", "id": int, "tool": str, "args": {…}, "parent": str | null}``."""
    cid, tool, args = frame.get("id"), frame.get("tool"), frame.get("args")
    parent = frame.get("parent")
    if not _is_int(cid):
        raise ProtocolViolation("tool_call needs a fresh integer id")
    if not isinstance(tool, str) or len(tool) > _MAX_TOOL_ID or not isinstance(args, dict):
        raise ProtocolViolation("tool_call needs a tool id string and an args object")
    if parent is not None and not isinstance(parent, str):
        raise ProtocolViolation("tool_call parent must be null or a granted capability id")
    return ToolCallMessage(cid, tool, args, parent)


def parse_resource_read(frame: dict[str, Any]) -> ResourceReadMessage:
    """``{"op": "resource_read", "id": int, "server": str, "uri": str}``."""
    cid, server, uri = frame.get("id"), frame.get("server"), frame.get("uri")
    if not _is_int(cid):
        raise ProtocolViolation("resource_read needs a fresh integer id")
    if not isinstance(server, str) or len(server) > _MAX_TOOL_ID:
        raise ProtocolViolation("resource_read needs a server name string")
    if not isinstance(uri, str) or not 0 < len(uri) <= _MAX_URI:
        raise ProtocolViolation(f"resource_read needs a uri string of 1 to {_MAX_URI} characters")
    return ResourceReadMessage(cid, server, uri)


def parse_stdout(frame: dict[str, Any]) -> StdoutMessage:
    """``{"op": "stdout", "data": str}``."""
    data = frame.get("data")
    if not isinstance(data, str):
        raise ProtocolViolation("stdout data must be a string")
    return StdoutMessage(data)


def parse_progress(frame: dict[str, Any]) -> ProgressMessage:
    """``{"op": "progress", "message": str, "done": number | null, "total": number | null}``."""
    message, done, total = frame.get("message"), frame.get("done"), frame.get("total")
    if not isinstance(message, str) or not all(_is_number_or_none(v) for v in (done, total)):
        raise ProtocolViolation("progress needs a string message and numeric done/total")
    return ProgressMessage(message, done, total)


def parse_capability_events(frame: dict[str, Any]) -> CapabilityEventsMessage:
    """``{"op": "capability_events", "events": [["s", …] | ["e", …], …]}`` (1 to 4,096 events)."""
    events = frame.get("events")
    if not isinstance(events, list) or not 0 < len(events) <= _MAX_EVENTS_PER_FRAME:
        raise ProtocolViolation("capability_events needs a non-empty list of events")
    return CapabilityEventsMessage([_capability_event(event) for event in events])


def parse_capability_start(event: list[Any]) -> CapabilityStartMessage:
    """``["s", seq int, name str, parent name str | null, ts µs number]``."""
    _, seq, name, parent, ts_us = event
    if not _is_int(seq):
        raise ProtocolViolation("capability start needs a fresh increasing integer seq")
    if not isinstance(name, str):
        raise ProtocolViolation("capability start names a capability not granted")
    if parent is not None and not isinstance(parent, str):
        raise ProtocolViolation("capability parent must be null or a granted capability")
    if not _is_number(ts_us):
        raise ProtocolViolation("capability start needs a numeric timestamp")
    return CapabilityStartMessage(seq, name, parent, float(ts_us))


def parse_capability_end(event: list[Any]) -> CapabilityEndMessage:
    """``["e", seq int, duration µs number, error {type, message} | null]``."""
    _, seq, duration_us, err = event
    if not _is_int(seq):
        raise ProtocolViolation("capability end for a call that is not open")
    if not _is_number(duration_us):
        raise ProtocolViolation("capability end needs a numeric duration")
    if err is not None:
        if not isinstance(err, dict):
            raise ProtocolViolation("capability error must be an object or null")
        kind, message = err.get("type"), err.get("message")
        if not isinstance(kind, str) or not isinstance(message, str):
            raise ProtocolViolation("capability error needs string type and message")
        # A capability may raise anything; a type the child may not claim is a runtime error.
        kind = kind if kind in CHILD_ERRORS else ErrorType.RUNTIME_ERROR
        err = error_dict(kind, message[:_MAX_CAPABILITY_ERROR])
    return CapabilityEndMessage(seq, float(duration_us), err)


def parse_done(frame: dict[str, Any]) -> DoneMessage:
    """``{"op": "done", "ok": bool, "stdout_truncated": bool, "result": …}`` or ``"error"`` instead of result."""
    ok, truncated = frame.get("ok"), frame.get("stdout_truncated", False)
    if not isinstance(ok, bool) or not isinstance(truncated, bool):
        raise ProtocolViolation("done needs boolean ok and stdout_truncated")
    if ok:
        return DoneMessage(True, truncated, frame.get("result"), None)
    err = frame.get("error")
    kind = err.get("type") if isinstance(err, dict) else None
    if not isinstance(kind, str) or kind not in CHILD_ERRORS:
        raise ProtocolViolation("done needs an error with a known type")
    assert isinstance(err, dict)
    message, tb = err.get("message"), err.get("traceback")
    if not isinstance(message, str) or not (tb is None or isinstance(tb, str)):
        raise ProtocolViolation("error message and traceback must be strings")
    error = error_dict(
        kind,
        message[:_MAX_ERROR_MESSAGE],
        traceback=tb[-_MAX_TRACEBACK:] if tb else None,
        details=_details(err.get("details")),
    )
    return DoneMessage(False, truncated, None, error)


def _details(raw: Any) -> dict[str, str | int] | None:
    """The scalar details of a child's error (str keys; str or int values), bounded; else None."""
    if not isinstance(raw, dict):
        return None
    kept: dict[str, str | int] = {}
    for key, value in list(raw.items())[:_MAX_DETAILS]:
        if not isinstance(key, str) or len(key) > 64:
            continue
        if isinstance(value, str):
            kept[key] = value[:_MAX_DETAIL_CHARS]
        elif _is_int(value) and abs(value) < 1 << 53:
            kept[key] = value
    return kept or None


_VALIDATORS: dict[str, Callable[[dict[str, Any]], ChildMessage]] = {
    "tool_call": parse_tool_call,
    "resource_read": parse_resource_read,
    "capability_events": parse_capability_events,
    "stdout": parse_stdout,
    "progress": parse_progress,
    "done": parse_done,
}
# Capability events are positional lists: marker -> (length, validator).
_EVENT_VALIDATORS: dict[
    str, tuple[int, Callable[[list[Any]], CapabilityStartMessage | CapabilityEndMessage]]
] = {
    "s": (5, parse_capability_start),
    "e": (4, parse_capability_end),
}


def _capability_event(event: Any) -> CapabilityStartMessage | CapabilityEndMessage:
    marker = event[0] if isinstance(event, list) and event else None
    entry = _EVENT_VALIDATORS.get(marker) if isinstance(marker, str) else None
    if entry is None or len(event) != entry[0]:
        raise ProtocolViolation('capability events are ["s", 4 items] or ["e", 3 items]')
    return entry[1](event)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """A finite JSON number that converts to float (huge ints would overflow)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value.bit_length() <= 64
    return isinstance(value, float) and math.isfinite(value)


def _is_number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
