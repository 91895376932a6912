"""Direct calls across a crash: the gateway or the toolhost killed during a burst of direct calls
(``/mcp/servers/example``) loses no record of a call that was answered (executions row, audit
row, trace) and answers no call twice, and the server's resources are listed again after it;
direct calls go on while every sandbox worker is busy. On a gateway just restarted, the
requests waiting on a keyed run wake when it ends.

A stack of its own (supervised: a killed process is restarted), since its gateway and
toolhost get killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import psutil
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from deploy.bench.e2e import wait_synced
from deploy.launcher.harness import StackHandle, temporary_stack
from shared.db import connect
from shared.executions.events import FINISHED
from tests.harness import wait_until
from tests.integration.mcp_servers import example_server

SESSIONS = 6
# The kill comes once this many calls were answered (whatever the machine's load, the
# sessions are up and calling when the process dies); the burst goes on for AFTER_KILL_S.
KILL_AFTER_ANSWERS = SESSIONS * 2
AFTER_KILL_S = 2.5
CALL_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackHandle]:
    tmp = tmp_path_factory.mktemp("direct-records")
    config = tmp / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"example": example_server(tmp)}}))
    with temporary_stack(mcp_config=config, sandbox_workers=1, timeout_s=240) as handle:
        wait_synced(handle.settings.database_url or "", "example:add")
        yield handle


@dataclass(frozen=True)
class Answer:
    a: int  # the call's argument: add(a, 1)
    result: types.CallToolResult

    @property
    def execution_id(self) -> str | None:
        return str((self.result.meta or {}).get("agentcards/execution_id") or "") or None


@contextlib.asynccontextmanager
async def _session(url: str) -> AsyncIterator[ClientSession]:
    async with (
        create_mcp_http_client() as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def _burst(
    url: str, *, seconds: float, first: int, kill: Callable[[], None] | None = None
) -> list[Answer]:
    """``SESSIONS`` sessions calling ``add(a, 1)`` back to back (every ``a`` distinct) for
    ``seconds``, each at least once (a loaded machine can take the whole time to open a
    session); a session whose connection breaks stops. The answers received. With
    ``kill``: called once ``KILL_AFTER_ANSWERS`` calls were answered, while the others are
    in flight, the burst then going on for ``seconds`` (a minute at most in all)."""
    answers: list[Answer] = []
    deadline = time.monotonic() + (60 if kill is not None else seconds)

    async def calls(index: int) -> None:
        nonlocal deadline, kill
        a = first + index * 10_000  # a burst's sessions make far fewer calls each
        with contextlib.suppress(Exception):  # the gateway went away mid-call: unanswered
            async with _session(url) as session:
                while a == first + index * 10_000 or time.monotonic() < deadline:
                    a += 1
                    async with asyncio.timeout(CALL_TIMEOUT_S):
                        result = await session.call_tool("add", {"a": a, "b": 1})
                    answers.append(Answer(a, result))
                    if kill is not None and len(answers) >= KILL_AFTER_ANSWERS:
                        kill, killing = None, kill
                        deadline = min(deadline, time.monotonic() + seconds)
                        killing()

    await asyncio.gather(*(calls(i) for i in range(SESSIONS)))
    return answers


async def _calls(url: str, *, n: int, first: int) -> list[Answer]:
    """``n`` calls in one session, waiting first (up to a minute) for one that succeeds: a
    restarted toolhost connects its server again before it can serve it."""
    answers: list[Answer] = []
    async with _session(url) as session:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            first += 1
            result = await session.call_tool("add", {"a": first, "b": 1})
            answers.append(Answer(first, result))
            if not result.is_error:
                break
            await asyncio.sleep(0.5)
        for a in range(first + 1, first + n):
            answers.append(Answer(a, await session.call_tool("add", {"a": a, "b": 1})))
        # The resources path answers too (its RPC connections were idle across the restart).
        assert (await session.list_resources()).resources == []  # the example server has none
    return answers


def _killer(stack: StackHandle, name: str) -> Callable[[], None]:
    """SIGKILL to the stack's process ``name`` (as it runs now)."""
    child = next(c for c in stack.stack.children if c.spec.name == name)
    assert child.proc is not None
    pid = child.proc.pid
    return lambda: psutil.Process(pid).send_signal(signal.SIGKILL)


