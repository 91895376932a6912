"""Faults on a stack started as `agentcards up` starts it: embedded Redis and Postgres die mid-burst.

The harness's supervisor restarts them; every execution still ends in one terminal
state, no note is written twice, and learning catches up (each succeeded run learned
once). The fault-table row of each test is printed (``pytest -s`` shows it).
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import psutil
import pytest

from deploy.launcher.harness import StackHandle, temporary_stack
from shared.db import connect
from tests.integration.faults.accounting import (
    CODE,
    INTENT,
    all_terminal,
    check_accounted,
    poll_until,
    run_waiting,
    running,
    submit_burst,
)
from tests.integration.mcp_servers import example_server

BURST = 12


@dataclass
class Gateway:
    handle: StackHandle

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.handle.gateway_url, timeout=90)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("supervised")
    config = tmp / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"example": example_server(tmp)}}))
    with temporary_stack(mcp_config=config, sandbox_workers=2, timeout_s=240) as handle:
        yield Gateway(handle)


def _healthy(gateway: Gateway) -> bool:
    try:
        return httpx.get(f"{gateway.handle.gateway_url}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _learned(gateway: Gateway, ids: dict[str, str]) -> int:
    with connect(gateway.handle.settings.database_url or "") as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM executions WHERE id = ANY(%s) AND learned_at IS NOT NULL",
            (list(ids.values()),),
        ).fetchone()
    return int(row["n"]) if row else 0


def _usage(gateway: Gateway) -> tuple[int, int]:
    """The burst capability's (usage, success) counts (every burst runs the same code)."""
    with connect(gateway.handle.settings.database_url or "") as conn:
        row = conn.execute(
            "SELECT coalesce(sum(usage_count), 0) AS u, coalesce(sum(success_count), 0) AS s "
            "FROM capabilities WHERE intent = %s",
            (INTENT,),
        ).fetchone()
    return (int(row["u"]), int(row["s"])) if row else (0, 0)


def _learning(
    gateway: Gateway, ids: dict[str, str], seen: dict[str, dict[str, Any]], before: tuple[int, int]
) -> dict[str, object]:
    """Wait until every succeeded run is learned; the row's learning columns.

    Exactly once: the capability's success count grew by the succeeded runs, and its
    usage count by no more than the executions learned.
    """
    succeeded = sum(v["status"] == "succeeded" for v in seen.values())

    def delta() -> tuple[int, int]:
        usage, success = _usage(gateway)
        return usage - before[0], success - before[1]

    try:
        poll_until(lambda: delta()[1] >= succeeded, what="learning caught up", timeout_s=120)
    except AssertionError:
        raise AssertionError(
            f"learning did not catch up: {succeeded} succeeded, (usage, success) delta "
            f"{delta()}, {_learned(gateway, ids)} learned"
        ) from None
    learned = _learned(gateway, ids)
    usage, success = delta()
    return {
        "learned": learned,
        "usage_delta": usage,
        "success_delta": success,
        # Runs failed by a tool are learned without counting as a use (verdict tool_failures).
        "usage_match": success == succeeded and succeeded <= usage <= learned,
    }


def _account(
    gateway: Gateway,
    ids: dict[str, str],
    seen: dict[str, dict[str, Any]],
    before: tuple[int, int],
    fault: str,
    prober: Prober,
) -> Counter[str]:
    """The fault-table row, learning and the gateway's answers included; checks all three."""
    learning = _learning(gateway, ids, seen, before)
    statuses = check_accounted(gateway, ids, seen, fault, **learning, **prober.check())
    assert learning["usage_match"], learning
    return statuses


