"""What a limit's error tells the agent to do: the setting or request field behind it, and the way around it.

Used on both sides: the child words its own limits (result size, CPU, memory, a
network attempt) and the bridge the ones it enforces (tool result size, wall time).
Stdlib only: it runs inside the sandbox child. Each ``*_SETTING`` is the environment
variable of a field of ``shared.config.Settings`` (a unit test keeps them in step).
"""

from __future__ import annotations

import errno
import socket
import traceback

RESULT_BYTES_SETTING = "AGENTCARDS_SANDBOX_RESULT_BYTES"
TOOL_RESULT_BYTES_SETTING = "AGENTCARDS_SANDBOX_TOOL_RESULT_BYTES"
WALL_TIME_SETTING = "AGENTCARDS_SANDBOX_WALL_TIME_S"
MAX_WALL_TIME_SETTING = "AGENTCARDS_SANDBOX_MAX_WALL_TIME_S"
CPU_TIME_SETTING = "AGENTCARDS_SANDBOX_CPU_TIME_S"
MEMORY_SETTING = "AGENTCARDS_SANDBOX_MEMORY_MB"
# The execution request's field (REST and MCP) that sets one run's wall time.
TIMEOUT_FIELD = "timeout_s"

NO_NETWORK = (
    "The sandbox has no network (sockets, DNS and HTTP are refused): reach external "
    "systems through tools, `await mcp.<server>.<tool>(...)` (find them with search_tools)"
)
# Errno values a refused socket or an unreachable network shows up as.
_NETWORK_ERRNOS = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN})
_CHAIN_LIMIT = 16  # causes/contexts followed when classifying an exception


def size(n: int) -> str:
    """``4 MiB (4194304 bytes)`` for a round size, else ``1500 bytes``."""
    for shift, unit in ((20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit} ({n} bytes)"
    return f"{n} bytes"


def result_too_large(max_bytes: int) -> str:
    """The ``output_limit`` message for a return value over its byte cap."""
    return (
        f"the result is larger than the {size(max_bytes)} limit ({RESULT_BYTES_SETTING}): "
        "return less, e.g. only the fields you need, a count or summary, or the first N "
        "items (page through the rest in later runs)"
    )


def tool_result_too_large(max_bytes: int) -> str:
    """The ``output_limit`` message for one tool call's (or resource read's) result over its cap."""
    return (
        f"its result is larger than the {size(max_bytes)} a tool result may be "
        f"({TOOL_RESULT_BYTES_SETTING}): ask the tool for less, e.g. a filter, fewer fields "
        "or a smaller page or limit argument"
    )


def wall_time_exceeded(
    wall_time_s: float, max_wall_time_s: float, *, language: str = "python"
) -> str:
    """The ``timeout`` message for a run past its wall clock: the request field and the server's cap,
    and how to do less, in the code's own language (``Promise.all`` for TypeScript)."""
    head = f"wall time limit of {wall_time_s:g}s exceeded"
    together = "Promise.all" if language == "typescript" else "asyncio.gather"
    advice = (
        f"do less per run (run independent tool calls concurrently with {together}, "
        "or split the work across runs)"
    )
    if wall_time_s < max_wall_time_s:
        return (
            f"{head}: pass a larger `{TIMEOUT_FIELD}` with the request (at most "
            f"{max_wall_time_s:g}s, the server's {MAX_WALL_TIME_SETTING}), or {advice}"
        )
    return (
        f"{head}, the server's maximum ({MAX_WALL_TIME_SETTING}; `{TIMEOUT_FIELD}` cannot "
        f"go above it): {advice}"
    )


def cpu_time_exceeded(cpu_time_s: int | None = None) -> str:
    """The ``cpu_limit`` message (``cpu_time_s`` when known)."""
    limit = f" of {cpu_time_s}s" if cpu_time_s is not None else ""
    return (
        f"CPU time limit{limit} exceeded ({CPU_TIME_SETTING}): compute less in the "
        "sandbox, e.g. let a tool filter or aggregate the data"
    )


def memory_exceeded(*, killed: bool = False) -> str:
    """The ``memory_limit`` message; ``killed`` when the cgroup killed the sandbox for it."""
    how = "; the sandbox was killed" if killed else ""
    return (
        f"memory limit exceeded ({MEMORY_SETTING}{how}): hold less at once, e.g. "
        "process items one by one or ask tools for smaller results"
    )


def network_hint(exc: BaseException) -> str | None:
    """:data:`NO_NETWORK` when ``exc`` (or what caused it) is a refused network attempt, else None.

    A refused ``socket()`` (seccomp: EPERM raised from the socket module), a failed name
    lookup (``socket.gaierror``: no resolver can run) or an unreachable network, also
    as the cause or context of another error (urllib's ``URLError``, an HTTP client's).
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _CHAIN_LIMIT:
        seen.add(id(current))
        if _is_network_error(current):
            return NO_NETWORK
        current = current.__cause__ or current.__context__
    return None


def _is_network_error(exc: BaseException) -> bool:
    if isinstance(exc, socket.gaierror):
        return True
    if isinstance(exc, OSError) and exc.errno in _NETWORK_ERRNOS:
        return True
    if isinstance(exc, PermissionError) and exc.__traceback__ is not None:
        frames = traceback.extract_tb(exc.__traceback__)
        return bool(frames) and frames[-1].filename == socket.__file__
    return False
