"""How an execution's row reads as an MCP task: the run's own failure is the tool's answer
(``completed``), a lost worker or a broken sandbox is a protocol-level ``failed``."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from services.gateway.mcp.tasks import detailed, principal_key, task_status
from shared.auth.principal import Principal
from shared.executions.tasks import new_task_id

NOW = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)


def _row(status: str, error_type: str | None = None) -> dict[str, Any]:
    error = {"type": error_type, "message": f"{error_type} happened"} if error_type else None
    return {"id": "e1", "status": status, "error": error, "created_at": NOW}


@pytest.mark.parametrize(
    ("status", "error_type", "expected"),
    [
        ("queued", None, "working"),
        ("running", None, "working"),
        ("succeeded", None, "completed"),
        ("failed", "runtime_error", "completed"),
        ("failed", "tool_error", "completed"),
        ("timeout", "timeout", "completed"),
        ("cancelled", "cancelled", "cancelled"),
        ("worker_lost", "worker_lost", "failed"),
        ("failed", "sandbox_unavailable", "failed"),
        ("timeout", "queue_timeout", "failed"),
        ("rejected", "broker_unavailable", "failed"),
    ],
)
def test_an_execution_status_reads_as_the_task_status(
    status: str, error_type: str | None, expected: str
) -> None:
    assert task_status(_row(status, error_type))[0] == expected


def test_a_failed_task_carries_a_json_rpc_error_and_no_result() -> None:
    task = {"id": "t1", "created_at": NOW, "ttl_ms": 60_000, "poll_interval_ms": 1000}
    row = {**_row("worker_lost", "worker_lost"), "finished_at": NOW}
    body = detailed(task, row, None)
    assert body["status"] == "failed" and "result" not in body
    assert body["error"]["code"] == -32603 and body["error"]["message"] == "worker_lost happened"
    assert body["error"]["data"] == {"type": "worker_lost", "execution_id": "e1"}
    assert body["ttlMs"] == 60_000 and body["lastUpdatedAt"] == NOW.isoformat()


def test_task_ids_are_random_and_owners_are_told_apart() -> None:
    ids = {new_task_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(len(i) == 32 for i in ids)
    key = principal_key(Principal(tenant_id="t", key_id="k1"))
    person = principal_key(Principal(tenant_id="t", user="alice"))
    assert len({key, person, principal_key(Principal(tenant_id="t"))}) == 3
