"""The tenant event bus's payloads, and that a dead Redis never fails the caller."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
import redis

from shared.capabilities.schema import tools_called
from shared.events import bus


def test_execution_finished_carries_the_contract_fields() -> None:
    row = {
        "id": "e1",
        "status": "running",
        "duration_ms": 12,
        "extras": {"cache_hit": "l2"},
        "capability_id": "c1",
        "mcp_task_id": "t1",
        "created_at": dt.datetime.now(dt.UTC),
    }
    assert bus.execution_finished(row, status="succeeded") == {
        "execution_id": "e1",
        "status": "succeeded",
        "duration_ms": 12.0,
        "cache_hit": True,
        "capability_id": "c1",
        "mcp_task_id": "t1",
    }
    bare = {"id": "e2", "status": "failed", "duration_ms": None, "capability_id": None}
    assert bus.execution_finished(bare) == {
        "execution_id": "e2",
        "status": "failed",
        "duration_ms": None,
        "cache_hit": False,
        "capability_id": None,
        "mcp_task_id": None,
    }


def test_capability_events_name_id_and_version() -> None:
    assert bus.capability_event({"id": 7, "name": "greet", "version": 3, "code": "x"}) == {
        "capability_id": "7",
        "name": "greet",
        "version": 3,
    }
    assert bus.capability_event({"id": "a", "name": "n"})["version"] == 1  # learned rows


def test_publishing_to_an_unreachable_redis_logs_and_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    with caplog.at_level(logging.WARNING):
        bus.publish(dead, tenant_id="t", type=bus.EventType.THRESHOLD_CHANGED, data={"old": 1})
    assert "could not publish 1 tenant event" in caplog.text


def test_tools_called_reads_mcp_calls_in_order_once() -> None:
    code = (
        "a = await mcp.example.add(a=1, b=2)\n"
        "t = await mcp.time.get_current_time(timezone='UTC')\n"
        "return await mcp.example.add(a=a, b=1), mcp.example, print(t)"
    )
    assert tools_called(code) == ["example:add", "time:get_current_time"]
    assert tools_called("return (") == []
