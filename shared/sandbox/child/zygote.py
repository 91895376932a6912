"""Pre-warmed template process: a fresh, secret-free interpreter that forks one confined child per execution.

Started by the launcher as ``python -I -S -B`` with an empty environment. It enters
its own mount/pid/net/ipc/uts namespaces, pivots into a read-only root, drops to an
unprivileged host user and then only forks. Every fork unshares its own user/pid/
net/ipc/uts/mount namespaces and applies its own limits, Landlock and seccomp.
Closing the control socket ends the zygote, and with it (pid 1 of its namespace)
every process it ever forked.
"""

from __future__ import annotations

import array
import base64
import gc
import json
import os
import signal
import socket
import sys
from typing import Any, NoReturn

from shared.sandbox.child import confine, fsview, helpers, runner

CHANNEL_FD = 3


def _reply(ctl: socket.socket, msg: dict[str, Any]) -> None:
    ctl.send(json.dumps(msg).encode())


def _fail(ctl: socket.socket, layer: str, exc: BaseException) -> NoReturn:
    try:
        _reply(ctl, {"ok": False, "layer": layer, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        os._exit(1)


def main(ctl_fd: int) -> NoReturn:
    """Zygote entry point; ``ctl_fd`` is a SOCK_SEQPACKET socket to the launcher."""
    ctl = socket.socket(fileno=ctl_fd)
    init = json.loads(ctl.recv(1 << 20))
    plan: dict[str, Any] = init["plan"]
    bpf = base64.b64decode(init["seccomp_bpf"])
    clean_env = not (
        set(os.environ) - {"LC_CTYPE"}
    )  # Python's own locale coercion may add LC_CTYPE
    try:
        confine.sc.unshare(
            confine.sc.CLONE_NEWNS
            | confine.sc.CLONE_NEWPID
            | confine.sc.CLONE_NEWNET
            | confine.sc.CLONE_NEWIPC
            | confine.sc.CLONE_NEWUTS
        )
    except OSError as exc:
        _fail(ctl, "zygote_namespaces", exc)
    pid = os.fork()
    if pid:
        ctl.close()
        try:
            fsview.drop_to(plan["uid"], plan["gid"])
        finally:
            os.waitpid(pid, 0)
            os._exit(0)
    try:
        fsview.build_root(plan)
    except BaseException as exc:
        _fail(ctl, "filesystem_view", exc)
    try:
        fsview.drop_to(plan["uid"], plan["gid"])
    except BaseException as exc:
        _fail(ctl, "unprivileged_user", exc)
    sys.path[:] = [p for p in sys.path if p.startswith(tuple(plan["stdlib_paths"]))]
    # pid 1 of the zygote namespace: orphaned execution children are reaped automatically.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    helpers.helper_globals()  # import agent code's helper modules once, for every fork
    # Freeze everything imported so far out of the GC: a collection in a child would
    # otherwise touch (and copy-on-write) every object page inherited from us.
    gc.collect()
    gc.freeze()
    confine.sc.fix_malloc_thresholds()  # inherited by every fork
    _reply(ctl, {"ok": True, "pid": os.getpid(), "clean_env": clean_env})
    _serve(ctl, bpf)


def _serve(ctl: socket.socket, bpf: bytes) -> NoReturn:
    fd_size = array.array("i").itemsize
    while True:
        try:
            msg, ancdata, _flags, _addr = ctl.recvmsg(1 << 16, socket.CMSG_SPACE(4 * fd_size))
        except InterruptedError:
            continue
        if not msg:
            os._exit(0)  # launcher gone: our exit kills every process in our namespace
        fds = array.array("i")
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % fd_size)])
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            continue
        chan = fds[0]
        try:
            cfg = json.loads(msg)
            pid = os.fork()
        except (OSError, ValueError):
            os.close(chan)  # the bridge sees EOF before hello: sandbox_unavailable
            continue
        if pid == 0:
            _execution(chan, cfg, bpf)
        os.close(chan)


def _execution(chan: int, cfg: dict[str, Any], bpf: bytes) -> NoReturn:
    """First fork: shed every fd but the channel, enter new namespaces, fork pid 1 of them."""
    try:
        os.closerange(3, chan)
        os.closerange(chan + 1, 1 << 16)
        if chan != CHANNEL_FD:  # a fixed number, so nothing else can be mistaken for it
            os.dup2(chan, CHANNEL_FD)
            os.close(chan)
            chan = CHANNEL_FD
        devnull = os.open("/dev/null", os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(devnull, target)
        if devnull > 2:
            os.close(devnull)
        report = confine.Report()
        report.step("namespaces", confine.enter_namespaces)
        if os.fork():
            os._exit(0)
        report.layers["namespaces"] = bool(report.layers.get("namespaces")) and os.getpid() == 1
        confine.confine_child(cfg, bpf, report)
        runner.serve(chan, report.layers, report.errors, cfg)
    except BaseException:
        pass
    os._exit(70)


if __name__ == "__main__":
    main(int(sys.argv[1]))
