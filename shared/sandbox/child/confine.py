"""Per-execution confinement, applied in the forked child before any user code: namespaces, mounts, rlimits, caps, Landlock, seccomp."""

from __future__ import annotations

import os
import resource
import signal
from typing import Any

from shared.sandbox.child import landlock
from shared.sandbox.child import syscalls as sc

NAMESPACES = (
    sc.CLONE_NEWUSER
    | sc.CLONE_NEWNS
    | sc.CLONE_NEWPID
    | sc.CLONE_NEWNET
    | sc.CLONE_NEWIPC
    | sc.CLONE_NEWUTS
)

# An empty directory of the view (fsview) where an execution's /tmp is filled before it is moved in.
TMP_STAGING = "/.tmp"


class Report:
    """Which layers came up; failures keep their message so the bridge can name them."""

    def __init__(self) -> None:
        self.layers: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    def step(self, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one layer's set-up, recording success (or the value it returns) or the error."""
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:
            self.layers[name] = False
            self.errors[name] = f"{type(exc).__name__}: {exc}"
            return None
        self.layers[name] = value if value is not None else True
        return value


def enter_namespaces() -> None:
    """New user/pid/net/ipc/uts/mount namespaces; ns root maps to this (unprivileged) host user."""
    uid, gid = os.geteuid(), os.getegid()
    # Changing uid in the zygote cleared "dumpable", which makes /proc/self/* root-owned
    # and the id-map files unwritable for us; the seccomp filter forbids ptrace anyway.
    sc.prctl(sc.PR_SET_DUMPABLE, 1)
    sc.unshare(NAMESPACES)
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"0 {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"0 {gid} 1")


def _private_tmp(size: int) -> None:
    """A fresh tmpfs on ``/tmp`` that still shows what the view binds below ``/tmp``, read-only.

    An install under ``/tmp`` (a CI checkout, a throwaway venv) puts the interpreter's files or
    the Deno binary there: the tmpfs is filled on a staging mount point first, with each entry of
    the view's ``/tmp`` bound in (submounts and all), then moved over ``/tmp``.
    """
    sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
    inodes = max(64, size // 4096)
    sc.mount(
        "tmpfs",
        TMP_STAGING,
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC,
        f"size={size},nr_inodes={inodes},mode=1777",
    )
    for name in os.listdir("/tmp"):
        src, dst = f"/tmp/{name}", f"{TMP_STAGING}/{name}"
        if os.path.isdir(src):
            os.mkdir(dst)
        else:
            open(dst, "w").close()
        sc.mount(src, dst, None, sc.MS_BIND | sc.MS_REC)
        sc.mount(
            None, dst, None, sc.MS_BIND | sc.MS_REMOUNT | sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV
        )
    sc.mount(TMP_STAGING, "/tmp", None, sc.MS_MOVE)


def _fresh_proc() -> None:
    # Requires being PID 1 of a pid namespace owned by our user namespace.
    sc.mount("proc", "/proc", "proc", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC)


def _rlimits(limits: dict[str, int]) -> None:
    pairs = {
        resource.RLIMIT_AS: (limits["as"], limits["as"]),
        # Soft CPU limit raises SIGXCPU (the runner reports cpu_limit); the hard one kills.
        resource.RLIMIT_CPU: (limits["cpu"], limits["cpu"] + 1),
        resource.RLIMIT_FSIZE: (limits["fsize"], limits["fsize"]),
        resource.RLIMIT_NOFILE: (limits["nofile"], limits["nofile"]),
        resource.RLIMIT_NPROC: (limits["nproc"], limits["nproc"]),
        resource.RLIMIT_CORE: (0, 0),
        resource.RLIMIT_MEMLOCK: (0, 0),
    }
    for res, value in pairs.items():
        resource.setrlimit(res, value)


def _no_new_privs() -> None:
    sc.prctl(sc.PR_SET_NO_NEW_PRIVS, 1)


def confine_child(cfg: dict[str, Any], bpf: bytes, report: Report) -> None:
    """Everything after the fork into the new pid namespace; failures are reported, not raised."""
    for sig in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)  # the zygote ignores some; user code expects defaults
    if report.layers.get("namespaces"):
        report.step("private_tmp", _private_tmp, cfg["tmp_bytes"])
        report.step("fresh_proc", _fresh_proc)
        report.step("hostname", sc.sethostname, "sandbox")
    else:
        report.layers["private_tmp"] = report.layers["fresh_proc"] = False
        report.errors.setdefault("private_tmp", "needs the mount namespace")
    report.step("rlimits", _rlimits, cfg["rlimits"])
    report.step("capabilities_dropped", sc.drop_all_capabilities)
    report.step("no_new_privs", _no_new_privs)
    ll = cfg["landlock"]
    report.step(
        "landlock",
        landlock.restrict,
        read_only=ll["read_only"],
        read_write_files=ll["read_write_files"],
        writable_dirs=ll["writable_dirs"],
    )
    # Last: the filter forbids mount/unshare/prctl tricks the steps above still needed.
    report.step("seccomp", sc.install_seccomp, bpf)
