"""An execution's trace: the event types, the recorder the sandbox bridge writes with, the reader learning and the API use.

Stored as a JSON list in ``executions.trace``: one object per event, its kind under
``"type"`` (:class:`EventType`) and the fields of its class below. ``progress`` events
are forwarded live but never stored. Tool events are timed by the bridge. Capability
calls run inside the child, so their ``ts`` and ``duration_ms`` are the child's
measurements (same host clock), validated and clamped by the bridge before recording.

Reading is lenient: rows stored by older builds may miss fields, and unknown event types
are ignored (the recorder may add kinds without breaking learning).

This module is the only decoder of a stored trace. ``finish_execution`` stores its
:class:`TraceSummary` (``executions.trace_summary``) beside it, and every reader (the API
view, audit, the result cache, learning, graph edges) takes that through :func:`summary_of`,
which decodes the raw trace only for rows stored before the summary existed.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from shared.errors import ErrorType

log = logging.getLogger(__name__)


class EventType(StrEnum):
    """The ``type`` of a trace event."""

    TOOL_START = "tool_start"  # recorded before any check, so refused calls show too
    TOOL_END = "tool_end"
    CAPABILITY_START = "capability_start"
    CAPABILITY_END = "capability_end"
    TRACE_TRUNCATED = "trace_truncated"  # past a cap, calls stop being recorded
    PROGRESS = "progress"  # forwarded live, not stored
    APPROVAL = "approval"  # a call paused for a person's answer, and the answer


class _Event:
    """Base of the event classes: ``as_dict`` is the event's stored JSON object."""

    __slots__ = ()
    kind: ClassVar[EventType]

    def as_dict(self) -> dict[str, Any]:
        """``{"type": kind, <fields in order>}``."""
        out: dict[str, Any] = {"type": self.kind.value}
        names: tuple[str, ...] = self.__slots__  # a slotted dataclass's fields, in order
        for name in names:
            out[name] = getattr(self, name)
        return out


@dataclass(slots=True)
class ToolStart(_Event):
    """A tool call was received from the child."""

    kind: ClassVar[EventType] = EventType.TOOL_START
    call_id: str
    tool: str
    parent: str | None  # the enclosing capability id, None at top level
    ts: float  # epoch seconds


@dataclass(slots=True)
class CapabilityStart(_Event):
    """An inline capability call began."""

    kind: ClassVar[EventType] = EventType.CAPABILITY_START
    call_id: str
    capability_id: str
    name: str
    parent: str | None
    ts: float


_END_OF = {
    EventType.TOOL_START: EventType.TOOL_END,
    EventType.CAPABILITY_START: EventType.CAPABILITY_END,
}


@dataclass(slots=True)
class CallEnd:
    """A tool or capability call finished, ok when ``error`` is None: ``tool_end`` or ``capability_end``.

    Stored as its start's fields with ``type`` and ``ts`` replaced, plus ``duration_ms``,
    ``ok`` and ``error``.
    """

    start: ToolStart | CapabilityStart
    ts: float
    duration_ms: float
    error: dict[str, Any] | None  # shared.errors.error_dict

    @property
    def kind(self) -> EventType:
        """``tool_end`` or ``capability_end``."""
        return _END_OF[self.start.kind]

    def as_dict(self) -> dict[str, Any]:
        """The stored JSON object."""
        out = self.start.as_dict()
        out["type"], out["ts"] = self.kind.value, self.ts
        out["duration_ms"], out["ok"], out["error"] = (
            self.duration_ms,
            self.error is None,
            self.error,
        )
        return out


@dataclass(slots=True)
class TraceTruncated(_Event):
    """Past ``limit`` calls of kind ``what`` the trace stops recording them (learning ignores it)."""

    kind: ClassVar[EventType] = EventType.TRACE_TRUNCATED
    what: str
    limit: int
    ts: float


@dataclass(slots=True)
class Progress(_Event):
    """A progress report from agent code (forwarded, not stored)."""

    kind: ClassVar[EventType] = EventType.PROGRESS
    message: str
    done: float | None
    total: float | None
    ts: float


