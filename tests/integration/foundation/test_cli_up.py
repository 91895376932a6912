"""`agentcards up/status/down` as a user runs them: real processes, embedded servers, clean exits."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from typer.testing import CliRunner

from deploy.cli.main import app
from deploy.launcher.embedded import free_port
from shared.config import get_settings
from tests.conftest import server_dir
from tests.harness import wait_until

AGENTCARDS = [sys.executable, "-m", "deploy.cli.main"]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
    env.update(
        {
            "AGENTCARDS_HOME": str(home),
            "AGENTCARDS_GATEWAY_PORT": str(free_port()),
            "AGENTCARDS_FLOWER_PORT": str(free_port()),
            "AGENTCARDS_EMBEDDED_REDIS_PORT": str(free_port()),
            "AGENTCARDS_SANDBOX_WORKERS": "1",
            "COLUMNS": "200",
        }
    )
    env.update(extra)
    return env


def _descendants_named(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _processes_using(home: Path) -> list[psutil.Process]:
    """Any process whose command line or environment points into this test's home."""
    found = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            env = proc.info["environ"] or {}
        except psutil.Error:
            continue
        if str(home) in cmd or env.get("AGENTCARDS_HOME") == str(home):
            found.append(proc)
    return [p for p in found if p.pid != os.getpid()]


