"""Runs TypeScript: the confined child starts Deno under itself as soon as it said hello, and watches it.

Every isolation layer is already in place when this runs (namespaces, fs view,
rlimits, Landlock, seccomp, cgroup), and all survive ``execve``: Deno is one more
program inside the same box. Deno is started before the run is asked for (the child
is a pre-spawned spare), so a run does not wait for V8 to boot: the prelude reads the
``start`` frame itself, imports the agent's code as a ``data:`` TypeScript module and
speaks the bridge's frames (the channel is its stdin and stdout). This process stays
as pid 1 of the execution's pid namespace and writes a ``done`` only when Deno ends
without one (V8's heap limit, the CPU limit, a crash), from its exit status and stderr.

Stdlib only: imported in the zygote before it pivots into the sandbox root, which is
why the prelude's text is read here at import time.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from shared.errors import ErrorType, error_dict
from shared.sandbox.child import advice, wire

PRELUDE = (Path(__file__).parent / "deno" / "prelude.js").read_text()
RUN_DIR = "/tmp/.agentcards"
_STDERR_KEEP = 16 << 10
_DENO_FLAGS = (
    "run",
    # Nothing is fetched or resolved from outside the box: no remote, npm or JSR modules,
    # no config or lock file discovery, never a permission prompt (so every --allow-* is off).
    "--no-remote",
    "--no-npm",
    "--cached-only",
    "--no-config",
    "--no-lock",
    "--no-prompt",
    "--no-code-cache",
    "--quiet",
)
_NO_THREADS = "unable to create worker threads"
_THREADS_EXHAUSTED = (
    "the run reached its limit of tasks (threads): each Worker takes several, and Deno ended "
    "when it could not start one; start fewer workers"
)
# V8 reports every fatal out-of-memory as "# Fatal JavaScript out of memory: <reason>" (its
# heap: "Reached heap limit", "CALL_AND_RETRY_LAST" for many small objects, "Ineffective
# mark-compacts near heap limit" when GC reclaims too little for too long...) or "# Fatal
# process out of memory: <reason>" (a reservation outside the heap); which reason comes
# first depends on the objects and on GC timing, so the header is matched, never one
# reason. Node's wording is kept too.
_HEAP_OOM = (
    "Fatal JavaScript out of memory",
    "Fatal process out of memory",
    "JavaScript heap out of memory",
)


def deno_argv(deno: str, v8_heap_mb: int) -> list[str]:
    """The command line that runs ``main.js`` with every Deno permission denied."""
    return [deno, *_DENO_FLAGS, f"--v8-flags=--max-old-space-size={v8_heap_mb}", "main.js"]


def deno_env() -> dict[str, str]:
    """Deno's whole environment: its cache in the private tmp, no colour, no update check."""
    return {
        "DENO_DIR": f"{RUN_DIR}/cache",
        "HOME": RUN_DIR,
        "DENO_NO_UPDATE_CHECK": "1",
        "DENO_NO_PROMPT": "1",
        "NO_COLOR": "1",
    }


def failure_from_exit(status: int, stderr: str, cpu_time_s: int | None) -> dict[str, Any]:
    """The ``done`` error for a Deno that exited without sending one (pure: unit tested)."""
    if any(marker in stderr for marker in _HEAP_OOM):
        return error_dict(ErrorType.MEMORY_LIMIT, advice.memory_exceeded())
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        return error_dict(ErrorType.CPU_LIMIT, advice.cpu_time_exceeded(cpu_time_s))
    if _NO_THREADS in stderr:  # Deno aborts when a Worker's threads cannot be created
        return error_dict(ErrorType.RUNTIME_ERROR, _THREADS_EXHAUSTED)
    tail = stderr.strip()[-2000:] or f"exit status {status}"
    return error_dict(ErrorType.RUNTIME_ERROR, f"the TypeScript runtime ended: {tail}")


def serve(chan_fd: int, cfg: dict[str, Any]) -> None:
    """Start Deno on the channel and wait for it; write a ``done`` only if Deno could not."""
    deno, heap = cfg.get("deno"), cfg.get("v8_heap_mb")
    cpu = (cfg.get("rlimits") or {}).get("cpu")
    if not isinstance(deno, str) or not isinstance(heap, int):
        _send_done(chan_fd, error_dict(ErrorType.RUNTIME_ERROR, "Deno is not installed"))
        return
    try:
        os.makedirs(RUN_DIR, mode=0o700, exist_ok=True)
        with open(f"{RUN_DIR}/main.js", "w", encoding="utf-8") as f:
            f.write(PRELUDE)
    except OSError as exc:
        _send_done(chan_fd, error_dict(ErrorType.RUNTIME_ERROR, f"cannot stage Deno: {exc}"))
        return
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(RUN_DIR)
            os.dup2(chan_fd, 0)
            os.dup2(chan_fd, 1)
            os.dup2(err_w, 2)
            os.closerange(3, 1 << 16)
            os.execve(deno, deno_argv(deno, heap), deno_env())
        finally:
            os._exit(127)
    os.close(err_w)
    stderr = _read_stderr(err_r)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return  # the prelude sent done (or the code exited itself: the bridge sees no done)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return  # the cgroup's OOM killer (or the hard CPU limit): the bridge asks the cgroup
    _send_done(chan_fd, failure_from_exit(status, stderr, cpu if isinstance(cpu, int) else None))


def _read_stderr(fd: int) -> str:
    """Deno's stderr until it closes, keeping the head and the tail (a crash report ends it)."""
    head, tail, total = b"", b"", 0
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except InterruptedError:
            continue
        if not chunk:
            break
        total += len(chunk)
        if len(head) < _STDERR_KEEP:
            head += chunk[: _STDERR_KEEP - len(head)]
        tail = (tail + chunk)[-_STDERR_KEEP:]
    os.close(fd)
    text = head if total <= _STDERR_KEEP else head + b"\n...\n" + tail
    return text.decode("utf-8", "replace")


def _send_done(chan_fd: int, error: dict[str, Any]) -> None:
    wire.write_all(chan_fd, wire.encode({"op": "done", "ok": False, "error": error}))