@dataclass(slots=True)
class Approval(_Event):
    """A call waits for approval (``pending``), or its answer came (``approved``, ``denied``,
    ``expired``): who answered and why when known (the audit log has it always)."""

    kind: ClassVar[EventType] = EventType.APPROVAL
    call_id: str
    tool: str
    status: str
    by: str | None
    reason: str | None
    ts: float


Event = ToolStart | CapabilityStart | CallEnd | TraceTruncated | Progress | Approval
EventCallback = Callable[[dict[str, Any]], Awaitable[None] | None]


class TraceRecorder:
    """Collects an execution's events (``events``, the stored JSON) and forwards every one, progress included, to ``on_event``."""

    def __init__(self, on_event: EventCallback | None) -> None:
        self.events: list[dict[str, Any]] = []
        self._on_event = on_event
        self._started: dict[str, tuple[ToolStart, float]] = {}  # call id -> start, perf_counter
        self._tasks: set[asyncio.Future[Any]] = set()

    def tool_start(self, call_id: str, tool: str, parent: str | None) -> None:
        """A call was received from the child (recorded before any check, so refused calls show too)."""
        start = ToolStart(call_id, tool, parent, time.time())
        self._started[call_id] = (start, time.perf_counter())
        self.record(start)

    def tool_end(self, call_id: str, error: dict[str, Any] | None) -> None:
        """The call ``call_id`` finished (ok when ``error`` is None); timed from its ``tool_start``."""
        start, started = self._started.pop(call_id)
        duration_ms = (time.perf_counter() - started) * 1000
        self.end(start, ts=time.time(), duration_ms=duration_ms, error=error)

    def end(
        self,
        start: ToolStart | CapabilityStart,
        *,
        ts: float,
        duration_ms: float,
        error: dict[str, Any] | None,
    ) -> None:
        """The call ``start`` recorded ended at ``ts`` (for capabilities the child's clock, already clamped)."""
        self.record(CallEnd(start, ts, round(duration_ms, 3), error))

    def record(self, event: Event) -> None:
        """Store ``event`` (progress is only forwarded) and forward it."""
        data = event.as_dict()
        if event.kind is not EventType.PROGRESS:
            self.events.append(data)
        self._emit(data)

    def _emit(self, event: dict[str, Any]) -> None:
        if self._on_event is None:
            return
        try:
            result = self._on_event(dict(event))
        except Exception:
            log.exception("sandbox on_event callback failed")
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("sandbox on_event callback failed: %r", task.exception())

    async def flush(self) -> None:
        """Wait for async callbacks still running (bounded: they must not hold the execution)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=1.0)


# Reading ------------------------------------------------------------------------------

TraceEvent = Mapping[str, Any]  # one event as stored: its shape is not trusted
# What a lost call (start recorded, no end) reports: the bridge never got an answer.
LOST_CALL_MESSAGE = "no result recorded for this call (lost or cut off by the deadline)"
# Bumped when the stored summary's shape changes: an older one is recomputed from its trace.
SUMMARY_VERSION = 1
_Call = TypeVar("_Call", "ToolCall", "CapabilityCall")


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class CapabilityCall:
    """One inline capability call, nested under ``parent`` (a capability id) or top level."""

    call_id: str
    capability_id: str
    parent: str | None
    ts: float | None


def event_type(event: TraceEvent) -> str | None:
    """The event's ``type``, None when it has none."""
    kind = event.get("type")
    return kind if isinstance(kind, str) else None


def replay(trace: Sequence[TraceEvent] | None) -> list[tuple[str, TraceEvent]]:
    """A stored trace as the events a late subscriber is shown: each with its type (``event``
    when it has none), in order; for the SSE replay of a run whose event log expired."""
    return [(event_type(event) or "event", event) for event in trace or []]


def _tool_calls(trace: Sequence[TraceEvent]) -> list[ToolCall]:
    """Every tool call in the trace, in start order; an end without a start still counts."""
    starts: dict[str, tuple[int, TraceEvent]] = {}
    ends: dict[str, TraceEvent] = {}
    for index, event in enumerate(trace):
        kind, call_id = event_type(event), event.get("call_id")
        if not isinstance(call_id, str) or not isinstance(event.get("tool"), str):
            continue
        if kind == EventType.TOOL_START:
            starts.setdefault(call_id, (index, event))
        elif kind == EventType.TOOL_END:
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


