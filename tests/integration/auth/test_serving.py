"""Serving without keys: loopback only, refusal beyond it unless AUTH=off; `agentcards mcp` and its key."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from deploy.launcher.embedded import free_port
from services.gateway.app import create_app
from shared.config import Settings
from tests.harness import spawn
from tests.stack import settings_env, tool_error

MakeKey = Callable[..., tuple[str, dict[str, str]]]
REPO = Path(__file__).resolve().parents[3]


def _gateway(
    settings: Settings, tmp_path: Path, **env: str
) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / f"gateway-{time.monotonic_ns()}.log"
    proc = spawn(  # stopped at exit, and dies with pytest, if the test is cut short
        [sys.executable, "-m", "services.gateway"],
        env=settings_env(settings) | env,
        cwd=REPO,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    return proc, log


def test_without_keys_the_gateway_refuses_a_public_bind_in_one_line(
    settings: Settings, tmp_path: Path
) -> None:
    assert Settings(env="test").gateway_host == "127.0.0.1"  # the default is loopback
    proc, log = _gateway(
        settings,
        tmp_path,
        AGENTCARDS_GATEWAY_HOST="0.0.0.0",
        AGENTCARDS_GATEWAY_PORT=str(free_port()),
    )
    assert proc.wait(120) == 2
    lines = log.read_text().strip().splitlines()
    assert len(lines) == 1, lines
    assert "refusing to listen on 0.0.0.0" in lines[0]
    assert "agentcards keys create" in lines[0] and "AGENTCARDS_AUTH=off" in lines[0]


def test_auth_off_serves_a_public_bind_and_says_so(settings: Settings, tmp_path: Path) -> None:
    port = free_port()
    proc, log = _gateway(
        settings,
        tmp_path,
        AGENTCARDS_GATEWAY_HOST="0.0.0.0",
        AGENTCARDS_GATEWAY_PORT=str(port),
        AGENTCARDS_AUTH="off",
    )
    try:
        deadline = time.monotonic() + 120
        answered = None
        while answered is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                answered = httpx.get(f"http://127.0.0.1:{port}/v1/tools", timeout=2).status_code
            except httpx.HTTPError:
                time.sleep(0.2)
        assert answered == 200, log.read_text()[-3000:]
        assert "WARNING: AGENTCARDS_AUTH=off: API keys are NOT checked" in log.read_text()
    finally:
        proc.terminate()
        proc.wait(30)


async def _mcp(
    settings: Settings, *, key: str | None, calls: list[tuple[str, dict[str, Any]]]
) -> list[Any]:
    env = settings_env(settings)
    if key is not None:
        env["AGENTCARDS_API_KEY"] = key
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "deploy.cli.main", "mcp"], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return [await session.call_tool(name, args) for name, args in calls]


def _tool_error(result: Any) -> dict[str, Any]:
    return tool_error(result)


def _stdio_refusal(settings: Settings, key: str | None) -> subprocess.CompletedProcess[str]:
    env = settings_env(settings)
    if key is not None:
        env["AGENTCARDS_API_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "deploy.cli.main", "mcp"],
        env=env, cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


async def test_stdio_mcp_needs_a_valid_key_once_keys_exist(
    settings: Settings, make_key: MakeKey
) -> None:
    _, a = make_key("tenant-a", max_concurrent=1)
    _, b = make_key("tenant-b")
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as client:
        # No worker here: it stays queued and holds the key's one slot (for its timeout + slack).
        run = client.post(
            "/v1/executions", json={"code": "return 1", "timeout_s": 300}, headers=a
        ).json()

    missing = _stdio_refusal(settings, None)
    assert missing.returncode == 1
    assert "set AGENTCARDS_API_KEY" in missing.stderr and "Traceback" not in missing.stderr
    wrong = _stdio_refusal(settings, "ack_" + "z" * 43)
    assert wrong.returncode == 1 and "unknown or revoked" in wrong.stderr

    key_a = a["Authorization"].removeprefix("Bearer ")
    key_b = b["Authorization"].removeprefix("Bearer ")
    (own, limited) = await _mcp(
        settings,
        key=key_a,
        calls=[
            ("get_execution", {"execution_id": run["id"]}),
            ("execute_code", {"code": "return 2"}),
        ],
    )
    assert not own.is_error
    assert limited.is_error  # the REST run above holds this key's one concurrent slot
    error = _tool_error(limited)
    assert error["type"] == "rate_limited" and error["details"]["retry_after_s"] >= 1
    (other,) = await _mcp(
        settings, key=key_b, calls=[("get_execution", {"execution_id": run["id"]})]
    )
    assert other.is_error and _tool_error(other)["type"] == "not_found"