def _healthy(stack: StackHandle) -> bool:
    try:
        return httpx.get(f"{stack.gateway_url}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _records(stack: StackHandle, ids: list[str]) -> dict[str, Any]:
    with connect(stack.settings.database_url or "") as conn:
        rows = conn.execute(
            "SELECT id::text, status, args, result, trace_summary, extras FROM executions "
            "WHERE id = ANY(%s::uuid[])",
            (ids,),
        ).fetchall()
        audits = conn.execute(
            "SELECT execution_id::text AS id, count(*) AS n FROM audit_log "
            "WHERE execution_id = ANY(%s::uuid[]) GROUP BY 1",
            (ids,),
        ).fetchall()
    return {"rows": {r["id"]: r for r in rows}, "audits": {a["id"]: a["n"] for a in audits}}


def _check_recorded(stack: StackHandle, answers: list[Answer]) -> dict[str, int]:
    """Every answered call (an answer naming its execution) is recorded as it was answered,
    once, with one audit row; no two answers name one execution."""
    recorded = [answer for answer in answers if answer.execution_id]
    ids = [str(answer.execution_id) for answer in recorded]
    assert len(set(ids)) == len(ids), "two answers name one execution"
    assert len({answer.a for answer in answers}) == len(answers), "a call answered twice"
    wait_until(
        lambda: len(_records(stack, ids)["rows"]) == len(ids),
        what=f"the records of {len(ids)} answered calls",
    )
    found = _records(stack, ids)
    for answer in recorded:
        row = found["rows"][str(answer.execution_id)]
        assert row["args"] == {"a": answer.a, "b": 1}, (answer, row)
        assert [c["tool"] for c in row["trace_summary"]["tool_calls"]] == ["example:add"]
        assert row["extras"]["direct"]["tool"] == "example:add"
        if answer.result.is_error:
            assert row["status"] == "failed", (answer, row)
        else:
            assert row["status"] == "succeeded" and row["result"] == answer.a + 1, (answer, row)
        assert found["audits"].get(answer.execution_id) == 1, answer
    return {
        "answered": len(recorded),
        "failed": sum(1 for answer in recorded if answer.result.is_error),
    }


@pytest.mark.parametrize("killed", ["gateway", "toolhost"])
def test_a_process_killed_during_a_burst_of_direct_calls_loses_no_record_of_an_answered_call(
    stack: StackHandle, killed: str
) -> None:
    url = f"{stack.gateway_url}/mcp/servers/example"
    first = 1_000_000 if killed == "gateway" else 2_000_000
    with stack.supervised():
        kill = _killer(stack, killed)
        answers = asyncio.run(_burst(url, seconds=AFTER_KILL_S, first=first, kill=kill))
        wait_until(lambda: _healthy(stack), what=f"the {killed} restarted")
        # After the restart, direct calls are answered (and recorded) again.
        after = asyncio.run(_calls(url, n=5, first=first + 500_000))
    assert answers, answers
    assert not [a for a in after[-5:] if a.result.is_error], after
    counts = _check_recorded(stack, answers + after)
    print(f"{killed} killed: {counts}")


def _follow(url: str, execution_id: str, *, reconnects: int = 0) -> dict[str, Any]:
    """The execution's SSE stream read to its end (after dropping it and reconnecting at once
    ``reconnects`` times, as a client whose connection broke does): the last event's fields."""
    events = f"{url}/v1/executions/{execution_id}/events"
    with httpx.Client(timeout=httpx.Timeout(10, read=120)) as client:
        for _ in range(reconnects):
            with client.stream("GET", events) as response:
                assert response.status_code == 200  # answering; then gone at once
        last: dict[str, Any] = {}
        with client.stream("GET", events) as response:
            for line in response.iter_lines():
                field, _, value = line.partition(": ")
                if field in {"id", "event", "data"}:
                    last[field] = value
                elif not line:
                    last = {} if last.get("event") != FINISHED else last
        return last


def test_a_keyed_run_on_a_restarted_gateway_wakes_every_wait_when_it_ends(
    stack: StackHandle,
) -> None:
    with stack.supervised():
        child = next(c for c in stack.stack.children if c.spec.name == "gateway")
        assert child.proc is not None
        psutil.Process(child.proc.pid).send_signal(signal.SIGKILL)
        wait_until(lambda: _healthy(stack), what="the gateway restarted")
    url = stack.gateway_url
    key = f"restart-{time.time_ns()}"
    body = {"code": "import asyncio\nawait asyncio.sleep(4)\nreturn 42", "idempotency_key": key,
            "timeout_s": 60}  # fmt: skip
    with httpx.Client(base_url=url, timeout=120) as client:
        execution_id = client.post("/v1/executions", json=body).json()["id"]
        with ThreadPoolExecutor(4) as pool:
            # Resubmitted with its key and waited on, and followed by streams at once, one of
            # them dropping and reconnecting: every follower of the run on the new gateway.
            waited = pool.submit(client.post, "/v1/executions", params={"wait": "true"}, json=body)
            streams = [pool.submit(_follow, url, execution_id, reconnects=n) for n in (0, 3, 6)]
            row = waited.result().json()
            ends = [stream.result() for stream in streams]
    assert row["id"] == execution_id and row["status"] == "succeeded" and row["result"] == 42
    for end in ends:
        # The run's own execution.finished, heard live (it has its sequence number): the
        # streams woke when it ended, not when a check of the row found it over.
        assert end.get("event") == FINISHED and end.get("id", "").isdigit(), end
        assert json.loads(end["data"])["status"] == "succeeded"


def test_direct_calls_are_answered_while_every_sandbox_worker_runs_a_long_execution(
    stack: StackHandle,
) -> None:
    code = "import asyncio\nawait asyncio.sleep(60)\nreturn 1"
    with httpx.Client(base_url=stack.gateway_url, timeout=30) as client:
        ids = [
            client.post("/v1/executions", json={"code": code, "timeout_s": 90}).json()["id"]
            for _ in range(stack.settings.sandbox_workers + 1)
        ]

        def statuses() -> list[str]:
            return [client.get(f"/v1/executions/{i}").json()["status"] for i in ids]

        try:
            wait_until(lambda: {"running", "queued"} <= set(statuses()), what="busy workers")
            answers = asyncio.run(
                _burst(f"{stack.gateway_url}/mcp/servers/example", seconds=3.0, first=3_000_000)
            )
            still = statuses()
        finally:
            for execution_id in ids:
                client.post(f"/v1/executions/{execution_id}/cancel")
    assert answers and not [a for a in answers if a.result.is_error], answers
    assert [a.result.structured_content for a in answers[:1]] == [{"result": answers[0].a + 1}], (
        answers[0]
    )
    # Answered while every worker was still busy and a run still waited for one.
    assert "running" in still and "queued" in still, still
    _check_recorded(stack, answers)
