"""Direct calls' records, drained from the Redis stream to Postgres (shared/direct), on a real
Redis and Postgres: a drainer that dies after reading leaves its records to another, and a
record written twice leaves one executions row and one audit row; a direct call made as a
task is audited from its start, and its end fills that row."""

from __future__ import annotations

import time
import uuid
from typing import Any

import psycopg
import pytest
import redis

from shared.direct.drain import Drainer
from shared.direct.records import (
    finished_row,
    queue_record,
    record_of,
    write_records,
    write_started,
)
from shared.errors import ErrorType, error_dict
from shared.executions.trace import TraceRecorder
from shared.queues import DIRECT_RECORDS_GROUP, DIRECT_RECORDS_STREAM

TOOL = "example:add"


def _row(n: int, *, ok: bool = True) -> dict[str, Any]:
    recorder = TraceRecorder(None)
    recorder.tool_start("call-1", TOOL, None)
    error = None if ok else error_dict(ErrorType.TOOL_ERROR, "boom")
    recorder.tool_end("call-1", error)
    now = time.time()
    return finished_row(
        execution_id=str(uuid.uuid4()), tenant_id="default",
        code=f"# direct call of {TOOL}\n", args={"a": n, "b": 1}, tool_id=TOOL, timeout_s=30.0,
        extras={"direct": {"session": "s", "after": None, "tool": TOOL}}, created_at=now - 0.01,
        finished_at=now, status="succeeded" if ok else "failed",
        result=n + 1 if ok else None, error=None if ok else error, trace=recorder.events,
        duration_ms=10.0, trace_id=None, pii=None,
    )  # fmt: skip


def _append(client: redis.Redis, rows: list[dict[str, Any]]) -> None:
    pipe = client.pipeline(transaction=False)
    for row in rows:
        queue_record(pipe, row, key_id=None)
    pipe.execute()


def _stored(pg_url: str, ids: list[str]) -> dict[str, Any]:
    with psycopg.connect(pg_url, row_factory=psycopg.rows.dict_row) as conn:
        rows = conn.execute(
            "SELECT id::text, status, result, trace_summary, extras FROM executions "
            "WHERE id = ANY(%s::uuid[])",
            (ids,),
        ).fetchall()
        audits = conn.execute(
            "SELECT execution_id::text, action, status, tools FROM audit_log "
            "WHERE execution_id = ANY(%s::uuid[])",
            (ids,),
        ).fetchall()
    return {"rows": {r["id"]: r for r in rows}, "audits": audits}


def _connector(pg_url: str) -> Any:
    """What a Drainer calls for a connection: a new one to the test's database each time."""
    return lambda: psycopg.connect(pg_url, row_factory=psycopg.rows.dict_row)


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url)


def test_records_a_dead_drainer_read_are_written_once_by_another(
    client: redis.Redis, pg_url: str
) -> None:
    rows = [_row(n) for n in range(5)] + [_row(99, ok=False)]
    ids = [str(row["id"]) for row in rows]
    _append(client, rows)
    client.xgroup_create(DIRECT_RECORDS_STREAM, DIRECT_RECORDS_GROUP, id="0", mkstream=True)
    # A drainer reads the entries, then dies before writing or acknowledging them.
    read = client.xreadgroup(DIRECT_RECORDS_GROUP, "dead", {DIRECT_RECORDS_STREAM: ">"})
    assert len(read[0][1]) == len(rows)  # type: ignore[index]
    learned: list[list[str]] = []
    connection = _connector(pg_url)
    other = Drainer(
        client=client, connection=connection, learn=learned.append, consumer="other",
        claim_idle_s=0.2,
    )  # fmt: skip
    assert other.drain() == 0  # not idle long enough yet: the dead one's entries wait
    time.sleep(0.3)
    assert other.drain() == len(rows)
    stored = _stored(pg_url, ids)
    assert set(stored["rows"]) == set(ids)
    # Learning is told of each, once, in one message for the batch.
    assert len(learned) == 1 and sorted(learned[0]) == sorted(ids)
    by_id = stored["rows"]
    assert by_id[ids[0]]["status"] == "succeeded" and by_id[ids[0]]["result"] == 1
    assert by_id[ids[-1]]["status"] == "failed"
    assert [c["tool"] for c in by_id[ids[0]]["trace_summary"]["tool_calls"]] == [TOOL]
    assert by_id[ids[0]]["extras"]["direct"]["tool"] == TOOL
    audits = stored["audits"]
    assert sorted(a["execution_id"] for a in audits) == sorted(ids)  # one audit row each
    assert {a["action"] for a in audits} == {"execute"}
    failed = next(a for a in audits if a["execution_id"] == ids[-1])
    assert failed["status"] == "failed" and failed["tools"][0]["ok"] is False
    # Nothing left behind: no entry, nothing pending.
    assert client.xlen(DIRECT_RECORDS_STREAM) == 0
    assert client.xpending(DIRECT_RECORDS_STREAM, DIRECT_RECORDS_GROUP)["pending"] == 0
    # The dead drainer comes back and writes what it had read: nothing changes.
    with connection() as conn:
        assert write_records(conn, [record_of(row, key_id=None) for row in rows]) == []
    again = _stored(pg_url, ids)
    assert len(again["rows"]) == len(rows) and len(again["audits"]) == len(rows)


