"""The globals agent code sees: ``mcp``, ``args``, ``capabilities``, ``progress`` (transport-agnostic)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from shared.errors import ErrorType

_PROGRESS_MESSAGE_CHARS = 1_000


class ToolCallError(Exception):
    """Raised in agent code when a tool call fails; ``type`` says why (timeout, unknown_tool, ... see ErrorType)."""

    __module__ = "builtins"  # tracebacks show "ToolCallError", not our package path

    def __init__(
        self,
        type_: str,
        message: str,
        tool: str,
        policies: list[str] | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(f"{tool}: {message}")
        self.type = type_
        self.tool = tool
        self.message = message
        # ``policy_denied``: the ids of the policies that decided (empty: none permits it).
        self.policies = policies
        # ``authorization_required``: the link where the person connects the server.
        self.url = url


class CapabilityError(Exception):
    """Raised in agent code when a capability call is refused; ``type`` is the structured error type."""

    __module__ = "builtins"
    type = ErrorType.RUNTIME_ERROR


class CapabilityCycleError(CapabilityError):
    """Raised when a capability would call one already running in its own call chain (a -> b -> a)."""

    type = ErrorType.CAPABILITY_CYCLE


class CapabilityDepthError(CapabilityError):
    """Raised when nested capability calls would go deeper than the depth limit."""

    type = ErrorType.CAPABILITY_DEPTH_EXCEEDED


class Caller(Protocol):
    """What the proxies need from the session (which knows the current capability chain)."""

    def call_tool(self, tool: str, kwargs: dict[str, Any]) -> Awaitable[Any]: ...

    def read_resource(self, server: str, uri: str) -> Awaitable[Any]: ...

    def run_capability(self, name: str, kwargs: dict[str, Any]) -> Awaitable[Any]: ...

    def capability_names(self) -> list[str]: ...

    def progress(self, message: str, done: float | None, total: float | None) -> None: ...


class Args(dict):  # type: ignore[type-arg]
    """The execution parameters: ``args["x"]``, ``args.get("x", d)`` and ``args.x`` all work."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"args has no parameter {name!r}") from None


def wrap_args(value: Any) -> Any:
    """Recursively turn JSON objects into Args so nested attribute access works too."""
    if isinstance(value, dict):
        return Args({k: wrap_args(v) for k, v in value.items()})
    if isinstance(value, list):
        return [wrap_args(v) for v in value]
    return value


class _Tool:
    def __init__(self, caller: Caller, tool_id: str) -> None:
        self._caller, self._id = caller, tool_id

    def __call__(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        if args:
            raise TypeError(f"{self._id} takes keyword arguments only")
        return self._caller.call_tool(self._id, kwargs)

    def __repr__(self) -> str:
        return f"<tool {self._id}>"


class _Server:
    def __init__(self, caller: Caller, server: str) -> None:
        self._caller, self._server = caller, server

    def __getattr__(self, tool: str) -> _Tool:
        if tool.startswith("__"):
            raise AttributeError(tool)
        return _Tool(self._caller, f"{self._server}:{tool}")

    # Indexing always names a tool, so a tool called `read_resource` stays reachable.
    __getitem__ = __getattr__

    def read_resource(self, uri: str) -> Awaitable[Any]:
        """Read one of this server's resources: ``{"contents": [{"uri", "mimeType", "text" | "blob"}]}``."""
        if not isinstance(uri, str):
            raise TypeError("read_resource(uri) takes the resource URI as a string")
        return self._caller.read_resource(self._server, uri)


class Mcp:
    """``mcp.<server>.<tool>(**kwargs)`` (or ``mcp["server"]["tool"]``): awaitable tool proxies."""

    def __init__(self, caller: Caller) -> None:
        self._caller = caller

    def __getattr__(self, server: str) -> _Server:
        if server.startswith("__"):
            raise AttributeError(server)
        return _Server(self._caller, server)

    __getitem__ = __getattr__


class Capabilities:
    """``capabilities.<name>(**kwargs)``: inline capability functions granted to this execution."""

    def __init__(self, caller: Caller) -> None:
        self._caller = caller
        self._names = frozenset(caller.capability_names())
        self._functions: dict[str, Callable[..., Awaitable[Any]]] = {}

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        func = self._functions.get(name)
        if func is not None:
            return func
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in self._names:
            available = ", ".join(sorted(self._names)) or "none"
            raise AttributeError(
                f"no capability named {name!r} in this execution (available: {available})"
            )
        run = self._caller.run_capability

        def call(*args: Any, **kwargs: Any) -> Awaitable[Any]:
            if args:
                raise TypeError(f"capability {name} takes keyword arguments only")
            return run(name, kwargs)

        call.__name__ = call.__qualname__ = name
        self._functions[name] = call
        return call

    __getitem__ = __getattr__

    def __dir__(self) -> list[str]:
        return sorted(self._names)


def make_progress(caller: Caller) -> Callable[..., None]:
    """``progress(message, done=None, total=None)``: forwarded to the bridge's event callback."""

    def progress(message: Any, done: float | None = None, total: float | None = None) -> None:
        caller.progress(
            str(message)[:_PROGRESS_MESSAGE_CHARS], _number("done", done), _number("total", total)
        )

    return progress


def _number(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"progress {name} must be a number or None")
    try:
        number = float(value)
    except OverflowError:
        raise TypeError(f"progress {name} is too large") from None
    if not math.isfinite(number):
        raise TypeError(f"progress {name} must be finite")
    return value if isinstance(value, int) else number