def _capability_calls(trace: Sequence[TraceEvent]) -> list[CapabilityCall]:
    """Every inline capability call (``capability_start`` events), in start order."""
    calls: list[tuple[int, CapabilityCall]] = []
    seen: set[str] = set()
    for index, event in enumerate(trace):
        call_id, capability_id = event.get("call_id"), event.get("capability_id")
        if event_type(event) != EventType.CAPABILITY_START or not isinstance(capability_id, str):
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


# The summary -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """What every reader needs of one trace, decoded once: stored as ``executions.trace_summary``."""

    tool_calls: tuple[ToolCall, ...] = ()  # in start order, lost calls (ok None) included
    capability_calls: tuple[CapabilityCall, ...] = ()  # in start order
    truncated: bool = False  # past a cap calls went unrecorded: the list is not every call
    # Tools whose calls waited for a person's approval (``approval`` events), first seen first.
    approval_tools: tuple[str, ...] = ()

    @property
    def failures(self) -> list[dict[str, Any]]:
        """The response's ``tool_failures``: ``[{"tool", "error", "type"}]``, one per failed call.

        Each names the tool and its error (``{"tool": "gmail:get_profile", "error": "MCP
        server not connected"}``); ``type`` (the structured error type, or None) lets agents
        tell a timeout from a refusal; a lost call is ``lost`` with LOST_CALL_MESSAGE.
        """
        out: list[dict[str, Any]] = []
        for call in self.tool_calls:
            if call.ok:
                continue
            if call.ok is None:
                out.append({"tool": call.tool, "error": LOST_CALL_MESSAGE, "type": ErrorType.LOST})
            else:
                message = call.error_message or call.error_type or "tool call failed"
                out.append({"tool": call.tool, "error": message, "type": call.error_type})
        return out

    def as_dict(self) -> dict[str, Any]:
        """The stored JSON object (``SUMMARY_VERSION`` under ``v``)."""
        return {
            "v": SUMMARY_VERSION,
            "truncated": self.truncated,
            "tool_calls": [_fields(call) for call in self.tool_calls],
            "capability_calls": [_fields(call) for call in self.capability_calls],
            "approval_tools": list(self.approval_tools),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceSummary:
        """A summary stored by :meth:`as_dict` (of this ``SUMMARY_VERSION``)."""
        return cls(
            tool_calls=tuple(ToolCall(**call) for call in data.get("tool_calls") or ()),
            capability_calls=tuple(
                CapabilityCall(**call) for call in data.get("capability_calls") or ()
            ),
            truncated=bool(data.get("truncated")),
            approval_tools=tuple(str(tool) for tool in data.get("approval_tools") or ()),
        )


def summarize(trace: Sequence[TraceEvent]) -> TraceSummary:
    """Decode a raw trace into its summary (what ``finish_execution`` stores)."""
    return TraceSummary(
        tool_calls=tuple(_tool_calls(trace)),
        capability_calls=tuple(_capability_calls(trace)),
        truncated=any(event_type(e) == EventType.TRACE_TRUNCATED for e in trace),
        approval_tools=tuple(
            dict.fromkeys(
                str(e["tool"])
                for e in trace
                if event_type(e) == EventType.APPROVAL and isinstance(e.get("tool"), str)
            )
        ),
    )


def summary_of(source: Mapping[str, Any] | Sequence[TraceEvent]) -> TraceSummary:
    """The summary of an ``executions`` row, or of a raw trace (a run still in memory).

    A row's stored ``trace_summary`` is used as is; a row stored before migration 0017
    (or with an older ``SUMMARY_VERSION``) has its raw ``trace`` decoded instead: no backfill,
    so old rows cost one decode per read, as they always did.
    """
    if not isinstance(source, Mapping):
        return summarize(source)
    stored = source.get("trace_summary")
    if isinstance(stored, Mapping) and stored.get("v") == SUMMARY_VERSION:
        return TraceSummary.from_dict(stored)
    return summarize(source.get("trace") or [])


def _fields(call: ToolCall | CapabilityCall) -> dict[str, Any]:
    names: tuple[str, ...] = call.__slots__  # a slotted dataclass's fields, in order
    return {name: getattr(call, name) for name in names}
