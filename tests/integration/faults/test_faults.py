"""Faults under load: every execution ends in one terminal state, no tool call runs twice.

One stack with its own Redis (so it can be killed and restarted on the same port). Each
burst submits ``BURST`` executions that each write one unique note through the example
server, so duplicates are countable, with one intent, so learning must count each
succeeded run once; each test injects one fault mid-burst while a prober submits and
reads executions, and prints its fault-table row (``pytest -s``; see ``accounting``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import uuid
from typing import Any

import httpx
import psutil
import redis

from deploy.launcher.embedded import EmbeddedRedis
from shared.queues import RPC_CLAIM_PREFIX, direct_lease_key
from tests.integration.faults.accounting import (
    INTENT,
    account,
    all_terminal,
    healthy,
    run_waiting,
    running,
    submit_burst,
    usage,
)
from tests.integration.faults.probe import Prober
from tests.integration.mcp_tasks_client import (
    CreateTaskResult,
    LegacySession,
    call_code,
    task_client,
    until_done,
)
from tests.stack import E2EStack, Proc, wait_until

BURST = 20
# Writes its note, then is in a slow call when the toolhost dies.
NOTE_THEN_SLOW = """
await mcp.example.add_note(title=args["token"], body="fault test")
return await mcp.example.slow(seconds=8)
"""


def _pool_children(proc: Proc) -> list[psutil.Process]:
    return [
        child
        for child in psutil.Process(proc.proc.pid).children()
        if "celery" in " ".join(child.cmdline())
    ]


def test_redis_killed_mid_burst_cancels_nothing_and_the_gateway_answers_503(
    stack: E2EStack,
) -> None:
    redis_server: EmbeddedRedis = stack.redis_holder  # type: ignore[attr-defined]
    before = usage(stack)
    ids = submit_burst(stack, n=BURST, pause_s=1.0, intent=INTENT)
    running(stack, ids, 1)
    with Prober(stack, list(ids.values())) as prober:
        redis_server.process.send_signal(signal.SIGKILL)
        redis_server.process.wait()
        time.sleep(2.5)  # the probe marks Redis down after two failed probes 0.5 s apart
        with httpx.Client(base_url=stack.gateway_url, timeout=10) as client:
            health = client.get("/healthz")
        assert health.status_code == 503
        time.sleep(4)
        restarted = EmbeddedRedis.start(redis_server.datadir, port=redis_server.port, persist=True)
        stack.redis_holder = restarted  # type: ignore[attr-defined]
        wait_until(lambda: healthy(stack), what="the gateway recovered by itself", timeout_s=60)
    views = all_terminal(stack, ids)
    statuses = account(
        stack, ids, views, "redis killed ~6.5 s", before=before, prober=prober, outage=True
    )
    # A lost broker connection is never a cancel request.
    assert statuses["cancelled"] == 0
    with stack.client() as client:
        again = client.post("/v1/executions", params={"wait": "true"}, json={"code": "return 2"})
    assert again.status_code == 200 and again.json()["result"] == 2


def test_sandbox_pool_child_killed_ends_its_execution_as_worker_lost(stack: E2EStack) -> None:
    before = usage(stack)
    ids = submit_burst(stack, n=BURST, pause_s=2.0, intent=INTENT)
    running(stack, ids, 2)
    time.sleep(0.5)
    victims = _pool_children(stack.procs["sandbox"])
    with Prober(stack, list(ids.values())) as prober:
        victims[0].send_signal(signal.SIGKILL)
        views = all_terminal(stack, ids)
    statuses = account(
        stack, ids, views, "sandbox pool child SIGKILL", before=before, prober=prober, outage=False
    )
    assert statuses["worker_lost"] >= 1
    assert set(statuses) <= {"succeeded", "worker_lost"}
    lost = [v for v in views.values() if v["status"] == "worker_lost"]
    assert all("not re-run" in v["error"]["message"] for v in lost)
    for view in lost:  # the audit log says how it ended, as for a run its worker ended
        (audited,) = _audit_of(stack, view["id"])
        assert audited["status"] == "worker_lost", audited


def test_sandbox_main_process_killed_ends_running_ones_and_loses_no_queued_one(
    stack: E2EStack,
) -> None:
    before = usage(stack)
    ids = submit_burst(stack, n=BURST, pause_s=2.0, intent=INTENT)
    running(stack, ids, 2)
    worker = stack.procs["sandbox"]
    with Prober(stack, list(ids.values())) as prober:
        os.kill(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait()
        # What the supervisor does with a dead child: kill its whole group, start it again.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.proc.pid, signal.SIGKILL)
        stack.start_worker("sandbox", "workers.sandbox.celery_app", "executions", concurrency=2)
        views = all_terminal(stack, ids)
    statuses = account(
        stack, ids, views, "sandbox main process SIGKILL", before=before, prober=prober,
        outage=False,
    )  # fmt: skip
    assert set(statuses) <= {"succeeded", "worker_lost"}
    assert statuses["worker_lost"] >= 1
    assert statuses["succeeded"] >= BURST - 2


def test_toolhost_killed_mid_call_ends_calls_as_tool_unavailable(stack: E2EStack) -> None:
    before = usage(stack)
    claims = redis.Redis.from_url(stack.settings.redis_url or "")
    claimed_before = set(claims.scan_iter(match=f"{RPC_CLAIM_PREFIX}*"))
    ids = {}
    with stack.client() as client:
        for _ in range(2):
            token = f"slow-{uuid.uuid4().hex[:8]}"
            body = {"code": NOTE_THEN_SLOW, "args": {"token": token}, "intent": INTENT,
                    "timeout_s": 25, "idempotency_key": token}  # fmt: skip
            ids[token] = client.post("/v1/executions", json=body).json()["id"]
    wait_until(  # each run's note written, then its slow call popped by the toolhost
        lambda: len(set(claims.scan_iter(match=f"{RPC_CLAIM_PREFIX}*")) - claimed_before) >= 4,
        what="both slow calls popped by the toolhost",
    )
    # And a direct call's task, its server called (no sandbox: the toolhost holds its lease).
    lost = asyncio.run(_direct_task(stack, 25))
    wait_until(lambda: _leased_by_toolhost(stack, lost), what="the direct task's call")
    toolhost = stack.procs["toolhost"]
    with Prober(stack, list(ids.values())) as prober:
        os.killpg(toolhost.proc.pid, signal.SIGKILL)
        toolhost.proc.wait()
        views = all_terminal(stack, ids)
        failed = asyncio.run(_direct_task_read(stack, lost))
        restarted = stack.start("toolhost", [sys.executable, "-m", "services.toolhost"])
        wait_until(lambda: healthy(stack), what="toolhost back", proc=restarted)
    # Its lease lapsed with the toolhost: worker_lost, never working (its server may have run).
    assert failed["status"] == "failed" and "result" not in failed, failed
    assert failed["error"]["data"]["type"] == "worker_lost", failed
    # Its call is in the audit log (written at its start), ended as the reaper ended it.
    (audited,) = _audit_of(stack, str(_execution_of(stack, lost)))
    assert audited["action"] == "execute" and audited["status"] == "worker_lost", audited
    for view in views.values():
        assert view["status"] == "failed", view
        # Ended by the claiming toolhost's missing heartbeat, not by the deadline.
        assert view["error"]["type"] == "tool_unavailable", view
        # The note call ran once and is recorded so; the slow call is not replayed.
        assert [c["ok"] for c in view["tool_calls"]] == [True, False], view
    account(stack, ids, views, "toolhost SIGKILL mid-call", before=before, prober=prober,
            outage=False)  # fmt: skip
    after = run_waiting(stack, "return await mcp.example.add(a=1, b=2)")
    assert after["status"] == "succeeded" and after["result"] == 3


async def test_an_mcp_task_outlives_its_gateway_and_fails_when_its_worker_dies(
    stack: E2EStack,
) -> None:
    """SIGKILL the gateway while a task's run is running and start it again: a new session
    reads the same task on to its answer (a 2025-11-25 task too). SIGKILL the sandbox pool's
    children while another task's run is running: the task reads ``failed`` with
    ``worker_lost``, never ``working``."""
    http, client = task_client(stack)
    async with http, client:
        created = await call_code(client, "await asyncio.sleep(8)\nreturn 'survived'")
    assert isinstance(created, CreateTaskResult), created
    direct_http, direct_client = task_client(stack, url=f"{stack.gateway_url}{EXAMPLE}")
    async with direct_http, direct_client:  # a direct call's task: no sandbox, the same promise
        direct = await _slow_task(direct_client, 8)
    code = {"code": "await asyncio.sleep(8)\nreturn 'survived at 2025-11-25'", "no_cache": True}
    older = LegacySession(stack).request(
        "tools/call", {"name": "execute_code", "arguments": code, "task": {"ttl": 600000}}
    )["result"]["task"]
    assert older["status"] == "working", older
    for task_id in (created.task_id, older["taskId"], direct.task_id):
        wait_until(
            lambda task_id=task_id: _run_status(stack, task_id) == "running",
            what="the task's run",
        )
    gateway = stack.procs["gateway"]
    os.killpg(gateway.proc.pid, signal.SIGKILL)
    gateway.proc.wait()
    restarted = stack.start("gateway", [sys.executable, "-m", "services.gateway"])
    wait_until(lambda: healthy(stack), what="the gateway back", timeout_s=120, proc=restarted)
    http, client = task_client(stack)
    async with http, client:
        done = await until_done(client, created.task_id, timeout_s=90)
        assert done["status"] == "completed", done
        assert done["result"]["structuredContent"]["result"] == "survived"
        again = LegacySession(stack)  # a new 2025-11-25 session reads the older task on
        assert again.until_done(older["taskId"], timeout_s=90)["status"] == "completed"
        result = again.request("tasks/result", {"taskId": older["taskId"]})["result"]
        assert result["structuredContent"]["result"] == "survived at 2025-11-25", result
    direct_http, direct_client = task_client(stack, url=f"{stack.gateway_url}{EXAMPLE}")
    async with direct_http, direct_client:  # its end recorded by the toolhost meanwhile
        done = await until_done(direct_client, direct.task_id, timeout_s=90)
    assert done["status"] == "completed", done
    assert "slept 8" in json.dumps(done["result"]["content"]), done
    http, client = task_client(stack)
    async with http, client:
        lost = await call_code(client, "await asyncio.sleep(25)\nreturn 'never'")
        assert isinstance(lost, CreateTaskResult), lost
        wait_until(lambda: _run_status(stack, lost.task_id) == "running", what="the second run")
        for child in _pool_children(stack.procs["sandbox"]):
            child.send_signal(signal.SIGKILL)
        failed = await until_done(client, lost.task_id, timeout_s=120)
    assert failed["status"] == "failed" and "result" not in failed, failed
    assert failed["error"]["data"]["type"] == "worker_lost", failed
    # Its call is in the audit log (written at its start), ended as the reaper ended it.
    (audited,) = _audit_of(stack, str(_execution_of(stack, lost.task_id)))
    assert audited["action"] == "execute" and audited["status"] == "worker_lost", audited


async def test_a_direct_task_completes_while_every_sandbox_slot_is_busy(
    stack: E2EStack,
) -> None:
    """A direct call's task needs no sandbox: it completes while every slot runs a long
    execution and another waits for one."""
    code = "await asyncio.sleep(40)\nreturn 1"
    with stack.client() as rest:
        ids = [
            rest.post("/v1/executions", json={"code": code, "timeout_s": 50}).json()["id"]
            for _ in range(3)
        ]  # fmt: skip  (the stack's 2 slots, and one queued)

        def statuses() -> list[str]:
            return [rest.get(f"/v1/executions/{i}").json()["status"] for i in ids]

        try:
            wait_until(lambda: {"running", "queued"} <= set(statuses()), what="busy slots")
            http, client = task_client(stack, url=f"{stack.gateway_url}{EXAMPLE}")
            async with http, client:
                quick = await _slow_task(client, 2)
                done = await until_done(client, quick.task_id, timeout_s=60)
            still = statuses()
        finally:
            for execution_id in ids:
                rest.post(f"/v1/executions/{execution_id}/cancel")
    assert done["status"] == "completed", done
    assert "slept 2" in json.dumps(done["result"]["content"]), done
    assert "running" in still and "queued" in still, still  # done while every slot was busy


EXAMPLE = "/mcp/servers/example"


async def _slow_task(client: Any, seconds: float) -> CreateTaskResult:
    """A direct call of the example server's ``slow`` that outlasts the grace: its task."""
    created = await client.session.call_tool("slow", {"seconds": seconds}, allow_claimed=True)
    assert isinstance(created, CreateTaskResult), created
    return created