@dataclass
class Prober:
    """POSTs a submission every 0.5 s while a fault lasts: every answer is 2xx or our 503."""

    gateway: Gateway
    answers: list[tuple[int, float, dict[str, Any]]] = field(default_factory=list)
    hung: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Prober:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        # A short timeout: an answer later than this is a hang, whatever its status.
        with httpx.Client(base_url=self.gateway.handle.gateway_url, timeout=10) as client:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    response = client.post("/v1/executions", json={"code": "return 1"})
                except httpx.HTTPError:
                    self.hung += 1
                else:
                    body = _json(response)
                    body["retry_after"] = response.headers.get("Retry-After")
                    self.answers.append((response.status_code, time.monotonic() - started, body))
                self._stop.wait(0.5)

    def check(self) -> dict[str, object]:
        """Every answer during the fault was 202 or our 503 envelope; the row's gateway columns."""
        unavailable = [a for a in self.answers if a[0] == 503]
        for _, _, body in unavailable:
            assert body["retry_after"], body
            assert body["error"]["type"] == "unavailable", body
        other_5xx = [a for a in self.answers if a[0] >= 500 and a[0] != 503]
        assert not other_5xx, other_5xx
        assert self.hung == 0
        assert unavailable  # the fault was seen
        return {
            "gateway_503": len(unavailable),
            "gateway_other_5xx": len(other_5xx),
            "gateway_max_s": round(max(a[1] for a in self.answers), 2),
        }


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {"text": response.text[:200]}
    return body if isinstance(body, dict) else {"body": body}


def test_embedded_redis_killed_is_restarted_and_the_burst_completes(gateway: Gateway) -> None:
    stack = gateway.handle.stack
    assert stack.redis is not None
    before = _usage(gateway)
    with gateway.handle.supervised():
        ids = submit_burst(gateway, n=BURST, pause_s=1.0, intent=INTENT)
        running(gateway, ids, 1)
        time.sleep(1.5)  # the AOF is fsynced every second: the queued messages are on disk
        old = stack.redis.process.pid
        with Prober(gateway) as prober:
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
            poll_until(lambda: _healthy(gateway), what="the gateway recovered", timeout_s=60)
        seen = all_terminal(gateway, ids)
        statuses = _account(gateway, ids, seen, before, "embedded Redis SIGKILL", prober)
        assert statuses["cancelled"] == 0  # a lost broker connection is never a cancel request
        # Messages still queued when Redis died come back from the AOF and run.
        assert statuses["succeeded"] >= BURST - 2, statuses  # two sandbox slots were in flight
        # The learning worker that lived through the restart consumes again: new runs are
        # learned. Still supervised, as a stack always is: a child the Redis loss took down
        # is restarted before these run.
        poll_until(lambda: _healthy(gateway), what="the gateway healthy", timeout_s=60)
        fresh = submit_burst(gateway, n=3, pause_s=0.0, intent=INTENT)
        after = all_terminal(gateway, fresh)
        assert all(v["status"] == "succeeded" for v in after.values()), [
            (v["status"], v["error"]) for v in after.values()
        ]
        poll_until(lambda: _learned(gateway, fresh) == 3, what="runs after the restart learned")
    worker = next(c for c in stack.children if c.spec.name == "learning-worker")
    assert worker.restarts == 0  # the same worker, reconnected


def test_postgres_down_15s_mid_burst_loses_nothing(gateway: Gateway) -> None:
    stack = gateway.handle.stack
    assert stack.pg is not None
    before = _usage(gateway)
    ids = submit_burst(gateway, n=BURST, pause_s=1.0, intent=INTENT)
    running(gateway, ids, 1)
    with Prober(gateway) as prober:
        postmaster = stack.pg.pid()
        assert postmaster
        psutil.Process(postmaster).send_signal(signal.SIGKILL)
        time.sleep(15)  # unsupervised: the outage an operator's slow restart would cause
        with gateway.handle.supervised():
            poll_until(stack.pg.running, what="the supervisor restarted Postgres", timeout_s=60)
            poll_until(lambda: _healthy(gateway), what="the gateway recovered", timeout_s=60)
    seen = all_terminal(gateway, ids)
    statuses = _account(gateway, ids, seen, before, "Postgres SIGKILL, down 15 s", prober)
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
        poll_until(lambda: _healthy(gateway), what=f"{part} restarted", timeout_s=120)
    after = run_waiting(gateway, "return await mcp.example.add(a=1, b=2)")
    assert after["status"] == "succeeded" and after["result"] == 3, after
