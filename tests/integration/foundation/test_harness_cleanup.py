"""Stopping the test suite with Ctrl-C or SIGTERM leaves nothing running and no data folder behind.

A pytest run of its own (in a subprocess) starts the session's Postgres and Redis, a Celery
sandbox worker and a toolhost (with a real MCP server) with the suite's fixtures, says so,
and waits. It gets SIGTERM (as from `kill`), or SIGINT on its process group (as a terminal's
Ctrl-C): every process it started is gone afterwards, Postgres (daemonized, not its child)
included, and so are the data folders.

The inner run is started with SIGINT ignored, as a script's background job is (and as it
would inherit whenever the suite itself ran that way: with SIGINT still ignored, the Ctrl-C
case would sleep until its bounded wait gave up). The harness installs Python's SIGINT
handler itself, so the case holds however the suite was started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.integration.mcp_servers import wait_for

REPO = Path(__file__).resolve().parents[3]

PROBE = """
import json
import os
import time
from pathlib import Path

from tests.integration.mcp_servers import time_server, write_config


def test_probe(embedded_pg, redis_server, settings, celery_worker, toolhost, tmp_path):
    worker = celery_worker("workers.sandbox.celery_app", "executions")
    host = toolhost(write_config(tmp_path / "mcp.json", {"time": time_server()}), wait=False)
    info = {
        "postgres": embedded_pg.pid(),
        "folders": [str(embedded_pg.pgdata.parent), str(redis_server.datadir)],
        "started": [worker.proc.pid, host.proc.pid],
    }
    Path(os.environ["PROBE_READY"]).write_text(json.dumps(info))
    time.sleep(600)
"""


def _fresh_env() -> dict[str, str]:
    """The outer suite's environment without what its own fixtures set: the inner run starts
    its own Postgres with its own pgserver runtime folder (lock file), as a first run does."""
    return {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}


def _started_by(run: str) -> list[str]:
    """Live processes carrying the run's marker: everything it started inherits its environment."""
    found = []
    for process in psutil.process_iter(["pid", "status", "cmdline"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE or process.pid == os.getpid():
                continue
            if process.environ().get("PROBE_READY") == run:
                found.append(f"{process.pid} {' '.join(process.info['cmdline'] or [])[:120]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _as_a_background_job() -> None:
    """Runs in the inner pytest before exec: SIGINT ignored, as a non-interactive shell starts
    a background job (``pytest … &`` in a script). Python then installs no SIGINT handler
    at start, and the inherited SIG_IGN survives exec: unless the harness installs its own,
    such a run sleeps through Ctrl-C. The outer suite's own disposition does not matter."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# Its own bounded waits (300 s for the stack, 240 s for the stop) outlast the suite's 300 s
# per test: the suite's timeout must not cut the inner run down before it could clean up.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_an_interrupted_run_stops_what_it_started(tmp_path: Path, how: str) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    ready, log = tmp_path / "ready.json", tmp_path / "pytest.log"
    run = subprocess.Popen(
        [
            sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "tests.integration.conftest",
            "-p", "no:cacheprovider",
            "-q", "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py"),
        ],
        cwd=REPO,
        env=_fresh_env() | {"PROBE_READY": str(ready)},
        stdin=subprocess.DEVNULL,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group, as a terminal's foreground job
        preexec_fn=_as_a_background_job,
    )  # fmt: skip
    try:
        wait_for(lambda: ready.exists() or run.poll() is not None, what="the stack", timeout_s=300)
        assert ready.exists(), log.read_text()[-3000:]
        info = json.loads(ready.read_text())
        running = _started_by(str(ready))
        for pid in [run.pid, info["postgres"], *info["started"]]:  # pg_ctl daemonized Postgres
            assert any(line.startswith(f"{pid} ") for line in running), (pid, running)
        if how == "SIGTERM":
            os.kill(run.pid, signal.SIGTERM)
        else:
            os.killpg(run.pid, signal.SIGINT)
        wait_for(
            lambda: run.poll() is not None, what="pytest to stop", timeout_s=240
        )  # a hang detector, not a speed check
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    assert run.returncode == pytest.ExitCode.INTERRUPTED, log.read_text()[-3000:]
    # The teardown waited for each process; orphans of a killed group are reaped by init.
    wait_for(lambda: not _started_by(str(ready)), what="no process left", timeout_s=15)
    for folder in info["folders"]:
        assert not Path(folder).exists(), folder
