"""A run's child is killed before ``run_in_sandbox`` returns, even when the caller defers the
rest of the teardown (waiting for its end, removing its cgroup, making the next child) until
its outcome is out, as the sandbox worker does: nothing the code started outlives its run."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from shared.executions.status import ExecutionStatus
from shared.sandbox.launcher import SandboxProcess, get_launcher
from shared.sandbox.limits import SandboxLimits
from tests.integration.sandbox.conftest import Run, leaked_processes

pytestmark = pytest.mark.integration

# Code that would go on running after its result if it could: a thread spinning forever.
SPINNING = """
import threading
def spin():
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
return 7
"""


async def test_a_deferred_teardown_still_kills_the_child_before_the_outcome(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    launcher = get_launcher()
    spawned: list[SandboxProcess] = []
    spawn = launcher.spawn

    async def recording(*args: Any, **kwargs: Any) -> SandboxProcess:
        proc = await spawn(*args, **kwargs)
        spawned.append(proc)
        return proc

    monkeypatch.setattr(launcher, "spawn", recording)
    teardown: list[Callable[[], None]] = []

    outcome = await run(SPINNING, teardown=teardown)

    assert outcome.status == ExecutionStatus.SUCCEEDED and outcome.result == 7
    assert len(teardown) == 1  # the rest is the caller's, to await later
    (proc,) = spawned
    # Killed already: dying or dead, never running code again (it waits to be reaped).
    assert _killed(proc.pid)
    teardown.pop()()
    assert not psutil.pid_exists(proc.pid) or psutil.Process(proc.pid).status() == "zombie"
    if proc.cgroup is not None:
        assert not any(path.exists() for path in proc.cgroup.dirs.values())
    for _ in range(500):  # the next child is being made (in a thread): wait until it waits
        if not launcher._filling:
            break
        time.sleep(0.01)
    assert leaked_processes() == []


def _killed(pid: int) -> bool:
    """``pid`` is gone, a zombie, exiting, or has SIGKILL pending (taken when it next runs)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as status:
            lines = dict(line.split(":", 1) for line in status if ":" in line)
    except (FileNotFoundError, ProcessLookupError):
        return True
    state, flags = fields[0], int(fields[6])  # fields 3 and 9 of proc(5)
    pending = int(lines["ShdPnd"], 16) | int(lines["SigPnd"], 16)
    return state in {"Z", "X"} or bool(flags & PF_EXITING) or bool(pending & SIGKILL_BIT)


PF_EXITING = 0x4
SIGKILL_BIT = 1 << 8


async def test_a_run_that_comes_while_the_next_child_is_made_takes_that_child(
    limits: SandboxLimits, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a loaded machine the child made after the last run may not be ready when the next
    # run starts: that run waits for it instead of forking a second child beside it.
    launcher = get_launcher()
    while launcher.has_ready(limits):  # no spare: the next child is still being made
        spare = await launcher.spawn(limits)
        await spare.destroy()
    made: list[int] = []
    spawn_blocking = launcher._spawn_blocking

    def slow(key: str, limits: SandboxLimits) -> Any:
        time.sleep(0.3)  # a fork on a busy machine
        raw = spawn_blocking(key, limits)
        made.append(raw.pid)
        return raw

    monkeypatch.setattr(launcher, "_spawn_blocking", slow)
    launcher.prepare(limits)
    proc = await launcher.spawn(limits)
    try:
        assert made == [proc.pid]
    finally:
        await proc.destroy()
    assert leaked_processes() == []
