"""Faults under load: every execution ends in one terminal state, no tool call runs twice.

One stack with its own Redis (so it can be killed and restarted on the same port). Each
burst submits ``BURST`` executions that each write one unique note through the example
server, so duplicates are countable; each test injects one fault mid-burst.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import httpx
import psutil
import redis

from deploy.launcher.embedded import EmbeddedRedis
from shared.queues import RPC_CLAIM_PREFIX
from tests.integration.e2e.conftest import E2EStack, Proc, wait_until
from tests.integration.faults.accounting import (
    all_terminal,
    check_accounted,
    run_waiting,
    running,
    submit_burst,
)

BURST = 20
STACK_SETTINGS = {"learning": False}


def _pool_children(proc: Proc) -> list[psutil.Process]:
    return [
        child
        for child in psutil.Process(proc.popen.pid).children()
        if "celery" in " ".join(child.cmdline())
    ]


def test_redis_killed_mid_burst_cancels_nothing_and_the_gateway_answers_503(
    stack: E2EStack,
) -> None:
    redis_server: EmbeddedRedis = stack.redis_holder  # type: ignore[attr-defined]
    ids = submit_burst(stack, n=BURST, pause_s=1.0)
    running(stack, ids, 1)
    redis_server.process.send_signal(signal.SIGKILL)
    redis_server.process.wait()
    time.sleep(2.5)  # the probe marks Redis down after two failed probes 0.5 s apart
    with httpx.Client(base_url=stack.gateway_url, timeout=10) as client:
        refused = client.post("/v1/executions", json={"code": "return 1"})
        health = client.get("/healthz")
    assert refused.status_code == 503
    assert refused.headers["Retry-After"]
    assert refused.json()["error"]["type"] == "unavailable"
    assert health.status_code == 503
    time.sleep(5)
    restarted = EmbeddedRedis.start(redis_server.datadir, port=redis_server.port, persist=True)
    stack.redis_holder = restarted  # type: ignore[attr-defined]
    views = all_terminal(stack, ids)
    statuses = check_accounted(stack, ids, views, "redis killed ~6.5 s")
    # A lost broker connection is never a cancel request.
    assert statuses["cancelled"] == 0
    # The gateway recovered by itself.
    with stack.client() as client:
        again = client.post("/v1/executions", params={"wait": "true"}, json={"code": "return 2"})
    assert again.status_code == 200 and again.json()["result"] == 2


def test_sandbox_pool_child_killed_ends_its_execution_as_worker_lost(stack: E2EStack) -> None:
    ids = submit_burst(stack, n=BURST, pause_s=2.0)
    running(stack, ids, 2)
    time.sleep(0.5)
    victims = _pool_children(stack.procs["sandbox"])
    victims[0].send_signal(signal.SIGKILL)
    views = all_terminal(stack, ids)
    statuses = check_accounted(stack, ids, views, "sandbox pool child SIGKILL")
    assert statuses["worker_lost"] >= 1
    assert set(statuses) <= {"succeeded", "worker_lost"}
    lost = [v for v in views.values() if v["status"] == "worker_lost"]
    assert all("not re-run" in v["error"]["message"] for v in lost)


def test_sandbox_main_process_killed_ends_running_ones_and_loses_no_queued_one(
    stack: E2EStack,
) -> None:
    ids = submit_burst(stack, n=BURST, pause_s=2.0)
    running(stack, ids, 2)
    worker = stack.procs["sandbox"]
    os.kill(worker.popen.pid, signal.SIGKILL)
    worker.popen.wait()
    # What the supervisor does with a dead child: kill its whole group, start it again.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.popen.pid, signal.SIGKILL)
    stack.start_worker("sandbox", "workers.sandbox.celery_app", "executions", concurrency=2)
    views = all_terminal(stack, ids)
    statuses = check_accounted(stack, ids, views, "sandbox main process SIGKILL")
    assert set(statuses) <= {"succeeded", "worker_lost"}
    assert statuses["worker_lost"] >= 1
    assert statuses["succeeded"] >= BURST - 2


def test_toolhost_killed_mid_call_ends_calls_as_tool_unavailable(
    stack: E2EStack, tmp_path: Path
) -> None:
    code = "return await mcp.example.slow(seconds=8)"
    claims = redis.Redis.from_url(stack.settings.redis_url or "")
    before = set(claims.scan_iter(match=f"{RPC_CLAIM_PREFIX}*"))
    with stack.client() as client:
        ids = {
            f"slow-{i}": client.post("/v1/executions", json={"code": code, "timeout_s": 25}).json()[
                "id"
            ]
            for i in range(2)
        }
    wait_until(
        lambda: len(set(claims.scan_iter(match=f"{RPC_CLAIM_PREFIX}*")) - before) >= 2,
        what="both calls popped by the toolhost",
    )
    toolhost = stack.procs["toolhost"]
    os.killpg(toolhost.popen.pid, signal.SIGKILL)
    toolhost.popen.wait()
    views = all_terminal(stack, ids)
    for view in views.values():
        assert view["status"] == "failed", view
        # Ended by the claiming toolhost's missing heartbeat, not by the deadline.
        assert view["error"]["type"] == "tool_unavailable", view
    restarted = stack.start("toolhost", [sys.executable, "-m", "services.toolhost"])
    wait_until(
        lambda: httpx.get(f"{stack.gateway_url}/healthz", timeout=5).status_code == 200,
        what="toolhost back",
        proc=restarted,
    )
    after = run_waiting(stack, "return await mcp.example.add(a=1, b=2)")
    assert after["status"] == "succeeded" and after["result"] == 3
