"""The test harness cleans up after itself, also when stopped with Ctrl-C or SIGTERM.

- SIGTERM (and SIGHUP) become a KeyboardInterrupt, as Ctrl-C is (also in a run started with
  SIGINT ignored, as a script's background job is: the harness installs Python's handler
  itself): pytest then stops the run and tears every fixture down (session fixtures
  included), so the Postgres, Redis, Celery workers, toolhosts and gateways the fixtures
  started are stopped and their data folders removed. Only the first such signal interrupts; later ones are ignored so they
  cannot cut the teardown short (a second Ctrl-C still can: pytest's own).
- Whatever a teardown did not reach is stopped at exit: every process group ``spawn``
  started (SIGTERM, then SIGKILL), and every folder ``remove_at_exit`` registered.
- Children ``spawn`` starts from the main thread die with the test process
  (``PR_SET_PDEATHSIG``): a pytest killed with SIGKILL, which runs no handler at all,
  still takes them down. (Postgres is daemonized by pg_ctl, so it is not a child: pgserver
  stops it at exit, and the session fixture's teardown does.)
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)  # resolved here, never in a forked child
_procs: list[subprocess.Popen[bytes]] = []
_folders: set[Path] = set()
_interrupted = False


def install_signal_handlers() -> None:
    """SIGTERM and SIGHUP interrupt the run like Ctrl-C, and Ctrl-C interrupts it however it
    was started (call from the main thread).

    A process started with SIGINT ignored (a background job of a non-interactive shell:
    ``pytest … &`` in a script) keeps it ignored across exec, and Python installs its
    KeyboardInterrupt handler only over the default: such a run, and the pytest runs it
    starts, slept through Ctrl-C with everything running. A SIGHUP ignored on purpose
    (``nohup``) stays ignored.
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _interrupt)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    global _interrupted
    if _interrupted:  # already tearing down: let it finish
        return
    _interrupted = True
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _die_with(parent: int) -> Callable[[], None]:
    def arm() -> None:  # runs in the child between fork and exec: no allocation-heavy work
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the line above
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


def spawn(argv: Sequence[str], **options: Any) -> subprocess.Popen[bytes]:
    """``Popen`` in a process group of its own, stopped at exit if no teardown stopped it.

    From the main thread the child also dies with this process: the kernel's parent-death
    signal follows the thread that forked, and other threads come and go.
    """
    if threading.current_thread() is threading.main_thread():
        options.setdefault("preexec_fn", _die_with(os.getpid()))
    return track(subprocess.Popen(argv, start_new_session=True, **options))


def track(proc: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    """Stop ``proc``'s process group at exit unless it was stopped (and reaped) by then.

    ``proc`` must lead its own group (``start_new_session``). A reaped leader is skipped: its
    pid, and so its group id, may belong to someone else by then.
    """
    _procs.append(proc)
    return proc


def remove_at_exit(folder: Path) -> Path:
    """Remove ``folder`` at exit if a teardown did not."""
    _folders.add(folder)
    return folder


def stop_group(proc: subprocess.Popen[bytes], *, timeout_s: float = 20) -> None:
    """SIGTERM the group ``proc`` leads, SIGKILL it after ``timeout_s``; ``proc`` is reaped."""
    stop_groups([proc], timeout_s=timeout_s)


def stop_groups(procs: Iterable[subprocess.Popen[bytes]], *, timeout_s: float = 20) -> None:
    """``stop_group`` for several at once: every group gets SIGTERM first, then each is waited
    for until one shared deadline (a stack's processes shut down side by side, not in turn)."""
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for proc in running:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@dataclass
class Proc:
    """A child the tests started (``spawn``: its own process group) and the file it logs to."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int | None:
        """Stop its group (SIGTERM, SIGKILL after 20 s); its exit code."""
        stop_group(self.proc)
        return self.proc.returncode


def stop_all(procs: Iterable[Proc]) -> None:
    """Stop each one's group, side by side (``stop_groups``)."""
    stop_groups(p.proc for p in procs)


def start_logged(
    name: str, argv: Sequence[str], *, log_path: Path, **options: Any
) -> subprocess.Popen[bytes]:
    """``spawn`` with stdout and stderr going to ``log_path``."""
    with log_path.open("wb") as sink:  # the child holds its own copy of the descriptor
        return spawn(argv, stdout=sink, stderr=subprocess.STDOUT, **options)


def celery_worker_argv(app: str, queues: str, *, concurrency: int, node: str) -> list[str]:
    """`celery worker` as the tests run it: prefork, named ``node``, no gossip or mingle."""
    return [
        sys.executable, "-m", "celery", "-A", app, "worker", "-Q", queues,
        "--concurrency", str(concurrency), "--pool", "prefork", "-n", node,
        "--without-gossip", "--without-mingle", "--loglevel", "INFO",
    ]  # fmt: skip


def wait_until(
    predicate: Callable[[], object],
    *,
    what: str,
    timeout_s: float = 90,
    proc: Proc | None = None,
) -> None:
    """Poll ``predicate`` until it is truthy; fail early with ``proc``'s log if it exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.proc.poll() is not None:
            raise RuntimeError(f"{proc.name} exited:\n{proc.log()[-4000:]}")
        if predicate():
            return
        time.sleep(0.1)
    tail = proc.log()[-4000:] if proc else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


@atexit.register
def _clean_up_the_rest() -> None:
    for proc in _procs:
        stop_group(proc, timeout_s=5)
    for folder in list(_folders):
        shutil.rmtree(folder, ignore_errors=True)
