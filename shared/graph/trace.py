"""Reading an execution trace: tool calls and capability calls, paired by ``call_id``, in start order.

The trace is recorded by the sandbox bridge (trusted side) as a list of events:

``{"type": "tool_start" | "tool_end" | "capability_start" | "capability_end" | "progress",
"call_id": str, "tool": "server:tool" (tool events), "capability_id": str (capability
events), "parent": capability id or None, "ts": float epoch seconds}``; ``_end`` events
add ``"duration_ms": float, "ok": bool, "error": {"type", "message"} or None``.

The per-execution ``tool_calls`` summary is ``[{"tool", "ok", "duration_ms", "error"}]``.
Unknown event types are ignored, so the bridge may add some without breaking learning.
The event type is read from ``type`` (what workers/sandbox/trace.py writes), or from
``event`` (traces stored by early builds), so either spelling teaches the graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

TraceEvent = Mapping[str, Any]
_Call = TypeVar("_Call", "ToolCall", "CapabilityCall")


@dataclass(frozen=True)
class ToolCall:
    """One tool call: ``ok`` is None when the trace has its start but no end (call lost)."""

    call_id: str
    tool: str
    parent: str | None
    ts: float | None
    ok: bool | None
    duration_ms: float | None
    error_type: str | None
    error_message: str | None


@dataclass(frozen=True)
class CapabilityCall:
    """One inline capability call, nested under ``parent`` (a capability id) or top level."""

    call_id: str
    capability_id: str
    parent: str | None
    ts: float | None


def tool_calls_from_trace(trace: Sequence[TraceEvent]) -> list[ToolCall]:
    """Every tool call in the trace, in start order; an end without a start still counts."""
    starts: dict[str, tuple[int, TraceEvent]] = {}
    ends: dict[str, TraceEvent] = {}
    for index, event in enumerate(trace):
        kind, call_id = event_type(event), event.get("call_id")
        if not isinstance(call_id, str) or not isinstance(event.get("tool"), str):
            continue
        if kind == "tool_start":
            starts.setdefault(call_id, (index, event))
        elif kind == "tool_end":
            ends[call_id] = event
            if call_id not in starts:
                starts[call_id] = (index, event)
    calls: list[tuple[int, ToolCall]] = []
    for call_id, (index, start) in starts.items():
        end = ends.get(call_id)
        error_type, error_message = _error(end.get("error") if end else None)
        ok = end.get("ok") if end is not None else None
        calls.append(
            (
                index,
                ToolCall(
                    call_id=call_id,
                    tool=str(start["tool"]),
                    parent=_parent(start),
                    ts=_float(start.get("ts")),
                    ok=None if ok is None else bool(ok),
                    duration_ms=_float(end.get("duration_ms")) if end else None,
                    error_type=error_type,
                    error_message=error_message,
                ),
            )
        )
    return [call for _, call in _start_order(calls)]


def tool_calls_from_summary(summary: Sequence[Mapping[str, Any]]) -> list[ToolCall]:
    """The ``tool_calls`` summary as ToolCalls (no parents: the summary does not keep them)."""
    calls: list[ToolCall] = []
    for index, item in enumerate(summary):
        if not isinstance(item.get("tool"), str):
            continue
        error_type, error_message = _error(item.get("error"))
        ok = item.get("ok")
        calls.append(
            ToolCall(
                call_id=str(item.get("call_id", index)),
                tool=item["tool"],
                parent=None,
                ts=None,
                ok=None if ok is None else bool(ok),
                duration_ms=_float(item.get("duration_ms")),
                error_type=error_type,
                error_message=error_message,
            )
        )
    return calls


def capability_calls_from_trace(trace: Sequence[TraceEvent]) -> list[CapabilityCall]:
    """Every inline capability call (``capability_start`` events), in start order."""
    calls: list[tuple[int, CapabilityCall]] = []
    seen: set[str] = set()
    for index, event in enumerate(trace):
        call_id, capability_id = event.get("call_id"), event.get("capability_id")
        if event_type(event) != "capability_start" or not isinstance(capability_id, str):
            continue
        key = call_id if isinstance(call_id, str) else f"#{index}"
        if key in seen:
            continue  # a duplicated event (bridge retry) is one call
        seen.add(key)
        calls.append(
            (
                index,
                CapabilityCall(
                    call_id=key,
                    capability_id=capability_id,
                    parent=_parent(event),
                    ts=_float(event.get("ts")),
                ),
            )
        )
    return [call for _, call in _start_order(calls)]


def event_type(event: TraceEvent) -> str | None:
    """The event's type under either key the recorders use (``type`` or ``event``)."""
    kind = event.get("type", event.get("event"))
    return kind if isinstance(kind, str) else None


def _start_order(items: list[tuple[int, _Call]]) -> list[tuple[int, _Call]]:
    # Timestamps order calls when every event has one (the list may be merged from
    # several buffers); otherwise the recording order is the best we have.
    if items and all(call.ts is not None for _, call in items):
        return sorted(items, key=lambda pair: (pair[1].ts, pair[0]))
    return sorted(items, key=lambda pair: pair[0])


def _parent(event: TraceEvent) -> str | None:
    parent = event.get("parent")
    return parent if isinstance(parent, str) and parent else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _error(error: Any) -> tuple[str | None, str | None]:
    """(type, message) from ``{type, message}``, a bare string (seed format) or None."""
    if error is None:
        return None, None
    if isinstance(error, Mapping):
        etype, message = error.get("type"), error.get("message")
        return (
            str(etype) if etype is not None else None,
            str(message) if message is not None else None,
        )
    return None, str(error)
