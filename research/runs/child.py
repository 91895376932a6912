"""What a fresh confined sandbox child costs the machine, apart from the run it serves.

    python -m research.runs.child [--n 100]

`bench e2e`'s floor times a run in a child made ahead and leaves the making out; this prints
what the making costs. With every isolation layer on (as a sandbox worker runs), ``n`` runs of
``return 1`` one at a time, each followed by its teardown (the killed child reaped, its cgroup
removed, the next child made, as `sandbox.release` hands it over), then:

- ``system_cpu_ms_per_run_and_child``: the whole machine's CPU (``/proc/stat``, user and
  system, the machine's idle rate measured just before subtracted) per run with its child's
  making and teardown: the children and the processes between them and the zygote exit
  before anything could sample them one by one; ``layers``: the last child's;
- ``launcher_thread_cpu_ms`` and ``teardown_wall_ms``: the teardown as the worker's teardown
  thread sees it (its own CPU, its duration);
- ``event_loop_cpu_ms``: a child's ``asyncio.run`` and stream over its channel (what a spare
  makes while it waits), in a process freshly forked from one holding the child's modules,
  beside the same in the process that forked it: the difference is the first touch of the
  parent's pages (copy-on-write), not Python work.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import socket
import statistics
import time
from collections.abc import Callable
from typing import Any

from shared.sandbox.bridge import run_in_sandbox
from shared.sandbox.child import helpers, runner  # noqa: F401 - what a zygote holds
from shared.sandbox.launcher import Launcher
from shared.sandbox.limits import SandboxLimits


def _busy_ms() -> tuple[float, float]:
    """(user, system) CPU ms of the whole machine so far."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    return (fields[0] + fields[1]) * 1000 / tick, (fields[2] + fields[5] + fields[6]) * 1000 / tick


def _idle_rate() -> tuple[float, float]:
    """The machine's own (user, system) CPU ms per second, measured over one idle second."""
    before = _busy_ms()
    time.sleep(1.0)
    after = _busy_ms()
    return after[0] - before[0], after[1] - before[1]


def children(n: int) -> dict[str, Any]:
    """``n`` runs and their teardowns, one at a time: CPU per child and the teardown's figures."""
    launcher = Launcher(prewarm=True)
    launcher.start()
    limits = SandboxLimits(wall_time_s=10)
    thread_ms: list[float] = []
    wall_ms: list[float] = []
    layers: dict[str, Any] = {}

    async def runs(count: int) -> None:
        for _ in range(count):
            teardown: list[Callable[[], None]] = []
            outcome = await run_in_sandbox(
                code="return 1", limits=limits, launcher=launcher, teardown=teardown
            )
            assert outcome.result == 1, outcome.error
            layers.update(outcome.layers or {})
            started, cpu = time.perf_counter(), time.thread_time()
            for step in teardown:
                step()
            wall_ms.append((time.perf_counter() - started) * 1000)
            thread_ms.append((time.thread_time() - cpu) * 1000)

    try:
        asyncio.run(runs(5))
        thread_ms.clear()
        wall_ms.clear()
        idle = _idle_rate()
        before, started = _busy_ms(), time.perf_counter()
        asyncio.run(runs(n))
        time.sleep(0.5)  # the last child's exit
        after, seconds = _busy_ms(), time.perf_counter() - started
    finally:
        launcher.stop()
    user = (after[0] - before[0] - idle[0] * seconds) / n
    system = (after[1] - before[1] - idle[1] * seconds) / n
    return {
        "n": n,
        "layers": layers,
        "system_cpu_ms_per_run_and_child": {
            "user": round(user, 2),
            "system": round(system, 2),
            "total": round(user + system, 2),
        },
        "launcher_thread_cpu_ms": round(statistics.median(thread_ms), 2),
        "teardown_wall_ms": round(statistics.median(wall_ms), 2),
    }


def _loop_cpu_ms(sock: socket.socket) -> float:
    """CPU ms of a new event loop and a stream over ``sock``, in this process."""
    started = time.process_time()

    async def stream() -> None:
        await asyncio.open_unix_connection(sock=sock, limit=1 << 20)

    asyncio.run(stream())
    return (time.process_time() - started) * 1000


def event_loop(n: int) -> dict[str, float]:
    """A child's loop and stream: in a fresh fork of a process holding its modules, and in
    that process itself."""
    helpers.helper_globals()
    gc.collect()
    gc.freeze()  # as the zygote does before it forks
    forked: list[float] = []
    for _ in range(n):
        ours, theirs = socket.socketpair()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            ours.close()
            os.write(write_end, json.dumps(_loop_cpu_ms(theirs)).encode())
            os._exit(0)
        theirs.close()
        forked.append(json.loads(os.read(read_end, 64)))
        os.waitpid(pid, 0)
        for fd in (read_end, write_end):
            os.close(fd)
        ours.close()
    here: list[float] = []
    for _ in range(n):
        ours, theirs = socket.socketpair()
        here.append(_loop_cpu_ms(theirs))
        ours.close()
    return {
        "forked_child": round(statistics.median(forked), 3),
        "same_process": round(statistics.median(here), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    n = parser.parse_args().n
    out = {**children(n), "event_loop_cpu_ms": event_loop(min(n, 30))}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
