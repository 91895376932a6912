"""Builds traces in the sandbox bridge's event format, for the learning unit tests."""

from __future__ import annotations

from typing import Any


class TraceBuilder:
    """Appends tool/capability start and end events with increasing timestamps."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._ts = 1_700_000_000.0
        self._n = 0

    def _tick(self) -> float:
        self._ts += 0.01
        return self._ts

    def tool(
        self, tool: str, *, ok: bool = True, parent: str | None = None, error: str = "boom"
    ) -> TraceBuilder:
        """One complete tool call (start then end)."""
        call_id = self.start_tool(tool, parent=parent)
        return self.end_tool(call_id, tool, ok=ok, parent=parent, error=error)

    def start_tool(self, tool: str, *, parent: str | None = None) -> str:
        self._n += 1
        call_id = f"t{self._n}"
        self.events.append(
            {
                "type": "tool_start",
                "call_id": call_id,
                "tool": tool,
                "parent": parent,
                "ts": self._tick(),
            }
        )
        return call_id

    def end_tool(
        self,
        call_id: str,
        tool: str,
        *,
        ok: bool = True,
        parent: str | None = None,
        error: str = "boom",
    ) -> TraceBuilder:
        self.events.append(
            {
                "type": "tool_end",
                "call_id": call_id,
                "tool": tool,
                "parent": parent,
                "ts": self._tick(),
                "duration_ms": 5.0,
                "ok": ok,
                "error": None if ok else {"type": "tool_error", "message": error},
            }
        )
        return self

    def capability(self, capability_id: str, *, parent: str | None = None) -> str:
        """Start an inline capability call; returns its id for nesting tool calls under it."""
        self._n += 1
        self.events.append(
            {
                "type": "capability_start",
                "call_id": f"c{self._n}",
                "capability_id": capability_id,
                "parent": parent,
                "ts": self._tick(),
            }
        )
        return capability_id

    def progress(self, message: str) -> TraceBuilder:
        self.events.append({"type": "progress", "message": message, "ts": self._tick()})
        return self
