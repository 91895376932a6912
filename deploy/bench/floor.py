"""The floor of one execution, from its parts: what `bench e2e`'s targets can reach at best.

An execution needs, one after the other and under its guarantees: the client's HTTP request;
the row's INSERT, committed before the message is sent (nothing is lost); a Celery message
from the gateway to a worker and word back (the no-op round trip); the claim, committed
before the code runs (at most once); a run in a fresh confined sandbox (isolation); the
outcome's commit before it is announced (a client reads what is stored). A run with a tool
call adds one round trip of the tool channel (at least a raw Redis request and reply) and
the tool's own call: the bench's echo over stdio from an MCP SDK client, as the toolhost
makes it.

Each part is timed here on the stack being benched, in the same run, with nothing queued in
front of it; their sum is a lower bound on the execution (it leaves out every byte of Python
between the parts), and its ratio to the no-op round trip says which ratio targets no
implementation of that path can meet on this machine. The HTTP part of the bound is a bare
ASGI app under uvicorn (`http_floor`); the gateway's own door (`http_request`: a request its
validation turns away) is timed beside it, as what our middleware costs above that floor.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import redis
from mcp import ClientSession, StdioServerParameters, stdio_client

from deploy.bench import echo_server, rpc
from deploy.bench.sandbox import spare_ready
from shared.db import connect
from shared.executions.status import ExecutionStatus
from shared.sandbox.bridge import run_in_sandbox
from shared.sandbox.launcher import Launcher
from shared.sandbox.limits import SandboxLimits

# Commits an execution's path makes: the INSERT, the claim, the outcome.
COMMITS = 3
# The least an HTTP round trip costs here: uvicorn (as the gateway runs it) and an app that
# answers every request with a small JSON error, as the gateway's validation does.
_BARE_APP = """
import sys, uvicorn
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 422,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"error": "bad"}'})
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


def parts(
    *, gateway_url: str, database_url: str, redis_url: str, noop: Callable[[], float], n: int
) -> dict[str, Any]:
    """Each part's p50 (ms, timed in turn ``n`` times) and the sums they bound."""
    samples: dict[str, list[float]] = {
        "celery_noop": [],
        "http_floor": [],
        "http_request": [],
        "postgres_commit": [],
        "sandbox_run": [],
        "redis_round_trip": [],
        "mcp_call": [],
    }
    launcher = Launcher(prewarm=True)
    launcher.start()
    ctx = mp.get_context("spawn")
    echo_started = ctx.Event()
    echo = ctx.Process(target=rpc._raw_echo_server, args=(redis_url, echo_started), daemon=True)
    echo.start()
    limits = SandboxLimits(wall_time_s=10)
    try:
        with (
            _bare_server() as bare_url,
            httpx.Client(base_url=bare_url, timeout=30) as bare,
            httpx.Client(base_url=gateway_url, timeout=30) as http,
            connect(database_url) as conn,
            redis.Redis.from_url(redis_url, socket_timeout=10) as raw,
        ):
            if not echo_started.wait(rpc.STARTUP_TIMEOUT_S):
                raise RuntimeError("the raw echo server did not start")

            async def sample_all() -> None:
                async with _mcp_session() as session:
                    await spare_ready(launcher, limits)
                    for i in range(n + 5):  # the first rounds warm every part up
                        got = {
                            "celery_noop": noop(),
                            "http_floor": _http_request(bare),
                            "http_request": _http_request(http),
                            "postgres_commit": _commit(conn),
                            "sandbox_run": await _sandbox_run(launcher, limits),
                            "redis_round_trip": rpc._raw_round_trip(raw),
                            "mcp_call": await _mcp_call(session, i),
                        }
                        if i >= 5:
                            for key, ms in got.items():
                                samples[key].append(ms)

            asyncio.run(sample_all())
    finally:
        echo.terminate()
        echo.join(5)
        launcher.stop()
    p50 = {key: round(statistics.median(values), 2) for key, values in samples.items()}
    return {"n": n, **bounds(p50)}


def bounds(p50: dict[str, float]) -> dict[str, Any]:
    """The parts' sums for a run without and with one tool call, and their ratios to the no-op.
    The gateway's own door (``http_request``) is reported, not summed: the bare floor is."""
    commits = COMMITS * p50["postgres_commit"]
    no_tool = p50["http_floor"] + commits + p50["celery_noop"] + p50["sandbox_run"]
    one_tool = no_tool + p50["redis_round_trip"] + p50["mcp_call"]
    return {
        "parts_p50_ms": p50,
        "commits": COMMITS,
        "no_tool_lower_bound_ms": round(no_tool, 2),
        "one_tool_lower_bound_ms": round(one_tool, 2),
        "no_tool_lower_bound_vs_celery_noop": round(no_tool / p50["celery_noop"], 2),
        "one_tool_lower_bound_vs_celery_noop": round(one_tool / p50["celery_noop"], 2),
    }


@asynccontextmanager
async def _mcp_session() -> AsyncIterator[ClientSession]:
    """A session with `bench:echo` (deploy/bench/echo_server.py) over stdio."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "deploy.bench.echo_server"], cwd=str(echo_server.ROOT)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def _mcp_call(session: ClientSession, i: int) -> float:
    started = time.perf_counter()
    result = await session.call_tool("echo", {"n": i})
    elapsed = (time.perf_counter() - started) * 1000
    if result.is_error:
        raise RuntimeError(f"the echo tool failed: {result}")
    return elapsed


@contextmanager
def _bare_server() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", _BARE_APP, str(port)])
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the bare HTTP server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _http_request(http: httpx.Client) -> float:
    """A run's request (POST /v1/executions) that is turned away before any database or broker
    work: on the gateway, by its validation; on the bare app, every request is."""
    started = time.perf_counter()
    response = http.post("/v1/executions", json={"code": 1})
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 422:
        raise RuntimeError(f"expected 422 for a malformed run, got {response.status_code}")
    return elapsed


def _commit(conn: Any) -> float:
    """One transaction that writes (an xid, so its commit is flushed to the WAL), committed."""
    started = time.perf_counter()
    conn.execute("SELECT txid_current()")
    conn.commit()
    return (time.perf_counter() - started) * 1000


async def _sandbox_run(launcher: Launcher, limits: SandboxLimits) -> float:
    """``return 1`` in a confined child that was made ahead (as a worker's spare is), to its
    outcome; the child's reaping and the next child's making run afterwards, untimed."""
    teardown: list[Callable[[], None]] = []
    started = time.perf_counter()
    outcome = await run_in_sandbox(
        code="return 1", limits=limits, launcher=launcher, teardown=teardown
    )
    elapsed = (time.perf_counter() - started) * 1000
    for step in teardown:
        step()
    await spare_ready(launcher, limits)  # made before the next part is timed, not during it
    if outcome.status != ExecutionStatus.SUCCEEDED:
        raise RuntimeError(f"the sandbox floor run failed: {outcome.error}")
    return elapsed
