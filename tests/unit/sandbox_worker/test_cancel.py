"""The run against its cancel watch, on a real event loop with stand-in coroutines."""

from __future__ import annotations

import asyncio

from shared.errors import ErrorType
from shared.executions.status import ExecutionStatus
from shared.sandbox.outcome import ExecutionOutcome
from workers.sandbox.pipeline.sandbox import unless_cancelled

DONE = ExecutionOutcome(status=ExecutionStatus.SUCCEEDED, result=1)


async def _finishes(after_s: float, log: list[str]) -> ExecutionOutcome:
    try:
        await asyncio.sleep(after_s)
    except asyncio.CancelledError:
        log.append("run cancelled")
        raise
    return DONE


async def _requests_cancel(after_s: float) -> None:
    await asyncio.sleep(after_s)


async def _breaks() -> None:
    raise ConnectionError("watch lost its connection")


def test_a_run_that_ends_first_keeps_its_outcome() -> None:
    log: list[str] = []
    outcome = asyncio.run(
        unless_cancelled(_finishes(0, log), _requests_cancel(5), execution_id="e")
    )
    assert outcome is DONE and log == []


def test_a_cancel_request_kills_the_run_and_the_outcome_is_cancelled() -> None:
    log: list[str] = []
    outcome = asyncio.run(
        unless_cancelled(_finishes(5, log), _requests_cancel(0), execution_id="e")
    )
    assert log == ["run cancelled"]
    assert outcome.status == ExecutionStatus.CANCELLED
    assert outcome.error is not None and outcome.error["type"] == ErrorType.CANCELLED


def test_a_broken_watch_is_no_cancel_request_the_run_goes_on() -> None:
    log: list[str] = []
    outcome = asyncio.run(unless_cancelled(_finishes(0.05, log), _breaks(), execution_id="e"))
    assert outcome is DONE and log == []