async def _direct_task(stack: E2EStack, seconds: float) -> str:
    """The task id of a direct ``slow`` call of ``seconds``, from a session of its own."""
    http, client = task_client(stack, url=f"{stack.gateway_url}{EXAMPLE}")
    async with http, client:
        return (await _slow_task(client, seconds)).task_id


async def _direct_task_read(stack: E2EStack, task_id: str) -> dict[str, Any]:
    """The direct task read until it ended, from a new session."""
    http, client = task_client(stack, url=f"{stack.gateway_url}{EXAMPLE}")
    async with http, client:
        return await until_done(client, task_id, timeout_s=60)


def _leased_by_toolhost(stack: E2EStack, task_id: str) -> bool:
    """Whether a toolhost holds the lease of the direct task's call (its server is called)."""
    execution_id = _execution_of(stack, task_id)
    if execution_id is None:
        return False
    client = redis.Redis.from_url(stack.settings.redis_url or "")
    return client.get(direct_lease_key(execution_id)) == b"toolhost"


def _execution_of(stack: E2EStack, task_id: str) -> str | None:
    """The id of the execution behind an MCP task (None before its row names the task)."""
    with stack.db() as conn:
        row = conn.execute(
            "SELECT id::text FROM executions WHERE mcp_task_id = %s", (task_id,)
        ).fetchone()
    return None if row is None else str(row["id"])


def _audit_of(stack: E2EStack, execution_id: str) -> list[dict[str, Any]]:
    """The execution's rows of the audit log, as the tenant's admin reads it."""
    with stack.client() as client:
        got = client.get("/v1/audit", params={"limit": 1000})
    assert got.status_code == 200, got.text
    return [e for e in got.json()["entries"] if e["execution_id"] == execution_id]


def _run_status(stack: E2EStack, task_id: str) -> str | None:
    """The status of the execution behind an MCP task (None before its row names the task)."""
    with stack.db() as conn:
        row = conn.execute(
            "SELECT status FROM executions WHERE mcp_task_id = %s", (task_id,)
        ).fetchone()
    return str(row["status"]) if row else None
