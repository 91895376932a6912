"""The sandbox worker's stages on real stores: a real gateway records the execution, a real
Celery worker runs it in a real sandbox against this test's Postgres and Redis. Whatever
way the run ends, the row ends terminal, `execution.finished` is published and the
ingestion message is on the learning queue (read straight from the broker's list)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import psycopg
import pytest
import redis
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from shared.config import Settings
from shared.db import connect
from shared.executions.events import FINISHED
from shared.queues import Queue, events_log_key
from tests.harness import Proc

pytestmark = pytest.mark.integration


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as test_client:
        yield test_client


def _submit(client: TestClient, code: str) -> str:
    response = client.post("/v1/executions", json={"code": code, "timeout_s": 30})
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _row(settings: Settings, execution_id: str) -> dict[str, Any]:
    with connect(settings.database_url or "") as conn:
        row = conn.execute(
            "SELECT status, result, error FROM executions WHERE id = %s", (execution_id,)
        ).fetchone()
    assert row is not None
    return dict(row)


def _ended(settings: Settings, execution_id: str, worker: Proc) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while (row := _row(settings, execution_id))["status"] in ("queued", "running"):
        assert worker.proc.poll() is None, worker.log()[-3000:]
        assert time.monotonic() < deadline, f"still {row['status']}:\n{worker.log()[-3000:]}"
        time.sleep(0.1)
    return row


def _finished_events(client: redis.Redis, execution_id: str) -> list[dict[str, Any]]:
    events = [orjson.loads(e) for e in client.lrange(events_log_key(execution_id), 0, -1)]
    return [e for e in events if e.get("type") == FINISHED]


def _ingestions_queued(client: redis.Redis, execution_id: str) -> int:
    """Messages for ``execution_id`` on the learning queue's broker list (no learning worker)."""
    messages = [orjson.loads(m) for m in client.lrange(Queue.LEARNING.value, 0, -1)]
    return sum(execution_id in m["headers"].get("argsrepr", "") for m in messages)


def _after_the_store(client: redis.Redis, execution_id: str, worker: Proc) -> None:
    """Wait for the stages after the store: the row is terminal before `announce` and `learn`
    run, so a test that reads the broker the moment the row ends races them."""
    deadline = time.monotonic() + 30
    while _ingestions_queued(client, execution_id) == 0:
        assert time.monotonic() < deadline, f"no ingestion sent:\n{worker.log()[-3000:]}"
        time.sleep(0.05)


def test_a_run_is_stored_announced_and_sent_to_learning(
    settings: Settings, client: TestClient, celery_worker: Callable[..., Proc]
) -> None:
    worker = celery_worker("workers.sandbox.celery_app", Queue.EXECUTIONS.value)
    execution_id = _submit(client, "return {'n': 41 + 1}")
    row = _ended(settings, execution_id, worker)
    assert (row["status"], row["result"]) == ("succeeded", {"n": 42})
    r = redis.Redis.from_url(settings.redis_url or "")
    _after_the_store(r, execution_id, worker)
    assert [e["status"] for e in _finished_events(r, execution_id)] == ["succeeded"]
    assert _ingestions_queued(r, execution_id) == 1


def test_a_stage_that_breaks_after_the_claim_still_ends_the_row_and_sends_learning(
    settings: Settings, client: TestClient, celery_worker: Callable[..., Proc]
) -> None:
    execution_id = _submit(client, "return 1")  # queued: no worker runs yet
    # The scope stage reads this column (every tool's row, for the scope and the result
    # cache); without it the stage raises (a ProgrammingError, not retried) after the
    # claim, before the sandbox ran.
    with psycopg.connect(settings.database_url or "", autocommit=True) as conn:
        conn.execute("ALTER TABLE tools RENAME COLUMN schema_hash TO schema_hash_gone")
    worker = celery_worker("workers.sandbox.celery_app", Queue.EXECUTIONS.value)
    row = _ended(settings, execution_id, worker)
    assert row["status"] == "failed" and row["result"] is None
    assert row["error"]["type"] == "internal_error"
    assert "UndefinedColumn" in row["error"]["message"]
    r = redis.Redis.from_url(settings.redis_url or "")
    _after_the_store(r, execution_id, worker)
    assert [e["status"] for e in _finished_events(r, execution_id)] == ["failed"]
    assert _ingestions_queued(r, execution_id) == 1
    assert "failed in the worker (scope)" in worker.log()


