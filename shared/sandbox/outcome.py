"""What one finished execution looks like to callers: status, result, structured error, stdout, trace, layers."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from shared.executions.status import ExecutionStatus

# `cancelled` is set by the worker when a cancel request stops the run, never by the child.
Status = Literal[
    ExecutionStatus.SUCCEEDED,
    ExecutionStatus.FAILED,
    ExecutionStatus.TIMEOUT,
    ExecutionStatus.CANCELLED,
]

# Error types a finished execution can carry; each names the limit or layer hit.
ERROR_TYPES = frozenset(
    {
        "timeout",
        "memory_limit",
        "cpu_limit",
        "output_limit",
        "tool_call_limit",
        "tool_args_too_large",
        "protocol_error",
        "sandbox_unavailable",
        "runtime_error",
        "tool_error",
        "tool_not_allowed",
        "validation_error",
        "capability_cycle",
        "capability_depth_exceeded",
    }
)

# What a child may claim about its own failure in its ``done`` frame.
CHILD_ERROR_TYPES = frozenset(
    {
        "runtime_error",
        "memory_limit",
        "cpu_limit",
        "output_limit",
        "tool_error",
        "tool_not_allowed",
        "tool_call_limit",
        "tool_args_too_large",
        "capability_cycle",  # inline capabilities: A -> B -> A
        "capability_depth_exceeded",  # inline capabilities nested past the depth limit
    }
)


def error(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    """A structured error dict (``type``, ``message`` and optional details such as ``traceback``)."""
    return {"type": kind, "message": message, **extra}


@dataclass(slots=True)
class ExecutionOutcome:
    """Result of ``run_in_sandbox``; ``to_dict()`` is what the worker stores and the CLI prints."""

    status: Status
    result: Any = None
    error: dict[str, Any] | None = None
    stdout: str = ""
    stdout_truncated: bool = False
    trace: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: int = 0
    duration_ms: float = 0.0
    layers: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return asdict(self)
