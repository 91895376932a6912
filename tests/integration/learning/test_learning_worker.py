"""A real learning worker: buffered messages are ingested as batches, and bad ones stay alone."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest
import redis

from shared.broker import make_celery
from shared.config import Settings
from shared.db import connect
from shared.executions.events import LEARNED
from shared.queues import TaskName, events_log_key
from tests.harness import Proc
from tests.integration.learning.test_ingest_batch_db import BOTH_OK, add_execution

CODE = "d = await mcp.bench.fetch(id=args['id'])\nreturn await mcp.bench.store(value=d)"


def wait_until(check: Callable[[], bool], *, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def add_runs(settings: Settings, n: int) -> list[str]:
    """``n`` finished runs of the same code and intent, not yet learned."""
    with connect(settings.database_url or "") as conn:
        return [
            add_execution(conn, code=CODE, intent="fetch a record and store it", events=BOTH_OK)
            for _ in range(n)
        ]


def learned_events(settings: Settings, execution_id: str) -> int:
    """How many `execution.learned` events the run's event log holds."""
    client = redis.Redis.from_url(settings.redis_url or "")
    try:
        logged = client.lrange(events_log_key(execution_id), 0, -1)
    finally:
        client.close()
    return sum(orjson.loads(e).get("type") == LEARNED for e in logged)


def test_a_burst_is_learned_in_batches_and_malformed_messages_are_dropped_alone(
    settings: Settings, celery_worker: Callable[..., Proc]
) -> None:
    ids = add_runs(settings, 29)
    with connect(settings.database_url or "") as conn:  # learned from, though nobody waits
        ids.append(add_execution(conn, code=CODE, intent=None, events=BOTH_OK))
    app = make_celery("test", settings=settings)
    try:
        # Queued before the worker starts: it finds them all at once.
        app.send_task(TaskName.INGEST_EXECUTION, args=["not-a-uuid"])
        app.send_task(TaskName.INGEST_EXECUTION, args=[])
        app.send_task(TaskName.INGEST_EXECUTION, args=ids[:10])  # a drained batch: one message
        for execution_id in ids[10:-1]:
            app.send_task(TaskName.INGEST_EXECUTION, args=[execution_id])
        # As the sandbox worker sends a run without an intent: batched a second.
        app.send_task(TaskName.INGEST_EXECUTION_LATER, args=ids[-1:])
        worker = celery_worker("workers.learning.celery_app", "learning")

        def learned() -> Any:
            with connect(settings.database_url or "") as conn:
                row = conn.execute(
                    "SELECT count(*) AS n FROM executions WHERE learned_at IS NOT NULL"
                ).fetchone()
            return row is not None and row["n"] == len(ids)

        wait_until(learned, what="30 executions learned")
    finally:
        app.close()
    with connect(settings.database_url or "") as conn:
        cap = conn.execute("SELECT usage_count FROM capabilities").fetchall()
    assert cap == [{"usage_count": 29}]
    # A waiting response waits for `execution.learned` of a run with an intent only.
    assert [learned_events(settings, i) for i in ids] == [1] * 29 + [0]
    log = worker.log()
    sizes = [int(m) for m in re.findall(r"ingested a batch of (\d+)", log)]
    assert sum(sizes) == len(ids) + 2 and max(sizes) > 1  # not one message at a time
    assert "has no execution id" in log  # the malformed ones were named and dropped
    assert worker.proc.poll() is None


def test_a_worker_configured_with_another_model_than_the_stored_vectors_refuses_to_start(
    settings: Settings, celery_worker: Callable[..., Proc]
) -> None:
    # The database's vectors are the default model's (recorded when it was migrated).
    with pytest.raises(RuntimeError, match="agentcards reembed") as refused:
        celery_worker(
            "workers.learning.celery_app",
            "learning",
            extra_env={"AGENTCARDS_EMBEDDING_MODEL": "all-mpnet-base-v2"},
        )
    assert "'all-mpnet-base-v2' (768-d)" in str(refused.value)
    assert " ready." not in str(refused.value)  # it never took a message
