"""The worker's stage list keeps the run's guarantees: checked on the real order, with each
stage's body replaced by a recorder (the bodies are covered by the integration tests)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from shared.config import Settings
from shared.errors import CacheInvalidationFailed, ErrorType
from shared.executions.status import ExecutionStatus
from workers.sandbox.pipeline import sandbox
from workers.sandbox.pipeline.context import RunContext
from workers.sandbox.pipeline.runner import Stage, When, run_pipeline
from workers.sandbox.pipeline.stages import STAGES
from workers.sandbox.pipeline.store import broken_end
from workers.sandbox.retry import DatabaseDown

NAMES = [s.name for s in STAGES]
BEFORE_STORE = NAMES[: NAMES.index("store") + 1]


def _recorded(calls: list[str], failing: str | None, exc: Exception) -> list[Stage]:
    def body(name: str):  # type: ignore[no-untyped-def]
        def run(_: RunContext) -> None:
            calls.append(name)
            if name == failing:
                raise exc

        return run

    return [dataclasses.replace(s, run=body(s.name)) for s in STAGES]


def _run(
    failing: str | None, exc: Exception = RuntimeError("boom")
) -> tuple[list[str], RunContext]:
    calls: list[str] = []
    ctx = RunContext(row={"id": "e1"}, settings=Settings(), redis=None)  # type: ignore[arg-type]
    run_pipeline(_recorded(calls, failing, exc), ctx)
    return calls, ctx


def test_the_order() -> None:
    assert NAMES == [
        "scope", "cache.prepare", "sandbox", "privacy", "cache.invalidate_writes", "store",
        "end_broken",
        "cache.remember", "announce", "sandbox.release", "approvals.close", "learn",
    ]  # fmt: skip
    by_name = {s.name: s for s in STAGES}
    assert by_name["end_broken"].when is When.FAILED
    assert by_name["learn"].when is When.ALWAYS
    assert by_name["sandbox.release"].when is When.ALWAYS
    # After the store nothing may fail the run; before it everything must.
    assert [s.name for s in STAGES if s.best_effort] == [
        "cache.remember", "announce", "sandbox.release", "approvals.close", "learn",
    ]  # fmt: skip


def test_a_run_without_failure_is_stored_then_remembered_announced_and_learned() -> None:
    calls, ctx = _run(None)
    assert calls == [n for n in NAMES if n != "end_broken"]
    assert ctx.failure is None


@pytest.mark.parametrize("failing", BEFORE_STORE)
def test_a_stage_that_raises_before_the_store_ends_the_run_broken_and_still_learns(
    failing: str,
) -> None:
    calls, ctx = _run(failing)
    # A broken run's sandbox is released too: its next child is made, its cgroup removed.
    assert calls == [*NAMES[: NAMES.index(failing) + 1], "end_broken", "sandbox.release", "learn"]
    assert isinstance(ctx.failure, RuntimeError)


@pytest.mark.parametrize(
    "failing", ["cache.remember", "announce", "sandbox.release", "approvals.close", "learn"]
)
def test_a_stage_after_the_store_never_fails_the_run(failing: str) -> None:
    calls, ctx = _run(failing)
    assert calls == [n for n in NAMES if n != "end_broken"]
    assert ctx.failure is None


def test_a_run_whose_writes_could_not_be_invalidated_is_never_stored_as_its_outcome() -> None:
    exc = CacheInvalidationFailed("cached results of files could be stale", servers=["files"])
    calls, ctx = _run("cache.invalidate_writes", exc)
    assert "store" not in calls and calls[-3:] == ["end_broken", "sandbox.release", "learn"]
    status, error = broken_end(ctx.failure)  # type: ignore[arg-type]
    assert status == ExecutionStatus.FAILED
    assert error["type"] == ErrorType.INTERNAL_ERROR
    assert "CacheInvalidationFailed" in error["message"]


def test_the_task_time_limit_ends_a_broken_run_as_timeout() -> None:
    status, error = broken_end(SoftTimeLimitExceeded())
    assert (status, error["type"]) == (ExecutionStatus.TIMEOUT, ErrorType.TIMEOUT)


def test_postgres_down_ends_a_broken_run_as_failed_to_store() -> None:
    status, error = broken_end(DatabaseDown("store: connection refused"))
    assert (status, error["type"]) == (ExecutionStatus.FAILED, ErrorType.STORE_FAILED)


def test_the_release_hands_the_runs_teardown_once(monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[list[object]] = []
    monkeypatch.setattr(sandbox._releaser, "hand", handed.append)
    ctx = RunContext(row={"id": "e1"}, settings=Settings(), redis=None)  # type: ignore[arg-type]
    ctx.teardown.append(lambda: None)
    steps = list(ctx.teardown)
    sandbox.release(ctx)
    sandbox.release(ctx)  # nothing left: handed once
    assert handed == [steps] and ctx.teardown == []


def test_the_sandbox_stage_leaves_its_teardown_to_the_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The killed child's reaping and the next child wait for `sandbox.release` (after the
    # announce): the stage itself hands nothing to the teardown thread.

    handed: list[object] = []
    monkeypatch.setattr(sandbox._releaser, "hand", handed.append)

    async def run(ctx: RunContext, teardown: list[object]) -> object:
        teardown.append("rest")
        return "outcome"

    class Loop:
        def run_until_complete(self, coro: object) -> object:
            loop = asyncio.new_event_loop()
            try:
                return loop.run_until_complete(coro)  # type: ignore[arg-type]
            finally:
                loop.close()

    class Redis:
        def delete(self, key: str) -> None:
            pass

    monkeypatch.setattr(sandbox, "_run_or_cancel", run)
    monkeypatch.setattr(sandbox.clients, "event_loop", Loop)
    ctx = RunContext(row={"id": "e1"}, settings=Settings(), redis=Redis())  # type: ignore[arg-type]
    sandbox.run_sandboxed(ctx)
    assert ctx.outcome == "outcome" and handed == [] and ctx.teardown == ["rest"]
    sandbox.release(ctx)
    assert handed == [["rest"]]
