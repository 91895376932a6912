"""A tenant's runs reach its consolidated state within seconds on a real stack (learning
worker, mcp-server-time from PyPI), not at the next 10-minute beat pass: the stack runs no
beat, so any pass seen here was queued by ingestion."""

from __future__ import annotations

import uuid
from typing import Any

from tests.harness import wait_until
from tests.integration.mcp_servers import example_server, time_server
from tests.stack import E2EStack, stack_fixture

# The servers (and so the stack) of test_twins, test_typescript and the dashboard tests.
shared_stack = stack_fixture(lambda tmp: {"example": example_server(tmp), "time": time_server()})

CODE = 'return await mcp.time.get_current_time(timezone=args["zone"])'
INTENTS = ("what time is it in Tokyo", "the current time in Berlin", "tell me the time in Lima")


def _passes(stack: E2EStack, tenant: str) -> list[dict[str, Any]]:
    with stack.db() as conn:
        return list(
            conn.execute(
                "SELECT version, runs_seen FROM tool_vector_versions WHERE tenant_id = %s "
                "ORDER BY version",
                (tenant,),
            ).fetchall()
        )


def test_new_runs_are_consolidated_soon(shared_stack: E2EStack) -> None:
    tenant = f"t-soon-{uuid.uuid4().hex[:8]}"
    stack = shared_stack.as_new_tenant(tenant)
    with stack.client() as client:
        for intent, zone in zip(
            INTENTS, ("Asia/Tokyo", "Europe/Berlin", "America/Lima"), strict=True
        ):
            body = {"code": CODE, "intent": intent, "args": {"zone": zone}}
            reply = client.post("/v1/executions", params={"wait": "true"}, json=body)
            assert reply.status_code == 200 and reply.json()["status"] == "succeeded", reply.text
    # Each run queues a pass 5 s after it unless one is queued; the last pass reads all three.
    wait_until(
        lambda: any(p["runs_seen"] == len(INTENTS) for p in _passes(stack, tenant)),
        what="a consolidation pass that read every run",
        timeout_s=120,
    )
    passes = _passes(stack, tenant)
    assert len(passes) <= len(INTENTS), passes  # never more passes than runs