def test_a_drainer_whose_write_failed_writes_its_own_entries_first(
    client: redis.Redis, pg_url: str
) -> None:
    rows = [_row(n) for n in range(3)]
    _append(client, rows)
    failing = True

    def connection() -> Any:
        if failing:
            raise psycopg.OperationalError("Postgres is restarting")
        return psycopg.connect(pg_url, row_factory=psycopg.rows.dict_row)

    drainer = Drainer(client=client, connection=connection, learn=lambda _: None, consumer="d")
    with pytest.raises(psycopg.OperationalError):
        drainer.drain()
    _append(client, [_row(7)])  # a newer record meanwhile
    failing = False
    assert drainer.drain() == 3  # its own pending entries first, then the new one
    assert drainer.drain() == 1
    stored = _stored(pg_url, [str(row["id"]) for row in rows])
    assert len(stored["rows"]) == 3 and len(stored["audits"]) == 3


def test_a_tasks_audit_row_is_written_at_its_start_and_filled_by_its_end(pg_url: str) -> None:
    """A task whose toolhost dies never ends by ``write_records``: its audit row must exist
    from its start (the reaper fills it); an end that comes fills the same row, twice or not."""
    row = _row(4)
    execution_id = str(row["id"])
    with psycopg.connect(pg_url, row_factory=psycopg.rows.dict_row) as conn:
        write_started(
            conn, execution_id=execution_id, tenant_id="default", code=row["code"],
            args=row["args"], tool_id=TOOL, timeout_s=30.0, extras=row["extras"],
            created_at=row["created_at"].timestamp(), trace_id=None, user_id=None,
            key_id=None, worker=f"direct-task:{execution_id}",
        )  # fmt: skip
    started = _stored(pg_url, [execution_id])
    assert started["rows"][execution_id]["status"] == "running"
    assert [(a["action"], a["status"]) for a in started["audits"]] == [("execute", None)]
    for _ in range(2):  # a record written twice changes nothing the second time
        with psycopg.connect(pg_url, row_factory=psycopg.rows.dict_row) as conn:
            write_records(conn, [record_of(row, key_id=None)])
        ended = _stored(pg_url, [execution_id])
        assert ended["rows"][execution_id]["status"] == "succeeded"
        (audit,) = ended["audits"]
        assert audit["status"] == "succeeded" and audit["tools"][0]["ok"] is True, audit


def test_learning_hears_of_the_batches_written_within_a_while_in_one_message(
    client: redis.Redis, pg_url: str
) -> None:
    learned: list[list[str]] = []
    connection = _connector(pg_url)
    drainer = Drainer(
        client=client, connection=connection, learn=learned.append, consumer="d",
        learn_every_s=3600,
    )  # fmt: skip
    batches = [[_row(n) for n in range(2)], [_row(5)], [_row(6), _row(7)]]
    for batch in batches:
        _append(client, batch)
        assert drainer.drain() == len(batch)
    ids = [[str(row["id"]) for row in batch] for batch in batches]
    assert learned == [ids[0]]  # the first at once; the others wait for the next message
    assert len(_stored(pg_url, ids[1] + ids[2])["audits"]) == 3  # written all the same
    # A drainer told to stop sends what it holds: no run waits for the beat's sweep.
    drainer.stop()
    drainer.run()
    assert learned == [ids[0], ids[1] + ids[2]]
