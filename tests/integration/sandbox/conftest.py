"""Fixtures for the real-isolation sandbox suite: a planted secret, a runner, host-health checks."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import psutil
import pytest

from shared.sandbox import cgroups
from shared.sandbox.bridge import run_in_sandbox
from shared.sandbox.fsplan import SANDBOX_UID
from shared.sandbox.launcher import get_launcher
from shared.sandbox.limits import SandboxLimits
from shared.sandbox.outcome import ExecutionOutcome
from shared.sandbox.tools import LocalToolRegistry

SECRET = "S3cretPassw0rd-do-not-leak"
SECRET_URL = f"postgresql://u:{SECRET}@db.internal:5432/agentcards"

if not sys.platform.startswith("linux") or os.geteuid() != 0:
    pytest.skip("the sandbox suite needs Linux and root (as in CI)", allow_module_level=True)

Run = Callable[..., Awaitable[ExecutionOutcome]]


@pytest.fixture(scope="module", autouse=True)
def planted_secret() -> Iterator[str]:
    """A credential in this (worker-like) process's environment, as a real worker would have."""
    saved = {k: os.environ.get(k) for k in ("AGENTCARDS_DATABASE_URL", "AGENTCARDS_TEST_SECRET")}
    os.environ["AGENTCARDS_DATABASE_URL"] = SECRET_URL
    os.environ["AGENTCARDS_TEST_SECRET"] = SECRET
    yield SECRET
    for key, value in saved.items():  # later suites must not inherit the fake credential
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def limits() -> SandboxLimits:
    """Defaults with a short wall clock so attacks that hang end quickly."""
    return SandboxLimits(wall_time_s=3.0)


@pytest.fixture
def registry() -> LocalToolRegistry:
    """In-process tools used by the suite."""
    import asyncio

    async def slow(x: int) -> int:
        await asyncio.sleep(0.3)
        return x

    def bomb() -> Any:
        value: Any = ["x" * 10]
        for _ in range(40):  # 2**40 leaves once encoded: an exponential "JSON bomb"
            value = [value, value]
        return value

    def deep() -> Any:
        value: Any = []
        for _ in range(100_000):
            value = [value]
        return value

    reg = LocalToolRegistry()
    reg.register("t:echo", lambda **kw: kw)
    reg.register("t:slow", slow)
    reg.register("t:fail", lambda: 1 / 0)
    reg.register("t:bomb", bomb)
    reg.register("t:bigint", lambda: 10**5000)
    reg.register("t:deep", deep)
    reg.register("t:huge", lambda: "x" * (8 << 20))
    return reg


@pytest.fixture
def run(limits: SandboxLimits, registry: LocalToolRegistry) -> Run:
    """Run code with the suite's limits and tools; keyword overrides pass through."""

    async def _run(code: str, **kwargs: Any) -> ExecutionOutcome:
        kwargs.setdefault("limits", limits)
        kwargs.setdefault("tools", registry.specs())
        kwargs.setdefault("backend", registry)
        return await run_in_sandbox(code=code, **kwargs)

    return _run


def leaked_processes() -> list[int]:
    """Live sandbox-user processes other than the zygote (2 processes) and waiting spares."""
    launcher = get_launcher()
    allowed = {raw.pid for raw in launcher._ready.values()}
    for pid in list(allowed):  # a TypeScript spare's Deno waits inside it, started ahead
        with contextlib.suppress(psutil.Error):
            allowed.update(c.pid for c in psutil.Process(pid).children(recursive=True))
    if launcher._proc is not None:
        allowed.add(launcher._proc.pid)
        with contextlib.suppress(psutil.Error):
            allowed.update(c.pid for c in psutil.Process(launcher._proc.pid).children())
    out = []
    for proc in psutil.process_iter(["uids", "status"]):
        uids = proc.info.get("uids")
        if uids is None or uids.real != SANDBOX_UID or proc.pid in allowed:
            continue
        if proc.info.get("status") != psutil.STATUS_ZOMBIE and not _foreign(proc.pid):
            out.append(proc.pid)
    return out


def _lineage(pid: int) -> list[int]:
    """``pid`` and its ancestors up to pid 1 (as far as they are still alive)."""
    out: list[int] = []
    with contextlib.suppress(psutil.Error):
        proc: psutil.Process | None = psutil.Process(pid)
        while proc is not None and len(out) < 256:
            out.append(proc.pid)
            proc = proc.parent()
    return out


def _foreign(pid: int) -> bool:
    """A sandbox-user process another process on this host runs (another test session's or a
    worker's launcher), which this session must not count as its leak.

    Its owner is its first ancestor that is not the sandbox user. It is this session's when
    the owner is this process or under it; an escaped process is reparented to one of this
    process's ancestors (pid 1 or a subreaper), so it is never foreign and still counts.
    """
    lineage = _lineage(pid)
    owner = None
    for ancestor in lineage[1:]:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(ancestor).uids().real != SANDBOX_UID:
                owner = ancestor
                break
    if owner is None:
        return False
    return os.getpid() not in _lineage(owner) and owner not in _lineage(os.getpid())


def busy_cgroups() -> list[str]:
    """Execution cgroups that still hold processes, other than the waiting spares'."""
    launcher = get_launcher()
    spares = {
        str(path)
        for raw in launcher._ready.values()
        if raw.cgroup
        for path in raw.cgroup.dirs.values()
    }
    out = []
    for controller in ("memory", "pids"):
        base = cgroups.ROOT / controller / cgroups.PARENT
        for group in base.iterdir() if base.is_dir() else []:
            try:
                procs = (group / "cgroup.procs").read_text().split()
            except OSError:  # removed between listing and reading (ENOENT, ENODEV): not busy
                continue
            if procs and str(group) not in spares and not all(_foreign(int(p)) for p in procs):
                out.append(str(group))
    return out


@pytest.fixture
def host_intact(run: Run) -> Callable[[], Awaitable[None]]:
    """After an attack: no leaked processes, no leaked cgroups, and the next execution works."""

    async def check() -> None:
        # A spare may be mid-creation (alive but not yet registered): poll until stable.
        deadline = time.monotonic() + 5
        while True:
            leaked, busy = leaked_processes(), busy_cgroups()
            if not (leaked or busy) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert not leaked
        assert not busy
        outcome = await run("40 + 2")
        assert outcome.status == "succeeded", outcome.error
        assert outcome.result == 42

    return check


@pytest.fixture
def listeners() -> Iterator[dict[str, object]]:
    """A TCP listener, an HTTP server, a unix socket in host /tmp and an abstract socket."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"REACHED")

        def log_message(self, *args: object) -> None:
            pass

    http = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    tmpdir = tempfile.mkdtemp(dir="/tmp")
    path = f"{tmpdir}/redis.sock"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(path)
    unix.listen()
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0agentcards-sandbox-test")
    abstract.listen()
    yield {"tcp": tcp.getsockname()[1], "http": http.server_port, "unix": path}
    http.shutdown()
    for s in (tcp, unix, abstract):
        s.close()
