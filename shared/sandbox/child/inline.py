"""Inline capabilities: a capability call is a plain function call in the child, with a call chain and batched trace events.

Each ``capabilities.<name>(**kwargs)`` binds the capability's compiled body (compiled
once per execution) to fresh globals and awaits it: no RPC. The chain of running
capabilities lives in a context variable, so it follows ``await`` and is copied
into tasks (``asyncio.gather`` inside a capability keeps the right parent). Start
and end events are buffered and sent as one ``capability_events`` frame before any
other frame (tool call, progress, done), so the bridge records them in order.

Event encoding (lists of ints and short strings: float formatting alone would
triple the JSON cost): ``["s", seq, name, parent_name | None, epoch_us]`` and
``["e", seq, duration_us, None | {"type", "message"}]``.
"""

from __future__ import annotations

import contextvars
import time
import types
from collections.abc import Callable, Mapping
from typing import Any

from shared.errors import ErrorType, error_dict
from shared.sandbox.child import api, usercode

# Nesting beyond 8 capabilities is runaway recursion in practice (the learned graphs
# show chains of 2-3); a low limit also keeps tracebacks and traces readable.
MAX_DEPTH = 8
# One frame per 256 events amortises JSON encoding and the write syscall to well
# under a microsecond per call; the time bound keeps live observers (SSE) current.
_FLUSH_EVENTS = 256
_FLUSH_NS = 50_000_000
_ERROR_MESSAGE_CHARS = 500  # per end event; the full error still reaches the result

_Chain = tuple[str, ...]


class InlineCapabilities:
    """Runs granted capabilities by name; knows the innermost running one for tool-call parents."""

    def __init__(
        self,
        specs: Mapping[str, Mapping[str, str]],
        send: Callable[[dict[str, Any]], None],
        sources: dict[str, list[str]],
    ) -> None:
        self._codes = {name: str(spec.get("code", "")) for name, spec in specs.items()}
        self._ids = {name: str(spec.get("id") or name) for name, spec in specs.items()}
        self._compiled: dict[str, types.CodeType] = {}
        self._send = send
        self._sources = sources
        self._chain: contextvars.ContextVar[_Chain] = contextvars.ContextVar(
            "agentcards_capability_chain", default=()
        )
        self._events: list[list[Any]] = []
        self._flushed_at = time.perf_counter_ns()
        self._seq = 0

    def names(self) -> list[str]:
        """Capability names granted to this execution."""
        return list(self._codes)

    def parent_id(self) -> str | None:
        """Id of the innermost capability running in the current context (None at top level)."""
        chain = self._chain.get()
        return self._ids[chain[-1]] if chain else None

    async def run(self, name: str, kwargs: dict[str, Any], base: Mapping[str, Any]) -> Any:
        """Run capability ``name`` with ``args`` = ``kwargs``; ``base`` holds mcp/capabilities/progress."""
        chain = self._chain.get()
        if name in chain:
            path = " -> ".join((*chain, name))
            raise api.CapabilityCycleError(f"capability cycle: {path}")
        if len(chain) >= MAX_DEPTH:
            path = " -> ".join((*chain, name))
            raise api.CapabilityDepthError(
                f"capability depth limit of {MAX_DEPTH} exceeded: {path}"
            )
        self._seq += 1
        seq = self._seq
        self._events.append(["s", seq, name, chain[-1] if chain else None, time.time_ns() // 1000])
        t0 = time.perf_counter_ns()
        token = self._chain.set((*chain, name))
        try:
            code = self._compiled.get(name) or self._compile(name)
            namespace = dict(base)
            namespace["args"] = api.wrap_args(kwargs)
            result = await types.FunctionType(code, namespace)()
        except BaseException as exc:
            self._end(seq, t0, _error(exc))
            raise
        finally:
            self._chain.reset(token)
        self._end(seq, t0, None)
        return result

    def flush(self) -> None:
        """Send buffered events (called before every other frame, and when the buffer fills)."""
        self._flushed_at = time.perf_counter_ns()
        if self._events:
            events, self._events = self._events, []
            self._send({"op": "capability_events", "events": events})

    def _end(self, seq: int, t0: int, error: dict[str, Any] | None) -> None:
        t1 = time.perf_counter_ns()
        self._events.append(["e", seq, (t1 - t0) // 1000, error])
        if len(self._events) >= _FLUSH_EVENTS or t1 - self._flushed_at > _FLUSH_NS:
            self.flush()

    def _compile(self, name: str) -> types.CodeType:
        filename = usercode.capability_filename(name)
        source = self._codes[name]
        self._sources[filename] = source.splitlines()
        code = usercode.compile_code(source, filename)
        self._compiled[name] = code
        return code


def _error(exc: BaseException) -> dict[str, Any]:
    kind: str = ErrorType.RUNTIME_ERROR
    if isinstance(exc, (api.ToolCallError, api.CapabilityError)):
        kind = exc.type
    elif isinstance(exc, MemoryError):
        kind = ErrorType.MEMORY_LIMIT
    return error_dict(kind, usercode.exception_message(exc)[:_ERROR_MESSAGE_CHARS])
