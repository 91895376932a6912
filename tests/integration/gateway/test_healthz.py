"""/healthz tells the truth about the toolhost and each MCP server, with real toolhost processes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from shared.broker import make_celery
from shared.config import Settings
from shared.db import connect
from shared.queues import Queue, TaskName
from tests.harness import Proc
from tests.integration import mcp_servers as real
from tests.integration.learning.test_ingest_batch_db import BOTH_OK, add_execution

# /healthz is 200 only with a live sandbox worker too: each test here has one.
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("sandbox_worker")]

Start = Callable[..., real.ToolhostProcess]


def test_no_toolhost_is_503_naming_it(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["failing"] == ["toolhost"]
    assert "no toolhost heartbeat" in body["checks"]["toolhost"]["detail"]


def test_crash_looping_toolhost_is_503(client: TestClient, toolhost: Start, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {"s": {"comand": "x"}}}')
    host = toolhost(broken, wait=False)
    assert host.proc.wait(60) == 2  # what the supervisor would restart, again and again
    response = client.get("/healthz")
    assert response.status_code == 503 and response.json()["failing"] == ["toolhost"]


def test_each_server_listed_with_state_and_last_error(
    client: TestClient, toolhost: Start, tmp_path: Path
) -> None:
    message = real.CRASH_MESSAGE
    toolhost(real.example_and_crashing_config(tmp_path))
    response = client.get("/healthz")
    # A failed server does not take the gateway out of service: 200, but "degraded".
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded" and body["checks"]["toolhost"]["ok"]
    servers = {s["name"]: s for s in body["mcp_servers"]}
    assert servers["example"]["state"] == "ready" and servers["example"]["last_error"] is None
    assert servers["crashy"]["state"] == "retrying"
    assert message in servers["crashy"]["last_error"]


def test_learning_that_falls_behind_reads_degraded_until_a_worker_catches_up(
    settings: Settings,
    toolhost: Start,
    celery_worker: Callable[..., Proc],
    tmp_path: Path,
) -> None:
    """A finished run nobody learned from for longer than AGENTCARDS_LEARNING_STALL_S is
    reported (learning stalled: a worker holding its messages leaves the queue empty), and
    the report clears once a learning worker ingests it."""
    toolhost(real.write_config(tmp_path / "mcp.json", {"example": real.example_server(tmp_path)}))
    with connect(settings.database_url or "") as conn:
        execution_id = add_execution(
            conn,
            code="d = await mcp.bench.fetch(id=1)\nreturn await mcp.bench.store(value=d)",
            intent="fetch a record and store it",
            events=BOTH_OK,
        )
        conn.execute(
            "UPDATE executions SET finished_at = now() - interval '10 seconds' WHERE id = %s",
            (execution_id,),
        )
        conn.commit()
    stall_after_5s = settings.model_copy(update={"learning_stall_s": 5.0})
    with TestClient(create_app(stall_after_5s), client=("127.0.0.1", 50000)) as client:
        body = client.get("/healthz").json()
        assert body["failing"] == [] and body["status"] == "degraded", body
        assert body["learning"]["behind"] == 1 and body["learning"]["stalled"], body
        assert body["learning"]["oldest_s"] >= 10 and body["learning"]["queued"] == 0

        app = make_celery("test", settings=settings)
        try:
            app.send_task(TaskName.INGEST_EXECUTION, args=[execution_id])
            celery_worker("workers.learning.celery_app", Queue.LEARNING.value)

            def caught_up() -> dict[str, Any] | None:
                answer: dict[str, Any] = client.get("/healthz").json()
                return answer if answer["learning"]["behind"] == 0 else None

            body = real.wait_for(caught_up, timeout_s=60, what="learning caught up")
        finally:
            app.close()
        assert body["status"] == "ok" and body["learning"]["stalled"] is False, body
