"""Cancelling executions: queued ones never start, running ones lose their sandbox, finished ones stay."""

from __future__ import annotations

import time
from typing import Any

from tests.stack import E2EStack, wait_until


def _get(e2e: E2EStack, execution_id: str) -> dict[str, Any]:
    with e2e.client() as client:
        body: dict[str, Any] = client.get(f"/v1/executions/{execution_id}").json()
    return body


def test_cancel_a_running_execution_kills_its_sandbox(e2e: E2EStack) -> None:
    code = "import asyncio\nprogress('sleeping')\nawait asyncio.sleep(60)\nreturn 'never'"
    with e2e.client() as client:
        execution_id = client.post("/v1/executions", json={"code": code, "timeout_s": 90}).json()[
            "id"
        ]
        wait_until(lambda: _get(e2e, execution_id)["status"] == "running", what="running")
        time.sleep(1.0)  # let the code reach its sleep
        response = client.post(f"/v1/executions/{execution_id}/cancel", params={"wait": "true"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "cancelled" and body["error"]["type"] == "cancelled"
    # The worker is free again: the next execution runs normally.
    with e2e.client() as client:
        after = client.post("/v1/executions", params={"wait": "true"}, json={"code": "return 7"})
    assert after.json()["result"] == 7


def test_runs_cancelled_one_after_another_each_end_cancelled(e2e: E2EStack) -> None:
    # A pool process watches every run's cancel channel on its one pub/sub connection
    # (shared/pubsub_hub.py): three runs on two processes, so one process watches twice.
    code = "import asyncio\nprogress('sleeping')\nawait asyncio.sleep(60)\nreturn 'never'"
    with e2e.client() as client:
        for _ in range(3):
            execution_id = client.post(
                "/v1/executions", json={"code": code, "timeout_s": 90}
            ).json()["id"]
            wait_until(
                lambda eid=execution_id: _get(e2e, eid)["status"] == "running", what="running"
            )
            response = client.post(f"/v1/executions/{execution_id}/cancel", params={"wait": "true"})
            assert response.status_code == 200, response.text
            assert response.json()["status"] == "cancelled", response.text
        after = client.post("/v1/executions", params={"wait": "true"}, json={"code": "return 8"})
    assert after.json()["result"] == 8


def test_cancel_a_queued_execution_means_it_never_runs(e2e: E2EStack) -> None:
    # Occupy both sandbox processes so the third execution stays queued.
    hold = {"code": "import asyncio\nawait asyncio.sleep(60)", "timeout_s": 90}
    with e2e.client() as client:
        holders = [client.post("/v1/executions", json=hold).json()["id"] for _ in range(2)]
        for holder in holders:
            wait_until(lambda h=holder: _get(e2e, h)["status"] == "running", what="holder running")
        queued = client.post(
            "/v1/executions", json={"code": "await mcp.example.add_note(title='x', body='y')"}
        ).json()["id"]
        assert _get(e2e, queued)["status"] == "queued"
        response = client.post(f"/v1/executions/{queued}/cancel")
        assert response.status_code == 200 and response.json()["status"] == "cancelled"
        for holder in holders:
            client.post(f"/v1/executions/{holder}/cancel")
        for holder in holders:
            wait_until(
                lambda h=holder: _get(e2e, h)["status"] == "cancelled", what="holder cancelled"
            )
        time.sleep(1.0)  # the queued message reaches a worker, which must not run it
    final = _get(e2e, queued)
    assert final["status"] == "cancelled" and final["tool_calls"] == []


def test_cancel_of_a_finished_execution_is_a_conflict(e2e: E2EStack) -> None:
    with e2e.client() as client:
        done = client.post(
            "/v1/executions", params={"wait": "true"}, json={"code": "return 1"}
        ).json()
        response = client.post(f"/v1/executions/{done['id']}/cancel")
        missing = client.post("/v1/executions/00000000-0000-0000-0000-000000000000/cancel")
    assert response.status_code == 409, response.text
    assert response.json()["error"]["type"] == "conflict"
    assert missing.status_code == 404
