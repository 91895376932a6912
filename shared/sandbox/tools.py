"""The trusted side's view of tools: specs granted to an execution, the backend interface, a local registry."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from shared import tool_ids
from shared.errors import ErrorType, error_dict
from shared.rpc.protocol import RpcReply


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool an execution may call, by id ``server:tool``."""

    id: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict)
    # The kinds of personal data tokenised in its results (docs/privacy.md): None, every kind.
    pii_kinds: frozenset[str] | None = None

    @property
    def server(self) -> str:
        """The MCP server part of the id."""
        return tool_ids.parse(self.id).server


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a backend returns: a JSON-able ``value`` or a structured ``error`` {type, message}."""

    ok: bool
    value: Any = None
    error: dict[str, Any] | None = None

    @classmethod
    def success(cls, value: Any) -> ToolResult:
        """A successful call."""
        return cls(True, value, None)

    @classmethod
    def failure(cls, message: str, kind: str = ErrorType.TOOL_ERROR) -> ToolResult:
        """A failed call; ``kind`` is the structured error type (shared.errors.ErrorType)."""
        return cls(False, None, error_dict(kind, message))

    @classmethod
    def of_reply(cls, reply: RpcReply) -> ToolResult:
        """A toolhost's reply over the RPC channel."""
        if reply.ok:
            return cls.success(reply.result)
        assert reply.error is not None
        error = error_dict(str(reply.error.type), reply.error.message)
        if reply.error.policies is not None:
            error["policies"] = reply.error.policies
        if reply.error.approval is not None:
            error["approval"] = reply.error.approval
        if reply.error.url is not None:
            error["url"] = reply.error.url
        return cls(False, None, error)


@runtime_checkable
class ToolBackend(Protocol):
    """Where tool calls go (local registry now, the toolhost RPC channel later).

    ``deadline`` is absolute wall-clock time (``time.time()`` seconds) so it survives a
    hop to another process; a backend must give up by then. Calls are at-most-once.
    """

    async def call(self, tool_id: str, args: dict[str, Any], deadline: float) -> ToolResult: ...


@runtime_checkable
class ResourceBackend(Protocol):
    """A backend that can also read a server's resources (``mcp.<server>.read_resource(uri)``)."""

    async def read_resource(self, server: str, uri: str, deadline: float) -> ToolResult: ...


# The trace id (``call-3``) of the tool call a backend is serving, set by the bridge around
# each call: a backend that relays progress or server requests names the call with it.
CURRENT_CALL_ID: ContextVar[str | None] = ContextVar("agentcards_current_call_id", default=None)
# The approval a backend call redeems (its id): set by the bridge when it sends a paused
# call again after the answer.
CURRENT_APPROVAL: ContextVar[str | None] = ContextVar("agentcards_current_approval", default=None)


@runtime_checkable
class ApprovalBackend(Protocol):
    """A backend whose calls may pause for approval (``approval_required``): it waits for
    the answer to the approval ``call_id`` until ``until`` (Unix time); the answer
    (``decision``, ``by``, ``reason``) or None when none came."""

    async def await_answer(self, call_id: str, until: float) -> dict[str, Any] | None: ...


ToolFunc = Callable[..., Any] | Callable[..., Awaitable[Any]]


class LocalToolRegistry:
    """In-process tools (plain or async callables) for tests, the CLI and benchmarks."""

    def __init__(self, tools: Mapping[str, ToolFunc] | None = None) -> None:
        self._tools: dict[str, ToolFunc] = {}
        self._descriptions: dict[str, str] = {}
        for tool_id, fn in (tools or {}).items():
            self.register(tool_id, fn)

    def register(self, tool_id: str, fn: ToolFunc, description: str = "") -> None:
        """Add ``fn`` as tool ``server:tool``; it receives the call's keyword arguments."""
        tool_ids.parse(tool_id)  # ValueError naming the rule
        self._tools[tool_id] = fn
        self._descriptions[tool_id] = description or (inspect.getdoc(fn) or "").split("\n")[0]

    def specs(self) -> dict[str, ToolSpec]:
        """Every registered tool, ready to pass as ``tools=`` to grant them all."""
        return {tid: ToolSpec(tid, self._descriptions[tid]) for tid in self._tools}

    async def call(self, tool_id: str, args: dict[str, Any], deadline: float) -> ToolResult:
        """Run the tool; exceptions become ``tool_error`` results, overrunning the deadline ``timeout``."""
        fn = self._tools.get(tool_id)
        if fn is None:
            return ToolResult.failure(f"unknown tool {tool_id}", ErrorType.UNKNOWN_TOOL)
        try:
            value = fn(**args)
            if inspect.isawaitable(value):
                value = await asyncio.wait_for(value, max(0.0, deadline - time.time()))
        except TimeoutError:
            return ToolResult.failure(
                f"{tool_id} did not answer before its deadline", ErrorType.TIMEOUT
            )
        except Exception as exc:
            return ToolResult.failure(f"{type(exc).__name__}: {exc}"[:2000])
        return ToolResult.success(value)
