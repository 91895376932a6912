"""Real MCP servers for integration tests: config entries, and `python -m services.toolhost` processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

from shared.config import Settings
from shared.queues import HEARTBEAT_PREFIX
from tests.conftest import settings_env

REPO = Path(__file__).resolve().parents[2]
# Where CI installs the published npm server (see NPM_INSTALL below).
NPM_PREFIX = Path(os.environ.get("AGENTCARDS_TEST_NPM_PREFIX", REPO / ".cache" / "npm"))
NPM_INSTALL = [
    "npm", "install", "--prefix", str(NPM_PREFIX), "--no-audit", "--no-fund",
    "@modelcontextprotocol/server-memory",
]  # fmt: skip


def install_memory_server() -> Path:
    """The `mcp-server-memory` binary from npm, installed into a project-local prefix once."""
    binary = NPM_PREFIX / "node_modules" / ".bin" / "mcp-server-memory"
    if not binary.exists():
        done = subprocess.run(NPM_INSTALL, capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not binary.exists():
            pytest.fail(f"`{' '.join(NPM_INSTALL)}` failed:\n{done.stderr[-2000:]}")
    return binary


def npm_server_binary(name: str) -> Path:
    """A binary of the pinned npm servers (tests/npm/install.sh, run once if it is missing)."""
    binary = NPM_PREFIX / "node_modules" / ".bin" / name
    if not binary.exists():
        script = REPO / "tests" / "npm" / "install.sh"
        done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not binary.exists():
            pytest.fail(f"`bash {script}` did not install {name}:\n{done.stderr[-2000:]}")
    return binary


def everything_server(**entry: Any) -> dict[str, Any]:
    """Config entry for `@modelcontextprotocol/server-everything` (npm) over stdio."""
    return {"command": str(npm_server_binary("mcp-server-everything")), "args": ["stdio"], **entry}


def filesystem_server(*directories: Path, **entry: Any) -> dict[str, Any]:
    """Config entry for `@modelcontextprotocol/server-filesystem` (npm) allowed ``directories``."""
    binary = npm_server_binary("mcp-server-filesystem")
    return {"command": str(binary), "args": [str(d) for d in directories], **entry}


def example_server(tmp_path: Path, **env: str) -> dict[str, Any]:
    """Config entry for the project's example server over stdio, with its test-only tools."""
    return {
        "command": sys.executable,
        "args": ["-m", "deploy.examples.example_server"],
        "env": {"EXAMPLE_TEST_TOOLS": "1", "EXAMPLE_NOTES_DIR": str(tmp_path / "notes"), **env},
        "cwd": str(REPO),
    }


def time_server() -> dict[str, Any]:
    """Config entry for `mcp-server-time` (PyPI) over stdio."""
    return {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


def memory_server(binary: Path, tmp_path: Path) -> dict[str, Any]:
    """Config entry for `@modelcontextprotocol/server-memory` (npm) over stdio."""
    return {"command": str(binary), "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}}


def hanging_server() -> dict[str, Any]:
    """Config entry for a real process that starts and never answers `initialize`."""
    return {"command": sys.executable, "args": ["-c", "import time; time.sleep(3600)"]}


def crashing_server(message: str) -> dict[str, Any]:
    """Config entry for a real process that writes ``message`` to stderr and exits with 3."""
    code = f"import sys; print('starting'); print({message!r}, file=sys.stderr); sys.exit(3)"
    return {"command": sys.executable, "args": ["-c", code]}


def write_config(path: Path, servers: dict[str, Any]) -> Path:
    """Write an mcpServers file and return its path."""
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


CRASH_MESSAGE = "fatal: MEMORY_API_KEY is not set"


def example_and_crashing_config(tmp_path: Path) -> Path:
    """A config with the example server and ``crashy``, which exits saying CRASH_MESSAGE."""
    servers = {"example": example_server(tmp_path), "crashy": crashing_server(CRASH_MESSAGE)}
    return write_config(tmp_path / "mcp.json", servers)


class ToolhostProcess:
    """A real toolhost process started for a test."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path, redis_url: str) -> None:
        self.proc = proc
        self.log_path = log_path
        self._redis = redis.Redis.from_url(redis_url)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def heartbeat(self) -> dict[str, Any] | None:
        for key in self._redis.scan_iter(match=f"{HEARTBEAT_PREFIX}toolhost:*:{self.proc.pid}"):
            raw = self._redis.get(key)
            if raw:
                return dict(orjson.loads(raw))
        return None

    def wait_ready(self, timeout_s: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"toolhost exited early:\n{self.log()[-4000:]}")
            beat = self.heartbeat()
            if beat and beat["ready"]:
                return beat
            time.sleep(0.1)
        raise RuntimeError(f"toolhost not ready after {timeout_s}s:\n{self.log()[-4000:]}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


def toolhost_factory(
    settings: Settings, tmp_path: Path
) -> Iterator[Callable[..., ToolhostProcess]]:
    """Factory starting `python -m services.toolhost` with a config; all are stopped after the test."""
    started: list[ToolhostProcess] = []

    def start(
        config: Path, *, wait: bool = True, extra_env: dict[str, str] | None = None
    ) -> ToolhostProcess:
        log_path = tmp_path / f"toolhost-{len(started)}.log"
        env = settings_env(settings) | {"AGENTCARDS_MCP_CONFIG": str(config)} | (extra_env or {})
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.toolhost"],
            env=env,
            cwd=REPO,
            stdout=log_path.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        host = ToolhostProcess(proc, log_path, settings.redis_url or "")
        started.append(host)
        if wait:
            host.wait_ready()
        return host

    yield start
    for host in started:
        host.stop()


def wait_for(
    predicate: Callable[[], Any], *, timeout_s: float = 30, what: str = "condition"
) -> Any:
    """Poll until ``predicate()`` is truthy; returns its value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
