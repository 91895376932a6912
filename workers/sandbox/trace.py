"""Trace recorded on the trusted side: tool and inline-capability start/end events with ids, timings, outcome and parent.

Tool events are timed by the bridge. Capability calls run inside the child, so their
``ts`` and ``duration_ms`` are the child's measurements (same host clock), which the
bridge has validated and clamped to the execution's time span before recording.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

EventCallback = Callable[[dict[str, Any]], Awaitable[None] | None]


class TraceRecorder:
    """Collects trace events and forwards every event (progress included) to ``on_event``."""

    def __init__(self, on_event: EventCallback | None) -> None:
        self.events: list[dict[str, Any]] = []
        self._on_event = on_event
        self._started: dict[str, tuple[float, float]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def tool_start(self, call_id: str, tool: str, parent: str | None) -> None:
        """A call was received from the child (recorded before any check, so refused calls show too)."""
        now_wall, now_mono = time.time(), time.perf_counter()
        self._started[call_id] = (now_wall, now_mono)
        self._record(
            {
                "type": "tool_start",
                "call_id": call_id,
                "tool": tool,
                "parent": parent,
                "ts": now_wall,
            }
        )

    def tool_end(
        self, call_id: str, tool: str, parent: str | None, error: dict[str, Any] | None
    ) -> None:
        """The call finished (ok when ``error`` is None)."""
        _, started = self._started.pop(call_id, (0.0, time.perf_counter()))
        self._record(
            {
                "type": "tool_end",
                "call_id": call_id,
                "tool": tool,
                "parent": parent,
                "ts": time.time(),
                "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                "ok": error is None,
                "error": error,
            }
        )

    def capability_start(
        self, call_id: str, capability_id: str, name: str, parent: str | None, ts: float
    ) -> None:
        """An inline capability call began; ``parent`` is the enclosing capability id (None at top level)."""
        self._record(
            {
                "type": "capability_start",
                "call_id": call_id,
                "capability_id": capability_id,
                "name": name,
                "parent": parent,
                "ts": ts,
            }
        )

    def capability_end(
        self,
        call_id: str,
        capability_id: str,
        name: str,
        parent: str | None,
        *,
        ts: float,
        duration_ms: float,
        error: dict[str, Any] | None,
    ) -> None:
        """The inline capability call returned (ok when ``error`` is None) or raised."""
        self._record(
            {
                "type": "capability_end",
                "call_id": call_id,
                "capability_id": capability_id,
                "name": name,
                "parent": parent,
                "ts": ts,
                "duration_ms": round(duration_ms, 3),
                "ok": error is None,
                "error": error,
            }
        )

    def truncated(self, what: str, limit: int) -> None:
        """Past ``limit`` calls of kind ``what`` the trace stops recording them (learning ignores this event)."""
        self._record({"type": "trace_truncated", "what": what, "limit": limit, "ts": time.time()})

    def progress(self, message: str, done: float | None, total: float | None) -> None:
        """Forward a progress report (not part of the stored trace)."""
        self._emit(
            {
                "type": "progress",
                "message": message,
                "done": done,
                "total": total,
                "ts": time.time(),
            }
        )

    def _record(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self._emit(event)

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
            self._tasks.add(task)  # type: ignore[arg-type]
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)  # type: ignore[arg-type]
        if not task.cancelled() and task.exception() is not None:
            log.error("sandbox on_event callback failed: %r", task.exception())

    async def flush(self) -> None:
        """Wait for async callbacks still running (bounded: they must not hold the execution)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=1.0)
