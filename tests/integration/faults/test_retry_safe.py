"""`"retry": "safe"`: a run whose sandbox worker dies is re-run, at most N times, and says so.

Without it the run ends `worker_lost` and is never re-run. Each attempt writes one note
titled with the execution's token before it sleeps, and the test kills the pool process
running it (named by its heartbeat) only once that note exists: the notes count the
attempts that ran, and learning must count the execution once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import psutil
import pytest
import redis

from shared.executions.events import RETRIED
from shared.executions.liveness import read_sandbox_beats
from shared.queues import events_log_key
from tests.integration.faults.accounting import CODE, note_counts, poll_until, views
from tests.stack import E2EStack, mcp_session

INTENT = "write a retried fault-test note"
MAX_RETRIES = 2
# A waiting client's slack past the run's timeout, short so that a late kill's re-run
# ends after the first wait would have (see the ?wait=true test).
WAIT_SLACK_S = 5
STACK_SETTINGS = {"execution_max_retries": MAX_RETRIES, "execution_wait_slack_s": WAIT_SLACK_S}


def _body(
    token: str, *, retry: str | None, pause_s: float = 6, timeout_s: int = 25
) -> dict[str, Any]:
    """One note-writing execution that then sleeps long enough to be killed."""
    body: dict[str, Any] = {
        "code": CODE,
        "args": {"token": token, "pause_s": pause_s},
        "intent": INTENT,
        "timeout_s": timeout_s,
        "idempotency_key": token,
    }
    if retry is not None:
        body["retry"] = retry
    return body


def _submit(stack: E2EStack, *, retry: str | None) -> tuple[str, str]:
    """Submit ``_body``; (token, id)."""
    token = f"retry-{uuid.uuid4().hex[:10]}"
    with stack.client() as client:
        response = client.post("/v1/executions", json=_body(token, retry=retry))
    assert response.status_code == 202, response.text
    return token, response.json()["id"]


def _view(stack: E2EStack, token: str, execution_id: str) -> dict[str, Any]:
    return views(stack, {token: execution_id})[token]


def _kill_attempt(
    stack: E2EStack, token: str, execution_id: str, attempt: int, *, whole_worker: bool = False
) -> None:
    """SIGKILL the sandbox pool process running ``attempt`` once that attempt wrote its note
    (``whole_worker``: the worker's main process first, so nothing redelivers the message)."""
    client = redis.Redis.from_url(stack.settings.redis_url or "")
    holder: list[str] = []

    def attempt_wrote_its_note() -> bool:
        view = _view(stack, token, execution_id)
        if view["status"] != "running" or view["attempts"] != attempt:
            return False
        holder[:] = [b.worker for b in read_sandbox_beats(client) if b.busy == execution_id]
        return bool(holder) and note_counts(stack)[token] >= attempt

    poll_until(attempt_wrote_its_note, what=f"attempt {attempt} running with its note written")
    pid = int(holder[0].rsplit(":", 1)[1])
    # Only ever a pool process of this stack's sandbox worker.
    children = psutil.Process(stack.procs["sandbox"].proc.pid).children()
    assert pid in {c.pid for c in children}, (pid, children)
    if whole_worker:
        os.kill(stack.procs["sandbox"].proc.pid, signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)


def _terminal(stack: E2EStack, token: str, execution_id: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def done() -> bool:
        seen.update(_view(stack, token, execution_id))
        return seen["status"] not in {"queued", "running"}

    poll_until(done, what="the execution terminal", timeout_s=240)
    return seen


def _learned(stack: E2EStack, execution_id: str) -> bool:
    with stack.db() as conn:
        row = conn.execute(
            "SELECT learned_at IS NOT NULL AS done FROM executions WHERE id = %s", (execution_id,)
        ).fetchone()
    return bool(row and row["done"])


def _usage(stack: E2EStack) -> tuple[int, int]:
    """(usage, success) of the capability every run here teaches (one code, one intent)."""
    with stack.db() as conn:
        row = conn.execute(
            "SELECT coalesce(sum(usage_count), 0) AS u, coalesce(sum(success_count), 0) AS s "
            "FROM capabilities WHERE intent = %s",
            (INTENT,),
        ).fetchone()
    assert row is not None
    return int(str(row["u"])), int(str(row["s"]))


@dataclass(frozen=True)
class Outcome:
    """One killed run: its final view, the notes its attempts wrote, its learning delta."""

    execution_id: str
    token: str
    view: dict[str, Any]
    notes: int
    usage_delta: int
    success_delta: int


def _killed_run(
    stack: E2EStack,
    fault: str,
    *,
    retry: str | None,
    kills: int = 1,
    restart: Callable[[], None] | None = None,
) -> Outcome:
    """Submit one run, kill ``kills`` attempts (then ``restart``), wait for its end and learning.

    Prints the fault-table row (``pytest -s`` shows it).
    """
    before = _usage(stack)
    token, execution_id = _submit(stack, retry=retry)
    for attempt in range(1, kills + 1):
        _kill_attempt(stack, token, execution_id, attempt, whole_worker=restart is not None)
    if restart is not None:
        restart()
    view = _terminal(stack, token, execution_id)
    notes = note_counts(stack)[token]
    poll_until(lambda: _learned(stack, execution_id), what="the execution learned")
    after = _usage(stack)
    out = Outcome(execution_id, token, view, notes, after[0] - before[0], after[1] - before[1])
    print(
        f"\nFAULT {fault}: submitted=1 terminal={view['status']} attempts={view['attempts']} "
        f"re_runs={len(view['retries'])} notes={notes} usage_delta={out.usage_delta} "
        f"success_delta={out.success_delta} error={(view.get('error') or {}).get('type')}"
    )
    return out


def _restart_sandbox_worker(stack: E2EStack) -> None:
    """What the supervisor does with a dead worker: kill its group, start it again."""
    worker = stack.procs["sandbox"]
    worker.proc.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.proc.pid, signal.SIGKILL)
    stack.start_worker("sandbox", "workers.sandbox.celery_app", "executions", concurrency=2)


def test_retry_safe_run_whose_pool_process_is_killed_is_re_run_once_and_learned_once(
    stack: E2EStack,
) -> None:
    run = _killed_run(stack, "pool child SIGKILL, retry safe", retry="safe")
    view = run.view
    assert view["status"] == "succeeded", view
    assert view["result"] == run.token
    assert view["retry"] == "safe" and view["attempts"] == 2
    assert len(view["retries"]) == 1
    assert view["retries"][0]["attempt"] == 1 and "died" in view["retries"][0]["reason"]
    assert run.notes == 2  # each attempt ran its tool call once: the re-run the client allowed
    # Learned once, as one succeeded run, though two attempts ran.
    assert (run.usage_delta, run.success_delta) == (1, 1)
    # Waiters were told: the execution's event log carries the re-run.
    log = redis.Redis.from_url(stack.settings.redis_url or "").lrange(
        events_log_key(run.execution_id), 0, -1
    )
    retried = [e for e in log if RETRIED.encode() in e]
    assert len(retried) == 1 and b'"attempt":2' in retried[0], log


def test_without_retry_a_killed_pool_process_ends_the_run_worker_lost_not_re_run(
    stack: E2EStack,
) -> None:
    run = _killed_run(stack, "pool child SIGKILL, retry never", retry=None)
    view = run.view
    assert view["status"] == "worker_lost", view
    assert view["retry"] == "never" and view["attempts"] == 1 and view["retries"] == []
    assert "not re-run" in view["error"]["message"]
    assert view["error"]["details"] == {"attempts": 1, "retry": "never"}
    assert run.notes == 1
    assert run.success_delta == 0  # a lost run is no success


def test_retry_safe_run_survives_its_sandbox_main_process_killed(stack: E2EStack) -> None:
    run = _killed_run(
        stack,
        "sandbox main process SIGKILL, retry safe",
        retry="safe",
        restart=lambda: _restart_sandbox_worker(stack),
    )
    assert run.view["status"] == "succeeded", run.view
    assert run.view["attempts"] == 2 and len(run.view["retries"]) == 1
    assert run.notes == 2
    assert (run.usage_delta, run.success_delta) == (1, 1)


def test_retry_safe_run_killed_every_attempt_ends_worker_lost_with_retries_used_up(
    stack: E2EStack,
) -> None:
    kills = MAX_RETRIES + 1
    run = _killed_run(stack, f"pool child SIGKILL x{kills}, retry safe", retry="safe", kills=kills)
    view = run.view
    assert view["status"] == "worker_lost", view
    assert view["attempts"] == kills
    assert [r["attempt"] for r in view["retries"]] == list(range(1, kills))
    assert "used up" in view["error"]["message"]
    assert view["error"]["details"] == {"attempts": kills, "retry": "safe"}
    assert run.notes == kills
    assert run.success_delta == 0


def test_a_waiting_client_gets_the_re_run_that_ends_after_its_first_wait_would_have(
    stack: E2EStack,
) -> None:
    """``?wait=true`` waits the run's timeout plus the slack, counted again from the re-run.

    Attempt 1 is killed at least ``kill_at_s`` after the POST, and attempt 2 sleeps
    ``pause_s`` after its note: it ends after ``kill_at_s + pause_s``, later than the first
    wait's end (``timeout_s + WAIT_SLACK_S`` after the POST), so only a wait extended by the
    re-run returns its outcome (a 202 with the execution still running otherwise).
    """
    # Attempt 1 sleeps well past the kill (6 s is room enough to find and kill it on a loaded
    # machine), and attempt 2 still ends inside its timeout.
    timeout_s, pause_s, kill_at_s = 20, 16.0, 10.0
    assert kill_at_s + pause_s > timeout_s + WAIT_SLACK_S
    token = f"retry-wait-{uuid.uuid4().hex[:10]}"
    body = _body(token, retry="safe", pause_s=pause_s, timeout_s=timeout_s)
    answer: list[httpx.Response] = []

    def wait() -> None:
        with stack.client() as client:
            answer.append(client.post("/v1/executions", params={"wait": "true"}, json=body))

    posted = time.monotonic()
    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    execution_id = _execution_of(stack, token)
    time.sleep(max(0.0, posted + kill_at_s - time.monotonic()))
    _kill_attempt(stack, token, execution_id, 1)
    waiter.join(timeout=120)
    assert answer, "the waiting POST never returned"
    response = answer[0]
    view = response.json()
    print(
        f"\nWAIT retry safe, attempt 1 killed {kill_at_s:.0f}+ s in: HTTP {response.status_code} "
        f"after {time.monotonic() - posted:.1f} s, status={view['status']} "
        f"attempts={view['attempts']}"
    )
    assert response.status_code == 200, view
    assert view["id"] == execution_id and view["status"] == "succeeded", view
    assert view["result"] == token and view["attempts"] == 2 and len(view["retries"]) == 1
    assert note_counts(stack)[token] == 2


def _execution_of(stack: E2EStack, token: str) -> str:
    """The id of the execution submitted with idempotency key ``token`` (its POST still waits)."""
    found: list[str] = []

    def recorded() -> bool:
        with stack.db() as conn:
            row = conn.execute(
                "SELECT id FROM executions WHERE idempotency_key = %s", (token,)
            ).fetchone()
        found[:] = [str(row["id"])] if row else []
        return bool(found)

    poll_until(recorded, what="the waiting POST's execution recorded")
    return found[0]


@pytest.mark.parametrize("value", ["always", "", 1, True, None])
def test_a_bad_retry_value_is_a_422_naming_the_field(stack: E2EStack, value: object) -> None:
    unknown = "00000000-0000-0000-0000-000000000000"
    with httpx.Client(base_url=stack.gateway_url, timeout=30) as client:
        answers = [
            client.post("/v1/executions", json={"code": "return 1", "retry": value}),
            client.post(f"/v1/capabilities/{unknown}/execute", json={"retry": value}),
        ]
    for answer in answers:
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["type"] == "validation_error"
        assert "retry" in error["message"], error


async def test_mcp_takes_retry_and_refuses_a_bad_value_naming_it(stack: E2EStack) -> None:
    async with mcp_session(stack) as session:
        bad = await session.call_tool("execute_code", {"code": "return 1", "retry": "always"})
        good = await session.call_tool("execute_code", {"code": "return 1", "retry": "safe"})
    assert bad.is_error and "retry" in str(bad.content), bad
    assert not good.is_error, good
    assert good.structured_content is not None
    assert good.structured_content["retry"] == "safe" and good.structured_content["attempts"] == 1