def start_up(
    env: dict[str, str], log: Path, *, args: tuple[str, ...] = (), cwd: Path | None = None
) -> tuple[subprocess.Popen[str], str]:
    """`agentcards up` in the background, once it printed its URLs (or exited): process, output."""
    proc = subprocess.Popen(
        [*AGENTCARDS, "up", *args], env=env, cwd=cwd, stdout=log.open("w"),
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while "dashboard" not in log.read_text() and proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            break
        time.sleep(0.5)
    text = log.read_text()
    assert "dashboard" in text, text[-3000:]
    return proc, text


def _run_up_expecting_failure(env: dict[str, str], home: Path) -> str:
    result = subprocess.run(
        [*AGENTCARDS, "up", "--timeout", "60"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert not _processes_using(home), "up left processes behind"
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_bad_database_url_is_one_clear_line(tmp_path: Path) -> None:
    line = _run_up_expecting_failure(
        _env(tmp_path, AGENTCARDS_DATABASE_URL="mysql://x@y/z"), tmp_path
    )
    assert "AGENTCARDS_DATABASE_URL" in line and "postgresql://" in line


def test_missing_mcp_config_is_one_clear_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    line = _run_up_expecting_failure(_env(tmp_path, AGENTCARDS_MCP_CONFIG=str(missing)), tmp_path)
    assert str(missing) in line and "does not exist" in line


def test_gateway_port_in_use_is_one_clear_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = _run_up_expecting_failure(
            _env(tmp_path, AGENTCARDS_GATEWAY_PORT=str(port)), tmp_path
        )
    assert f"port {port}" in line and "AGENTCARDS_GATEWAY_PORT" in line


def test_one_port_for_gateway_and_embedded_redis_is_one_clear_line(tmp_path: Path) -> None:
    port = str(free_port())
    line = _run_up_expecting_failure(
        _env(tmp_path, AGENTCARDS_GATEWAY_PORT=port, AGENTCARDS_EMBEDDED_REDIS_PORT=port),
        tmp_path,
    )
    assert f"port {port} is set for both" in line
    assert "AGENTCARDS_GATEWAY_PORT" in line and "AGENTCARDS_EMBEDDED_REDIS_PORT" in line


def test_redis_down_is_one_clear_line(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    line = _run_up_expecting_failure(_env(tmp_path, AGENTCARDS_REDIS_URL=url), tmp_path)
    assert "Redis" in line and "unreachable" in line


def test_postgres_without_pgvector_is_one_clear_line(
    tmp_path: Path, embedded_pg, redis_url: str
) -> None:  # type: ignore[no-untyped-def]
    # Same real server, but a role that may not create extensions in a database that
    # lacks pgvector: what a user sees pointing `up` at a plain PostgreSQL.
    import psycopg

    with psycopg.connect(embedded_pg.url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS plainpg")
        conn.execute("DROP ROLE IF EXISTS plainuser")
        conn.execute("CREATE ROLE plainuser LOGIN")
        conn.execute("CREATE DATABASE plainpg OWNER plainuser")
    url = embedded_pg.url.replace("postgres:@", "plainuser:@").replace("/postgres?", "/plainpg?")
    line = _run_up_expecting_failure(
        _env(tmp_path, AGENTCARDS_DATABASE_URL=url, AGENTCARDS_REDIS_URL=redis_url), tmp_path
    )
    assert "pgvector" in line


def _keys_close_and_reopen_the_gateway(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agentcards keys` on the running stack: full ids, revoke by name or id prefix, and the
    last key revoked only when a person at a terminal or ``--yes`` says so."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COLUMNS", "80")  # the width that cut ids short
    get_settings.cache_clear()
    cli = CliRunner()  # its stdin is no terminal

    def keys(*args: str, code: int = 0) -> str:
        done = cli.invoke(app, ["keys", *args])
        assert done.exit_code == code, done.output
        return done.output

    created = [keys("create", "--tenant", "acme", "--name", "agents") for _ in range(2)]
    first, second = (re.findall(r"key id\s+(\S+)", out)[0] for out in created)
    listed = json.loads(keys("list", "--json"))
    assert [k["id"] for k in listed] == [first, second] and listed[0]["state"] == "active"
    table = keys("list")
    assert first in table and second in table, table  # whole, at 80 columns
    gateway = f"http://127.0.0.1:{env['AGENTCARDS_GATEWAY_PORT']}"
    assert httpx.get(f"{gateway}/v1/tools", timeout=30).status_code == 401
    status = subprocess.run([*AGENTCARDS, "status"], env=env, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert "access     API key required (2 active)" in status.stdout, status.stdout

    assert f"names 2 keys: {first}" in keys("revoke", "agents", code=1)  # ambiguous
    assert f"revoked {second}" in keys("revoke", second[:8])  # a unique prefix
    # The name now means the one active key, the last: refused without a terminal...
    refused = keys("revoke", "agents", code=1)
    assert "last active key" in refused and "pass --yes" in refused, refused
    # ... and asked at one, where "no" revokes nothing.
    code, said = _at_a_terminal([*AGENTCARDS, "keys", "revoke", "agents"], env, answer="n")
    assert "Revoke it anyway?" in said and "nothing revoked" in said and code == 1, said
    assert json.loads(keys("list", "--json"))[0]["state"] == "active"
    revoked = keys("revoke", first[:6], "--yes")
    assert f"revoked {first}" in revoked and "the gateway is open" in revoked, revoked
    # Open again, once the gateway's "any key?" answer (kept 5 s, shared/auth/cache.py) expires.
    wait_until(
        lambda: httpx.get(f"{gateway}/v1/tools", timeout=30).status_code == 200,
        what="the gateway open again",
        timeout_s=15,
    )
    get_settings.cache_clear()


def _at_a_terminal(argv: list[str], env: dict[str, str], *, answer: str) -> tuple[int, str]:
    """Run ``argv`` on a pseudo-terminal, typing ``answer`` once it asks: exit code, output."""
    main, child = pty.openpty()
    proc = subprocess.Popen(argv, env=env, stdin=child, stdout=child, stderr=child)
    os.close(child)
    said, answered = b"", False
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        said += chunk
        if not answered and b"[y/N]" in said:
            os.write(main, answer.encode() + b"\n")
            answered = True
    os.close(main)
    return proc.wait(60), said.decode(errors="replace")


@pytest.fixture
def running_stack(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, str], Path]]:
    home = server_dir("up")  # embedded Postgres must be reachable by its own user
    env = _env(home)
    log = (tmp_path / "up.log").open("w")
    proc = subprocess.Popen(
        [*AGENTCARDS, "up", "--timeout", "150"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        text = (tmp_path / "up.log").read_text()
        if "all healthy" in text or proc.poll() is not None:
            break
        time.sleep(0.5)
    text = (tmp_path / "up.log").read_text()
    assert "all healthy" in text, text[-3000:]
    yield proc, env, home
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        for child in _processes_using(home):
            child.kill()
    shutil.rmtree(home, ignore_errors=True)


def test_up_status_down_on_a_fresh_home(
    running_stack: tuple[subprocess.Popen[str], dict[str, str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proc, env, home = running_stack
    status = subprocess.run(
        [*AGENTCARDS, "status"], env=env, capture_output=True, text=True, timeout=60
    )
    assert status.returncode == 0, status.stdout + status.stderr
    for part in (
        "postgres",
        "redis",
        "gateway",
        "toolhost",
        "sandbox-worker",
        "learning-worker",
        "beat",
        "flower",
    ):
        assert part in status.stdout
    assert "unhealthy" not in status.stdout
    children = _descendants_named(proc.pid)
    assert len(children) >= 6
    # No key yet: `up` and `status` both say the gateway is open.
    assert "access           open: no API key is active" in (tmp_path / "up.log").read_text()
    assert "access     open: no API key is active" in status.stdout, status.stdout
    _keys_close_and_reopen_the_gateway(env, monkeypatch)

    down = subprocess.run(
        [*AGENTCARDS, "down"], env=env, capture_output=True, text=True, timeout=60
    )
    assert down.returncode == 0, down.stderr
    assert proc.wait(30) == 0
    time.sleep(0.5)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert not _processes_using(home), "processes survived `down`"
    # Data is kept: the embedded servers' directories are still there for the next `up`.
    assert (home / "pgdata" / "PG_VERSION").exists()
    assert (home / "redis" / "redis.conf").exists()
    after = subprocess.run(
        [*AGENTCARDS, "status"], env=env, capture_output=True, text=True, timeout=60
    )
    assert after.returncode == 1 and "no stack is running" in after.stderr


def test_ctrl_c_stops_everything(
    running_stack: tuple[subprocess.Popen[str], dict[str, str], Path],
) -> None:
    proc, _, home = running_stack
    children = _descendants_named(proc.pid)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(40) == 0
    time.sleep(0.5)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert not _processes_using(home)
