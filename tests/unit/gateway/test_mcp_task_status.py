"""How an execution's row reads as an MCP task: the run's own failure is the tool's answer
(``completed``), a lost worker or a broken sandbox is a protocol-level ``failed``."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest
from mcp import types
from mcp.shared.exceptions import MCPError

from services.gateway.mcp.legacy_tasks import legacy_task
from services.gateway.mcp.task_notices import named_tasks
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


@pytest.mark.parametrize(
    ("row", "is_error", "expected"),
    [
        (_row("running"), None, "working"),
        (_row("succeeded"), False, "completed"),
        (_row("failed", "runtime_error"), True, "failed"),  # isError: failed at 2025-11-25
        (_row("worker_lost", "worker_lost"), None, "failed"),
        (_row("cancelled", "cancelled"), None, "cancelled"),
    ],
)
def test_a_task_reads_at_2025_11_25_with_its_wire_names(
    row: dict[str, Any], is_error: bool | None, expected: str
) -> None:
    """The 2025-11-25 ``Task``: ``ttl``/``pollInterval`` (not ``ttlMs``), no result inlined,
    and a tool result with ``isError`` is ``failed`` (that revision's rule)."""
    task = {"id": "t1", "created_at": NOW, "ttl_ms": 60_000, "poll_interval_ms": 500}
    result = None if is_error is None else types.CallToolResult(content=[], is_error=is_error)
    wire = legacy_task(task, detailed(task, {**row, "finished_at": NOW}, result))
    assert wire["status"] == expected
    assert wire["ttl"] == 60_000 and wire["pollInterval"] == 500 and wire["taskId"] == "t1"
    assert not {"ttlMs", "pollIntervalMs", "result", "error", "resultType"} & set(wire)
    if expected == "failed":
        assert wire["statusMessage"]


def test_a_working_task_s_status_message_is_its_run_s_last_progress() -> None:
    task = {"id": "t1", "created_at": NOW, "ttl_ms": 60_000, "poll_interval_ms": 1000}
    row = {**_row("running"), "started_at": NOW}
    said = "everything:research: working: Analyzing content..."
    assert detailed(task, row, None, said=said)["statusMessage"] == said
    assert detailed(task, row, None)["statusMessage"] == "execution e1 is running"
    done = {**_row("cancelled", "cancelled"), "finished_at": NOW}
    assert "statusMessage" not in detailed(task, done, None, said=said)


@pytest.mark.parametrize(
    "named",
    [
        "one-task",
        [1, 2],
        [""],
        ["x" * 201],
        [f"task-{n}" for n in range(17)],
    ],
)
def test_a_listen_naming_tasks_badly_is_invalid_params(named: Any) -> None:
    ctx = _listen({"taskIds": named})
    with pytest.raises(MCPError) as caught:
        named_tasks(ctx)
    assert caught.value.error.code == types.INVALID_PARAMS


def test_a_listen_names_tasks_only_under_task_ids() -> None:
    assert named_tasks(_listen({"taskIds": ["a", "b"]})) == ["a", "b"]
    assert named_tasks(_listen({"toolsListChanged": True})) is None
    call: Any = SimpleNamespace(method="tools/call", request_id=1, params={})
    assert named_tasks(call) is None


def _listen(notifications: dict[str, Any]) -> Any:
    return SimpleNamespace(
        method="subscriptions/listen", request_id="l1", params={"notifications": notifications}
    )
