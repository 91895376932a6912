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


@dataclass(slots=True)
class ExecutionOutcome:
    """Result of ``run_in_sandbox``; ``to_dict()`` is what the worker stores and the CLI prints."""

    status: Status
    result: Any = None
    error: dict[str, Any] | None = None  # shared.errors.error_dict: type, message, details
    stdout: str = ""
    stdout_truncated: bool = False
    trace: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: int = 0
    duration_ms: float = 0.0
    layers: dict[str, Any] = field(default_factory=dict)
    # Resource reads leave no trace event: the result cache asks for them (a policy decides
    # each read by its URI, which a cached result does not keep).
    resource_reads: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return asdict(self)
