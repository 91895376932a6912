"""Faults on a stack started as `agentcards up` starts it: embedded Redis and Postgres die mid-burst.

The harness's supervisor restarts them; every execution still ends in one terminal
state, no note is written twice, and learning catches up (each succeeded run learned
once). The fault-table row of each test is printed (``pytest -s`` shows it).
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import psutil
import pytest

from deploy.launcher.harness import StackHandle, temporary_stack
from shared.config import Settings
from tests.integration.faults.accounting import (
    CODE,
    INTENT,
    account,
    all_terminal,
    check_accounted,
    healthy,
    learned,
    poll_until,
    run_waiting,
    running,
    submit_burst,
    usage,
)
from tests.integration.faults.probe import Prober
from tests.integration.mcp_servers import example_server

BURST = 12


@dataclass
class Gateway:
    handle: StackHandle

    @property
    def gateway_url(self) -> str:
        return self.handle.gateway_url

    @property
    def settings(self) -> Settings:
        return self.handle.settings

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.handle.gateway_url, timeout=90)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("supervised")
    config = tmp / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"example": example_server(tmp)}}))
    # Its own stack, as `agentcards up` runs it: the tests kill children for the supervisor.
    with temporary_stack(mcp_config=config, sandbox_workers=2, timeout_s=240) as handle:
        yield Gateway(handle)


def test_embedded_redis_killed_is_restarted_and_the_burst_completes(gateway: Gateway) -> None:
    stack = gateway.handle.stack
    assert stack.redis is not None
    before = usage(gateway)
    with gateway.handle.supervised():
        ids = submit_burst(gateway, n=BURST, pause_s=1.0, intent=INTENT)
        running(gateway, ids, 1)
        time.sleep(1.5)  # the AOF is fsynced every second: the queued messages are on disk
        old = stack.redis.process.pid
        with Prober(gateway, list(ids.values())) as prober:
            psutil.Process(old).send_signal(signal.SIGKILL)
            poll_until(
                lambda: (
                    stack.redis is not None
                    and stack.redis.process.pid != old
                    and stack.redis.running()
                ),
                what="the supervisor restarted Redis",
                timeout_s=30,
            )
            poll_until(lambda: healthy(gateway), what="the gateway recovered", timeout_s=60)
        seen = all_terminal(gateway, ids)
        statuses = account(
            gateway, ids, seen, "embedded Redis SIGKILL", before=before, prober=prober, outage=True
        )
        assert statuses["cancelled"] == 0  # a lost broker connection is never a cancel request
        # Messages still queued when Redis died come back from the AOF and run.
        assert statuses["succeeded"] >= BURST - 2, statuses  # two sandbox slots were in flight
        # The learning worker that lived through the restart consumes again: new runs are
        # learned. Still supervised, as a stack always is: a child the Redis loss took down
        # is restarted before these run.
        poll_until(lambda: healthy(gateway), what="the gateway healthy", timeout_s=60)
        fresh = submit_burst(gateway, n=3, pause_s=0.0, intent=INTENT)
        after = all_terminal(gateway, fresh)
        assert all(v["status"] == "succeeded" for v in after.values()), [
            (v["status"], v["error"]) for v in after.values()
        ]
        poll_until(
            lambda: learned(gateway, list(fresh.values())) == 3,
            what="runs after the restart learned",
        )
    worker = next(c for c in stack.children if c.spec.name == "learning-worker")
    assert worker.restarts == 0  # the same worker, reconnected


def test_postgres_down_15s_mid_burst_loses_nothing(gateway: Gateway) -> None:
    stack = gateway.handle.stack
    assert stack.pg is not None
    before = usage(gateway)
    ids = submit_burst(gateway, n=BURST, pause_s=1.0, intent=INTENT)
    running(gateway, ids, 1)
    with Prober(gateway, list(ids.values())) as prober:
        postmaster = stack.pg.pid()
        assert postmaster
        psutil.Process(postmaster).send_signal(signal.SIGKILL)
        time.sleep(15)  # unsupervised: the outage an operator's slow restart would cause
        with gateway.handle.supervised():
            poll_until(stack.pg.running, what="the supervisor restarted Postgres", timeout_s=60)
            poll_until(lambda: healthy(gateway), what="the gateway recovered", timeout_s=60)
    seen = all_terminal(gateway, ids)
    statuses = account(
        gateway, ids, seen, "Postgres SIGKILL, down 15 s", before=before, prober=prober, outage=True
    )
    # Workers retried their writes: runs in flight finished and stored their outcome.
    assert statuses["succeeded"] == BURST, [v["error"] for v in seen.values() if v["error"]]
    # A client retrying with the same idempotency key gets the same execution, no new run.
    with gateway.client() as client:
        for token, execution_id in list(ids.items())[:3]:
            again = client.post(
                "/v1/executions",
                json={
                    "code": CODE,
                    "args": {"token": token, "pause_s": 1.0},
                    "intent": INTENT,
                    "idempotency_key": token,
                },
            )
            assert again.status_code < 300 and again.json()["id"] == execution_id
    assert check_accounted(gateway, ids, seen, "same keys resubmitted")["succeeded"] == BURST


def _health(gateway: Gateway) -> dict[str, Any]:
    response = httpx.get(f"{gateway.handle.gateway_url}/healthz", timeout=10)
    return {"code": response.status_code, **response.json()}


@pytest.mark.parametrize("part", ["sandbox-worker", "toolhost"])
def test_healthz_is_503_naming_a_dead_part_until_the_supervisor_restarts_it(
    gateway: Gateway, part: str
) -> None:
    stack = gateway.handle.stack
    child = next(c for c in stack.children if c.spec.name == part)
    assert child.proc is not None
    check = {"sandbox-worker": "sandbox_workers", "toolhost": "toolhost"}[part]
    psutil.Process(child.proc.pid).send_signal(signal.SIGKILL)
    seen: dict[str, Any] = {}

    def names_it() -> bool:
        seen.update(_health(gateway))
        return seen["code"] == 503 and check in seen["failing"]

    poll_until(names_it, what=f"/healthz naming {check}", timeout_s=30)
    assert seen["failing"] == [check], seen
    with gateway.handle.supervised():
        poll_until(lambda: healthy(gateway), what=f"{part} restarted", timeout_s=120)
    after = run_waiting(gateway, "return await mcp.example.add(a=1, b=2)")
    assert after["status"] == "succeeded" and after["result"] == 3, after
