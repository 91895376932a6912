"""What one ``clone()`` into new namespaces would save over the zygote's fork, unshare, fork.

    python -m research.runs.clone [--n 200]    # as root (it unshares a user namespace)

The zygote makes each child in two forks (``shared/sandbox/child/zygote.py``): the first
process unshares the user/mount/pid/net/ipc/uts namespaces, forks pid 1 of them and exits.
A fork copies the process's page tables and an exit tears them down, so the intermediate
process costs a copy, a teardown and its own copy-on-write faults. This measures, in a
process holding what a zygote holds (the child's modules imported, the heap frozen), the
machine's CPU per child (``/proc/stat``, the idle rate subtracted) both ways:

- ``fork_unshare_fork``: as the zygote does, the grandchild making an event loop, then exiting;
- ``one_clone``: the raw ``clone`` syscall with the same namespace flags and ``SIGCHLD``,
  CPython's before/after-fork hooks around it, the child doing the same.

A measurement, not a design: a raw clone skips glibc's own after-fork work (the thread's
cached id among it), which a sandbox child would have to live without.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import os
import time
from collections.abc import Callable

from research.runs.child import _busy_ms, _idle_rate
from shared.sandbox.child import helpers, runner  # noqa: F401 - what a zygote holds

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long
SYS_CLONE = 56  # x86_64
SIGCHLD = 17
NAMESPACES = (
    0x10000000  # CLONE_NEWUSER
    | 0x00020000  # CLONE_NEWNS
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
    | 0x08000000  # CLONE_NEWIPC
    | 0x04000000  # CLONE_NEWUTS
)


def _child_work() -> None:
    """A little of what a child does before its run: an event loop."""

    async def nothing() -> None:
        return None

    asyncio.run(nothing())


def fork_unshare_fork() -> None:
    pid = os.fork()
    if pid == 0:
        if _LIBC.unshare(NAMESPACES) != 0:
            os._exit(3)
        if os.fork() == 0:
            _child_work()
            os._exit(0)
        os._exit(0)
    os.waitpid(pid, 0)


def one_clone() -> None:
    ctypes.pythonapi.PyOS_BeforeFork()
    pid = _LIBC.syscall(SYS_CLONE, NAMESPACES | SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        ctypes.pythonapi.PyOS_AfterFork_Child()
        _child_work()
        os._exit(0)
    ctypes.pythonapi.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(ctypes.get_errno(), "clone")
    os.waitpid(pid, 0)


def cpu_ms_per_child(make: Callable[[], None], n: int) -> float:
    """The machine's CPU per child made by ``make``, the idle rate measured just before
    subtracted (the grandchildren outlive the calls: the count waits half a second)."""
    make()
    time.sleep(0.5)
    idle = sum(_idle_rate())
    started, before = time.perf_counter(), sum(_busy_ms())
    for _ in range(n):
        make()
    time.sleep(0.5)
    seconds = time.perf_counter() - started
    return (sum(_busy_ms()) - before - idle * seconds) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    n = parser.parse_args().n
    helpers.helper_globals()
    gc.collect()
    gc.freeze()  # as the zygote does before it forks
    ways = {"fork_unshare_fork": fork_unshare_fork, "one_clone": one_clone}
    rounds = [
        {name: round(cpu_ms_per_child(make, n), 2) for name, make in ways.items()} for _ in range(2)
    ]
    print(json.dumps({"n": n, "cpu_ms_per_child": rounds}, indent=1))


if __name__ == "__main__":
    main()