def test_a_run_whose_writes_cannot_be_invalidated_is_stored_failed_not_as_its_outcome(
    settings: Settings, client: TestClient, celery_worker: Callable[..., Proc]
) -> None:
    # A tool that is not read-only is in the run's scope: a cancelled run (its trace lost)
    # may have written to its server, so that server's cached results must be invalidated.
    with psycopg.connect(settings.database_url or "", autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tools (id, server, name, description, schema_hash, pagerank, community) "
            "VALUES ('w:put', 'w', 'put', 'writes', 'h', 0, 0)"
        )
    worker = celery_worker("workers.sandbox.celery_app", Queue.EXECUTIONS.value)
    execution_id = _submit(client, "import asyncio\nawait asyncio.sleep(25)\nreturn 1")
    deadline = time.monotonic() + 60
    while _row(settings, execution_id)["status"] != "running":
        assert time.monotonic() < deadline, worker.log()[-3000:]
        time.sleep(0.05)
    # Now neither the invalidation (it unblocks the servers it cleared) nor its fallback
    # (blocking them) can complete: the invalidation raises after its retries.
    with psycopg.connect(settings.database_url or "", autocommit=True) as conn:
        conn.execute("ALTER TABLE cache_blocked_servers RENAME TO cache_blocked_servers_gone")
    assert client.post(f"/v1/executions/{execution_id}/cancel").status_code == 202
    row = _ended(settings, execution_id, worker)
    # Not `cancelled`: stored as its outcome, the run's writes could be read back stale.
    assert row["status"] == "failed", row
    assert row["error"]["type"] == "internal_error"
    assert "CacheInvalidationFailed" in row["error"]["message"]
    r = redis.Redis.from_url(settings.redis_url or "")
    _after_the_store(r, execution_id, worker)
    assert [e["status"] for e in _finished_events(r, execution_id)] == ["failed"]
    assert _ingestions_queued(r, execution_id) == 1


def test_the_row_and_its_audit_row_end_together(
    settings: Settings, client: TestClient, celery_worker: Callable[..., Proc]
) -> None:
    """One statement (one transaction) ends both: the audit row has the stored status, at
    the same instant."""
    worker = celery_worker("workers.sandbox.celery_app", Queue.EXECUTIONS.value)
    execution_id = _submit(client, "return 7")
    assert _ended(settings, execution_id, worker)["status"] == "succeeded"
    with connect(settings.database_url or "") as conn:
        row = conn.execute(
            "SELECT a.status, a.tools, a.finished_at = e.finished_at AS same_instant "
            "FROM audit_log a JOIN executions e ON e.id = a.execution_id WHERE e.id = %s",
            (execution_id,),
        ).fetchone()
    assert row is not None
    assert (row["status"], row["tools"], row["same_instant"]) == ("succeeded", [], True)


def test_a_runs_events_are_logged_in_the_order_made_and_the_finish_comes_last(
    settings: Settings, client: TestClient, celery_worker: Callable[..., Proc]
) -> None:
    # The sandbox's events go out without holding the run (events.OrderedPublisher): still
    # in the order the code made them, each numbered after the one before, all before the end.
    worker = celery_worker("workers.sandbox.celery_app", Queue.EXECUTIONS.value)
    code = "for i in range(30):\n    progress(f'step {i}', i, 30)\nreturn 1"
    execution_id = _submit(client, code)
    assert _ended(settings, execution_id, worker)["status"] == "succeeded"
    r = redis.Redis.from_url(settings.redis_url or "")
    _after_the_store(r, execution_id, worker)
    events = [orjson.loads(e) for e in r.lrange(events_log_key(execution_id), 0, -1)]
    steps = [e["message"] for e in events if e.get("type") == "progress"]
    assert steps == [f"step {i}" for i in range(30)]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == FINISHED


def test_a_run_leaves_no_celery_result_in_redis(
    settings: Settings, client: TestClient, celery_worker: Callable[..., Proc]
) -> None:
    # The row is the result: no `celery-task-meta-<task id>` key per run (Redis memory for
    # `result_expires`, and a GET and a SET in the worker before it takes the next run).
    worker = celery_worker("workers.sandbox.celery_app", Queue.EXECUTIONS.value)
    execution_id = _submit(client, "return 7")
    assert _ended(settings, execution_id, worker)["status"] == "succeeded"
    r = redis.Redis.from_url(settings.redis_url or "")
    _after_the_store(r, execution_id, worker)
    # Celery logs the task's end after it would have stored the result.
    deadline = time.monotonic() + 30
    while "succeeded in" not in worker.log():
        assert time.monotonic() < deadline, worker.log()[-3000:]
        time.sleep(0.05)
    assert r.keys("celery-task-meta-*") == []
