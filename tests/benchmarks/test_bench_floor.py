"""`bench e2e`'s floor: its bounds are the sums of the parts they name, and the parts it times
itself (a bare HTTP round trip, a confined sandbox run, the MCP call) work on this machine."""

from __future__ import annotations

import asyncio
import os
import sys

import httpx
import pytest

from deploy.bench import floor
from shared.sandbox.launcher import Launcher
from shared.sandbox.limits import SandboxLimits

PARTS = {
    "celery_noop": 4.0,
    "http_floor": 1.0,
    "http_request": 2.5,
    "postgres_commit": 0.5,
    "sandbox_run": 2.0,
    "redis_round_trip": 0.5,
    "mcp_call": 2.0,
}


def test_the_bounds_sum_the_parts_a_run_cannot_do_without() -> None:
    out = floor.bounds(PARTS)
    # Bare HTTP + INSERT, claim and outcome commits + the Celery round trip + the sandbox;
    # the gateway's own door (2.5) is above the floor, so not in it.
    assert out["no_tool_lower_bound_ms"] == pytest.approx(1.0 + 3 * 0.5 + 4.0 + 2.0)
    assert out["one_tool_lower_bound_ms"] == pytest.approx(8.5 + 0.5 + 2.0)
    assert out["no_tool_lower_bound_vs_celery_noop"] == pytest.approx(8.5 / 4.0, abs=0.01)
    assert out["one_tool_lower_bound_vs_celery_noop"] == pytest.approx(11.0 / 4.0, abs=0.01)


def test_the_bare_http_floor_answers_as_the_gateway_refuses_a_malformed_run() -> None:
    with floor._bare_server() as url, httpx.Client(base_url=url) as client:
        assert floor._http_request(client) > 0


def test_the_mcp_call_reaches_the_bench_echo_over_stdio() -> None:
    async def call() -> float:
        async with floor._mcp_session() as session:
            return await floor._mcp_call(session, 7)

    assert asyncio.run(call()) > 0


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="needs root")
def test_the_sandbox_part_is_a_confined_run_with_a_spare_made_ahead() -> None:
    launcher = Launcher(prewarm=True)
    launcher.start()
    limits = SandboxLimits(wall_time_s=10)
    try:
        assert asyncio.run(floor._sandbox_run(launcher, limits)) > 0
        assert launcher.has_ready(limits)  # the next one was made before the next part
    finally:
        launcher.stop()
