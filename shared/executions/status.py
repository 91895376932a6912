"""The states of an execution (the `executions.status` column), and which of them are final."""

from __future__ import annotations

from enum import StrEnum


class ExecutionStatus(StrEnum):
    """Where an execution is: queued → running → one terminal state (never left again)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # the code finished without raising
    FAILED = "failed"  # the code raised, or a limit or the sandbox stopped it
    TIMEOUT = "timeout"  # the wall-time limit passed
    CANCELLED = "cancelled"  # on request, before or while it ran
    WORKER_LOST = "worker_lost"  # the worker died mid-run; a redelivery finds it running
    REJECTED = "rejected"  # never enqueued (the broker was down)
    # Shown, never stored: a running execution with a call paused for a person's answer
    # (``pending_approvals``; docs/policy.md).
    WAITING_APPROVAL = "waiting_approval"


TERMINAL = frozenset(
    {
        ExecutionStatus.SUCCEEDED,
        ExecutionStatus.FAILED,
        ExecutionStatus.TIMEOUT,
        ExecutionStatus.CANCELLED,
        ExecutionStatus.WORKER_LOST,
        ExecutionStatus.REJECTED,
    }
)
