"""Attacks on processes and the kernel: signals, ptrace, namespaces, raw syscalls, shells."""

from __future__ import annotations

import os

from tests.integration.sandbox.conftest import Run


async def test_cannot_signal_or_trace_host_processes(run: Run, host_intact) -> None:
    code = """
import ctypes, os, signal
out = {"ppid": os.getppid(), "pid": os.getpid()}
for name, target in (("bridge", args.bridge), ("init", 1)):
    try:
        os.kill(target, 0)
        out[name] = "VISIBLE" if target != 1 else "self-ns-init"
    except OSError as e:
        out[name] = type(e).__name__
libc = ctypes.CDLL(None, use_errno=True)
out["ptrace"] = libc.ptrace(16, args.bridge, 0, 0)  # PTRACE_ATTACH
out["ptrace_errno"] = ctypes.get_errno()
out
"""
    outcome = await run(code, args={"bridge": os.getpid()})
    assert outcome.status == "succeeded", outcome.error
    result = outcome.result
    assert result["pid"] == 1 and result["ppid"] == 0
    assert result["bridge"] in ("ProcessLookupError", "PermissionError")
    assert result["ptrace"] == -1
    await host_intact()


async def test_kill_all_only_reaches_the_sandbox(run: Run, host_intact) -> None:
    code = """
import os, signal
try:
    os.kill(-1, signal.SIGKILL)
    r = "sent"
except OSError as e:
    r = type(e).__name__
r
"""
    outcome = await run(code)
    assert outcome.status == "succeeded", outcome.error
    assert os.getppid() > 0  # we (and our parent) are still here
    await host_intact()


async def test_dangerous_syscalls_are_denied(run: Run, host_intact) -> None:
    code = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(fn, *a):
    r = fn(*a)
    return errno.errorcode.get(ctypes.get_errno(), "?") if r == -1 else "OK"
out = {
    "unshare_user": call(libc.unshare, 0x10000000),
    "unshare_net": call(libc.unshare, 0x40000000),
    "mount": call(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None),
    "bpf": call(libc.syscall, 321, 0, 0, 0),
    "io_uring_setup": call(libc.syscall, 425, 1, 0),
    "userfaultfd": call(libc.syscall, 323, 0),
    "perf_event_open": call(libc.syscall, 298, 0, 0, -1, -1, 0),
    "keyctl": call(libc.syscall, 250, 0, 0, 0, 0, 0),
    "setns": call(libc.syscall, 308, 0, 0),
    "chroot": call(libc.chroot, b"/tmp"),
}
out
"""
    outcome = await run(code)
    assert outcome.status == "succeeded", outcome.error
    assert "OK" not in outcome.result.values(), outcome.result
    await host_intact()


async def test_no_shell_or_other_binaries(run: Run, host_intact) -> None:
    code = """
import subprocess
out = {}
for argv in (["/bin/sh", "-c", "id"], ["sh", "-c", "id"], ["/usr/bin/env"], ["bash"]):
    try:
        out[argv[0]] = subprocess.run(argv, capture_output=True, timeout=2).returncode
    except Exception as e:
        out[argv[0]] = type(e).__name__
out
"""
    outcome = await run(code)
    assert outcome.status == "succeeded", outcome.error
    assert all(isinstance(v, str) for v in outcome.result.values()), outcome.result
    await host_intact()


async def test_fork_bomb_is_contained(run: Run, host_intact) -> None:
    code = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
    outcome = await run(code)
    assert outcome.status in ("timeout", "failed")
    assert outcome.error is not None and outcome.error["type"] in ("timeout", "runtime_error")
    await host_intact()
