"""Workers die: executions end as `worker_lost` (never re-run), ingestion is applied exactly once."""

from __future__ import annotations

import signal
import time
from typing import Any

import psutil

from shared.broker import make_celery
from shared.queues import TaskName
from tests.integration.mcp_servers import e2e_servers
from tests.stack import E2EStack, Proc, stack_fixture, wait_until

e2e = stack_fixture(e2e_servers, shared=False)  # its own: the tests kill its workers


def _pool_children(proc: Proc) -> list[psutil.Process]:
    """The prefork pool processes of a Celery worker (they run the tasks)."""
    return [
        child
        for child in psutil.Process(proc.proc.pid).children()
        if "celery" in " ".join(child.cmdline())
    ]


def _status(e2e: E2EStack, execution_id: str) -> dict[str, Any]:
    with e2e.client() as client:
        body: dict[str, Any] = client.get(f"/v1/executions/{execution_id}").json()
    return body


def test_killed_sandbox_worker_ends_the_execution_as_worker_lost_and_keeps_serving(
    e2e: E2EStack,
) -> None:
    marker = "side effect that must not happen twice"
    code = f"""
import asyncio
await mcp.example.add_note(title="once", body={marker!r})
await asyncio.sleep(60)
return "never"
"""
    with e2e.client() as client:
        execution_id = client.post("/v1/executions", json={"code": code, "timeout_s": 90}).json()[
            "id"
        ]
    wait_until(lambda: _status(e2e, execution_id)["status"] == "running", what="running")
    time.sleep(3.0)  # the note is added within milliseconds; then the code sleeps
    for child in _pool_children(e2e.procs["sandbox"]):
        child.send_signal(signal.SIGKILL)

    wait_until(
        lambda: _status(e2e, execution_id)["status"] == "worker_lost",
        what="worker_lost",
        timeout_s=60,
    )
    final = _status(e2e, execution_id)
    assert final["error"]["type"] == "worker_lost"
    assert "not re-run" in final["error"]["message"]
    # At most once: the note was added by the first attempt only.
    with e2e.client() as client:
        notes = client.post(
            "/v1/executions",
            params={"wait": "true"},
            json={"code": "return await mcp.example.list_notes()"},
        ).json()
    assert notes["status"] == "succeeded"
    assert sum(1 for n in notes["result"] if n["body"] == marker) == 1


def test_learning_worker_killed_mid_ingest_applies_it_exactly_once(e2e: E2EStack) -> None:
    e2e.procs["learning"].stop()
    intent = "multiply then add, for the exactly-once test"
    code = (
        "x = await mcp.example.multiply(a=args['a'], b=2)\nreturn await mcp.example.add(a=x, b=1)"
    )
    with e2e.client() as client:
        done = client.post(
            "/v1/executions",
            params={"wait": "true"},
            json={"code": code, "intent": intent, "args": {"a": 4}},
        ).json()
    assert done["status"] == "succeeded" and done["result"] == 9
    execution_id = done["id"]

    # Hold the execution row so the ingestion blocks inside its transaction, then kill it.
    with e2e.db() as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT 1 FROM executions WHERE id = %s FOR UPDATE", (execution_id,))
        worker = e2e.start_worker(
            "learning", "workers.learning.celery_app", "learning,maintenance", concurrency=1
        )

        def ingest_blocked() -> bool:
            # Another connection: inside a transaction pg_stat_activity is a frozen snapshot.
            with e2e.db() as observer:
                row = observer.execute(
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE 'SELECT id, tenant_id, status%FROM executions WHERE id = ANY%'"
                ).fetchone()
            return bool(row) and int(row["n"]) > 0  # type: ignore[call-overload]

        wait_until(ingest_blocked, what="ingestion waiting on the row lock")
        for child in _pool_children(worker):
            child.send_signal(signal.SIGKILL)
        time.sleep(1.0)
        holder.execute("ROLLBACK")

    def learned() -> bool:
        with e2e.db() as conn:
            row = conn.execute(
                "SELECT learned_at FROM executions WHERE id = %s", (execution_id,)
            ).fetchone()
        return bool(row) and row["learned_at"] is not None  # type: ignore[index]

    wait_until(learned, what="redelivered ingestion", timeout_s=60)
    # A further duplicate delivery changes nothing either.
    app = make_celery("test", settings=e2e.settings)
    app.send_task(TaskName.INGEST_EXECUTION, args=[execution_id])
    time.sleep(2.0)
    app.close()
    with e2e.db() as conn:
        caps = conn.execute(
            "SELECT usage_count, tools_used FROM capabilities WHERE intent = %s", (intent,)
        ).fetchall()
        edge = conn.execute(
            "SELECT count FROM tool_edges WHERE src = 'example:multiply' "
            "AND dst = 'example:add' AND kind = 'sequence'"
        ).fetchone()
    assert caps == [{"usage_count": 1, "tools_used": ["example:multiply", "example:add"]}]
    assert edge == {"count": 1}
