"""`agentcards up/status/mcp` tell the truth about MCP servers: real processes, real servers."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import server_dir
from tests.integration.foundation.test_cli_up import AGENTCARDS, _env, _processes_using, start_up
from tests.integration.mcp_servers import (
    CRASH_MESSAGE,
    crashing_server,
    example_server,
    hanging_server,
    write_config,
)

pytestmark = pytest.mark.integration


TYPO = """{
  "mcpServers": {
    "example": {
      "comand": "python",
      "args": ["-m", "deploy.examples.example_server"]
    }
  }
}
"""


@pytest.mark.parametrize(
    ("content", "where", "message"),
    [
        ('{\n  "mcpServers": {\n    "s": {"command": "x",}\n  }\n}', "line 3 column 26", "not valid JSON"),
        ('{\n  "servers": {}\n}', "line 2 column 3", 'expected the top-level key "mcpServers"'),
        (TYPO, "line 4 column 7", "server 'example': missing 'command'"),
    ],
    ids=["bad-json", "wrong-top-level-key", "bad-field"],
)  # fmt: skip
def test_broken_config_ends_up_at_once(
    tmp_path: Path, content: str, where: str, message: str
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(content)
    home = tmp_path / "home"
    result = subprocess.run(
        [*AGENTCARDS, "up"],
        env=_env(home, AGENTCARDS_MCP_CONFIG=str(config)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert str(config) in errors[0] and where in errors[0] and message in errors[0]
    # Refused before anything slow started: no database, no Redis, no process left.
    assert not (home / "pgdata").exists() and not (home / "redis").exists()
    assert not _processes_using(home)


@pytest.fixture(scope="module")
def stack_with_failing_servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, dict[str, str], Path]]:
    """`up` with the example server, one that never answers and one that crashes on start."""
    tmp_path = tmp_path_factory.mktemp("up-health")
    home = server_dir("up-health")
    config = write_config(
        tmp_path / "mcp.json",
        {
            "example": example_server(tmp_path),
            "stuck": hanging_server(),
            "crashy": crashing_server(CRASH_MESSAGE),
        },
    )
    env = _env(home, AGENTCARDS_MCP_CONFIG=str(config), AGENTCARDS_MCP_CONNECT_TIMEOUT_S="15")
    proc, text = start_up(env, tmp_path / "up.log", args=("--timeout", "240"))
    try:
        yield text, env, home
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        for child in _processes_using(home):
            child.kill()
        shutil.rmtree(home, ignore_errors=True)


def test_up_waits_for_every_server_then_says_which_failed_and_why(
    stack_with_failing_servers: tuple[str, dict[str, str], Path],
) -> None:
    text, env, _ = stack_with_failing_servers
    lines = text.splitlines()
    # A live line per server as it settles, before the announcement.
    announced = next(i for i, line in enumerate(lines) if "MCP server(s) failed" in line)
    before = "\n".join(lines[:announced])
    assert "mcp example      ready" in before
    assert "mcp stuck        retrying" in before and "no answer to initialize" in before
    assert "mcp crashy       retrying" in before and CRASH_MESSAGE in before
    assert "2 of 3 MCP server(s) failed" in lines[announced]
    assert "all healthy" not in text
    # Then what the README promises: the URLs ...
    gateway = f"http://127.0.0.1:{env['AGENTCARDS_GATEWAY_PORT']}"
    after = "\n".join(lines[announced:])
    for url in (gateway, f"{gateway}/docs", f"{gateway}/dashboard"):
        assert f" {url}\n" in after + "\n", after
    assert f"http://127.0.0.1:{env['AGENTCARDS_FLOWER_PORT']}" in after
    # ... and which failed and why (the stuck one names the setting to raise).
    assert "stuck: no answer to initialize and tools/list within 15s" in after
    assert "AGENTCARDS_MCP_CONNECT_TIMEOUT_S" in after
    assert f"crashy: Connection closed (code -32000); stderr: {CRASH_MESSAGE}" in after
    # Announced only once the ready server's tools are usable: a search finds them now.
    hits = httpx.post(f"{gateway}/v1/tools/search", json={"query": "add two numbers"}, timeout=30)
    assert hits.status_code == 200
    assert "example:add" in json.dumps(hits.json())
    # /healthz: up (the stack serves), but degraded, each server with its state and error.
    health = httpx.get(f"{gateway}/healthz", timeout=10)
    assert health.status_code == 200 and health.json()["status"] == "degraded"
    servers = {s["name"]: s for s in health.json()["mcp_servers"]}
    assert servers["example"]["state"] == "ready"
    assert CRASH_MESSAGE in servers["crashy"]["last_error"]
    assert "no answer to initialize" in servers["stuck"]["last_error"]


def test_status_lists_each_server_with_its_state_and_last_error(
    stack_with_failing_servers: tuple[str, dict[str, str], Path],
) -> None:
    _, _, home = stack_with_failing_servers
    status, rows = _status(home)
    assert status.returncode == 1, status.stdout + status.stderr  # two servers failed
    for process in ("postgres", "redis", "gateway", "toolhost", "sandbox-worker", "flower"):
        assert "unhealthy" not in rows[process], status.stdout
    assert "ready" in rows["mcp example"]
    assert CRASH_MESSAGE in rows["mcp crashy"]
    assert "no answer to initialize" in rows["mcp stuck"]
    assert "AGENTCARDS_MCP_CONNECT_TIMEOUT_S" in rows["mcp stuck"]


def test_a_server_timing_out_on_initialize_reads_retrying_everywhere(
    stack_with_failing_servers: tuple[str, dict[str, str], Path],
) -> None:
    """One state for a server whose attempt timed out and that is being retried: `up`, the
    REST view (aggregate and per replica), /healthz and `agentcards status` all say
    `retrying`, never `failed (retrying)` in `up` nor `connecting` (or `down`, between
    attempts) elsewhere."""
    text, env, home = stack_with_failing_servers
    assert "mcp stuck        retrying: no answer to initialize" in text
    gateway = f"http://127.0.0.1:{env['AGENTCARDS_GATEWAY_PORT']}"
    # By now the stuck server is in its second attempt or later (15 s each, 0.5 s apart).
    servers = {
        s["name"]: s for s in httpx.get(f"{gateway}/v1/servers", timeout=10).json()["servers"]
    }
    stuck = servers["stuck"]
    assert stuck["state"] == "retrying" and "no answer to initialize" in stuck["last_error"]
    assert [r["state"] for r in stuck["replicas"]] == ["retrying"]
    health = {
        s["name"]: s for s in httpx.get(f"{gateway}/healthz", timeout=10).json()["mcp_servers"]
    }
    assert health["stuck"]["state"] == "retrying"
    status, rows = _status(home)
    assert rows["mcp stuck"].split("│")[3].strip() == "retrying", status.stdout


def _status(home: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """`agentcards status` and its table's rows by first cell."""
    # Only the home: ports and URLs come from the running stack, not from this shell.
    env = _env(home) | {"COLUMNS": "250"}
    for name in ("AGENTCARDS_GATEWAY_PORT", "AGENTCARDS_FLOWER_PORT", "AGENTCARDS_MCP_CONFIG"):
        env.pop(name, None)
    status = subprocess.run(
        [*AGENTCARDS, "status"], env=env, capture_output=True, text=True, timeout=60
    )
    rows = {line.split("│")[1].strip(): line for line in status.stdout.splitlines() if "│" in line}
    return status, rows


def test_mcp_without_a_stack_says_so_at_once(tmp_path: Path) -> None:
    result = subprocess.run(
        [*AGENTCARDS, "mcp"], env=_env(tmp_path), capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "no stack is running" in result.stderr and "agentcards up" in result.stderr
    assert "AGENTCARDS_DATABASE_URL" not in result.stderr
    assert result.stdout == ""  # stdout is the MCP channel: nothing but protocol goes there
