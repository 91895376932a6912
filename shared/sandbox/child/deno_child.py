"""Runs a TypeScript execution: the confined child writes the run's files to its private /tmp and execs Deno under itself.

Every isolation layer is already in place when this runs (namespaces, fs view,
rlimits, Landlock, seccomp, cgroup), and all survive ``execve``: Deno is one more
program inside the same box. This process stays as pid 1 of the execution's pid
namespace and supervises: Deno speaks the bridge's frames itself (the channel is its
stdin and stdout), and only when Deno ends without its ``done`` (the code does not
parse, V8 ran out of heap, the CPU limit hit) does this process write one, built from
Deno's exit status and stderr.

Stdlib only: imported in the zygote before it pivots into the sandbox root, which is
why the prelude's text is read here at import time.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

from shared.errors import ErrorType, error_dict
from shared.sandbox.child import advice, wire

PRELUDE = (Path(__file__).parent / "deno" / "prelude.js").read_text()
RUN_DIR = "/tmp/.agentcards"
BODY_FILE = "body.ts"
# body.ts is ``export default async function (args: any) {`` then the code: one line above it.
BODY_HEADER = "export default async function (args: any) {\n"
BODY_LINE_OFFSET = 1
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
# Deno's report of a module that does not parse: ``at file:///tmp/.agentcards/body.ts:3:9``.
_PARSE_AT = re.compile(r"at file://" + re.escape(f"{RUN_DIR}/{BODY_FILE}") + r":(\d+):(\d+)")
_HEAP_OOM = ("Reached heap limit", "JavaScript heap out of memory", "Fatal process out of memory")


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


def body_source(code: str) -> str:
    """The agent's code as the body of the module's default async function (line numbers shift by one)."""
    return f"{BODY_HEADER}{code}\n}}\n"


def write_run_files(start: dict[str, Any], root: str = RUN_DIR) -> None:
    """main.js (the prelude), start.json (code, args, limits, capabilities) and body.ts."""
    os.makedirs(root, mode=0o700, exist_ok=True)
    files = {
        "main.js": PRELUDE,
        "start.json": wire.encode_value({k: v for k, v in start.items() if k != "op"}),
        BODY_FILE: body_source(start["code"]),
    }
    caps = start.get("capabilities") or {}
    files["caps.ts"] = capabilities_source(caps if isinstance(caps, dict) else {})
    for name, text in files.items():
        with open(os.path.join(root, name), "w", encoding="utf-8") as f:
            f.write(text)


def capabilities_source(caps: dict[str, Any]) -> str:
    """A module exporting each granted TypeScript capability as an async function of its args."""
    parts = ["export default {\n"]
    for name, src in caps.items():
        code = src.get("code") if isinstance(src, dict) else None
        if isinstance(code, str):
            parts.append(f"{wire.encode_value(name)}: async function (args: any) {{\n{code}\n}},\n")
    parts.append("};\n")
    return "".join(parts)


def failure_from_exit(status: int, stderr: str, cpu_time_s: int | None) -> dict[str, Any]:
    """The ``done`` error for a Deno that exited without sending one (pure: unit tested)."""
    match = _PARSE_AT.search(stderr)
    if match and ("SyntaxError" in stderr[: match.start()] or "could not be parsed" in stderr):
        line = max(1, int(match.group(1)) - BODY_LINE_OFFSET)
        column = int(match.group(2))
        first = stderr.strip().splitlines()[0] if stderr.strip() else "SyntaxError"
        what = first.removeprefix("error: ").strip()[:500]
        details = {"line": line, "column": column, "text": _source_line(stderr)}
        return error_dict(
            ErrorType.SYNTAX_ERROR, f"{what} at line {line}, column {column}", details=details
        )
    if any(marker in stderr for marker in _HEAP_OOM):
        return error_dict(ErrorType.MEMORY_LIMIT, advice.memory_exceeded())
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        return error_dict(ErrorType.CPU_LIMIT, advice.cpu_time_exceeded(cpu_time_s))
    tail = stderr.strip()[-2000:] or f"exit status {status}"
    return error_dict(ErrorType.RUNTIME_ERROR, f"the TypeScript runtime ended: {tail}")


def _source_line(stderr: str) -> str:
    """The offending source line Deno quotes (``2 |  let x = ;``), without its gutter."""
    for line in stderr.splitlines():
        head, sep, text = line.partition(" | ")
        if sep and head.strip().isdigit():
            return text[:200]
    return ""


def serve(chan_fd: int, start: dict[str, Any], cfg: dict[str, Any]) -> None:
    """Run ``start`` in Deno and wait for it; write a ``done`` only if Deno could not."""
    deno, heap = cfg.get("deno"), cfg.get("v8_heap_mb")
    if not isinstance(deno, str) or not isinstance(heap, int):
        _send_done(chan_fd, error_dict(ErrorType.RUNTIME_ERROR, "Deno is not installed"))
        return
    try:
        write_run_files(start)
    except OSError as exc:  # e.g. code and args beyond the private tmp's size
        _send_done(chan_fd, error_dict(ErrorType.OUTPUT_LIMIT, f"cannot stage the run: {exc}"))
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
    stderr = _read_tail(err_r)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return  # the prelude sent done (or the code exited itself: the bridge sees no done)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return  # the cgroup's OOM killer (or the hard CPU limit): the bridge asks the cgroup
    limits = start.get("limits") or {}
    cpu = limits.get("cpu_time_s") if isinstance(limits, dict) else None
    _send_done(chan_fd, failure_from_exit(status, stderr, cpu if isinstance(cpu, int) else None))


def _read_tail(fd: int) -> str:
    """Deno's stderr until it closes, keeping the head (a parse error) and the tail (a crash)."""
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
