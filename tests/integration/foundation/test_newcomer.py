"""A newcomer's first run, scripted: clean clone, the README's `agentcards up`, two real servers.

Clones the committed HEAD (uncommitted edits are not part of a clean clone), runs the
clone's code (PYTHONPATH) with the packages already installed, in a throwaway home on
free ports, with the clone's own example config: the project's example server and
`mcp-server-time` from PyPI.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import server_dir
from tests.integration.foundation.test_cli_up import AGENTCARDS, _env, _processes_using, start_up

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
TWO_SERVERS = """
total = await mcp.example.add(a=args["a"], b=args["b"])
now = await mcp.time.get_current_time(timezone="UTC")
return {"total": total, "tz": now["timezone"]}
"""


def _readme_run_command(readme: str) -> list[str]:
    """The README's first command, split on `&&`."""
    match = re.search(r"\*\*Run it\*\*.*?```bash\n(.*?)\n```", readme, re.S)
    assert match, "the README lost its **Run it** command"
    return [part.strip() for part in match.group(1).split("&&")]


def _clone(dest: Path) -> Path:
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(dest)], check=True, timeout=120)
    subprocess.run(["git", "-C", str(dest), "checkout", "--quiet", head], check=True)
    return dest


def test_clean_clone_up_two_servers_one_execution_down(tmp_path: Path) -> None:
    clone = _clone(tmp_path / "agentcards")
    steps = _readme_run_command((clone / "README.md").read_text())
    # The installs already ran on this machine; the part left to run is `agentcards up`.
    assert steps[:2] == ["pip install torch==2.13.0", "pip install -e ."], steps
    up = next(step.split() for step in steps if step.startswith("agentcards "))
    assert up == ["agentcards", "up"], steps

    home = server_dir("newcomer")
    config = clone / "deploy" / "examples" / "mcp_servers.json"
    env = _env(home, AGENTCARDS_MCP_CONFIG=str(config)) | {"PYTHONPATH": str(clone)}
    where = subprocess.run(
        [sys.executable, "-c", "import deploy.cli.main as m; print(m.__file__)"],
        env=env, cwd=clone, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(clone)), where.stdout  # the clone's code runs
    proc, text = start_up(env, tmp_path / "up.log", args=tuple(up[2:]), cwd=clone)
    try:
        assert "all healthy" in text, text[-3000:]
        assert "mcp example      ready" in text and "mcp time         ready" in text, text
        assert "example, time: ready" in text

        gateway = f"http://127.0.0.1:{env['AGENTCARDS_GATEWAY_PORT']}"
        body = {"code": TWO_SERVERS, "args": {"a": 40, "b": 2}, "intent": "add, then tell time"}
        reply = httpx.post(
            f"{gateway}/v1/executions", params={"wait": "true"}, json=body, timeout=120
        )
        assert reply.status_code == 200, reply.text
        execution = reply.json()
        assert execution["status"] == "succeeded", execution
        assert execution["result"] == {"total": 42, "tz": "UTC"}
        tools = [c["tool"] for c in execution["tool_calls"]]
        assert tools == ["example:add", "time:get_current_time"]

        announced = (tmp_path / "up.log").read_text()  # printed after the URLs
        # `up` says what is cached and why: a plain entry's clock is never cached.
        assert (
            "cache time       convert_time, get_current_time: not cached (no ttl_s configured: "
            "read-only is not repeatable)" in announced
        ), announced
        assert "cache example" in announced and "not cached (not read-only)" in announced, announced
        stack = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
        assert len(stack) >= 8  # six processes, embedded Redis, MCP servers, workers' pools
        down = subprocess.run(
            [*AGENTCARDS, "down"], env=env, cwd=clone, capture_output=True, text=True, timeout=90
        )
        assert down.returncode == 0 and "stack stopped" in down.stdout, down.stdout + down.stderr
        assert proc.wait(60) == 0
        time.sleep(0.5)
        alive = [p for p in stack if psutil.pid_exists(p) and not _is_zombie(p)]
        assert not alive, [psutil.Process(p).cmdline() for p in alive if psutil.pid_exists(p)]
        assert not _processes_using(home), "a process of the stack survived `down`"
        assert not _postgres_running(home)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        for child in _processes_using(home):
            child.kill()
        shutil.rmtree(home, ignore_errors=True)


def _is_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _postgres_running(home: Path) -> bool:
    """The embedded Postgres writes postmaster.pid while it runs."""
    pid_file = home / "pgdata" / "postmaster.pid"
    if not pid_file.exists():
        return False
    return psutil.pid_exists(int(pid_file.read_text().split()[0] or 0))
