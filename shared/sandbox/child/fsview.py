"""Builds the zygote's read-only root (Python install, shared libs, /dev nodes, its own /proc) and pivots into it."""

from __future__ import annotations

import os
from typing import Any

from shared.sandbox.child import syscalls as sc
from shared.sandbox.child.confine import TMP_STAGING

# Where the host's root and the view under construction hang on the scratch root.
_HOST, _VIEW = "/oldroot", "/newroot"
_RO = sc.MS_BIND | sc.MS_REMOUNT | sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV


def build_root(plan: dict[str, Any]) -> None:
    """Assemble the plan's view on a fresh tmpfs and make it ``/``; needs root in a private mount ns.

    The view is built beside the host's root, never over part of it: a scratch tmpfs becomes
    ``/`` first with the host's root moved below it at ``/oldroot`` (as bubblewrap does), and
    every source is read there. A tmpfs mounted over a host directory would hide whatever lies
    below it, such as an install under ``/tmp`` whose interpreter or Deno binary the view binds.
    """
    scratch = plan["scratch"]
    sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
    sc.mount(
        "tmpfs", scratch, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "mode=0755,size=16k,nr_inodes=8"
    )
    for name in (_HOST, _VIEW):
        os.mkdir(scratch + name, 0o755)
    sc.pivot_root(scratch, scratch + _HOST)
    os.chdir("/")
    sc.mount(
        "tmpfs", _VIEW, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "mode=0755,size=1m,nr_inodes=4096"
    )
    for bind in plan["binds"]:
        src, dst = _HOST + bind["src"], _VIEW + bind["dst"]
        _make_target(dst, is_dir=os.path.isdir(src))
        sc.mount(src, dst, None, sc.MS_BIND)
        sc.mount(None, dst, None, _RO | (0 if bind.get("exec") else sc.MS_NOEXEC))
    for mask in plan["masks"]:
        # An empty read-only tmpfs hides site-packages inside an otherwise bound stdlib.
        sc.mount(
            "tmpfs",
            _VIEW + mask,
            "tmpfs",
            sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC,
            "size=4k,nr_inodes=2,mode=0555",
        )
    os.makedirs(_VIEW + "/dev", mode=0o755, exist_ok=True)
    for dev in plan["devices"]:
        if not os.path.exists(_HOST + dev):
            continue
        _make_target(_VIEW + dev, is_dir=False)
        sc.mount(_HOST + dev, _VIEW + dev, None, sc.MS_BIND)
        sc.mount(None, _VIEW + dev, None, sc.MS_BIND | sc.MS_REMOUNT | sc.MS_NOSUID | sc.MS_NOEXEC)
    for target, link in plan["symlinks"]:
        os.makedirs(os.path.dirname(_VIEW + link), exist_ok=True)
        os.symlink(target, _VIEW + link)
    # Each execution mounts its own tmpfs here; the zygote's proc must stay fully
    # visible (no mounts over its subdirectories) or the kernel refuses the
    # executions' fresh proc mounts (fs/namespace.c mnt_already_visible).
    os.makedirs(_VIEW + "/tmp", mode=0o1777, exist_ok=True)
    os.makedirs(_VIEW + TMP_STAGING, mode=0o755)
    os.makedirs(_VIEW + "/proc", mode=0o555, exist_ok=True)
    sc.mount("proc", _VIEW + "/proc", "proc", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC)
    sc.umount2(_HOST, sc.MNT_DETACH)  # nothing of the host is reachable from here on
    os.chdir(_VIEW)
    sc.pivot_root(".", ".")
    sc.umount2(".", sc.MNT_DETACH)  # detach the scratch root stacked under the view
    os.chdir("/")
    sc.mount(None, "/", None, sc.MS_REMOUNT | sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV)


def _make_target(path: str, *, is_dir: bool) -> None:
    if is_dir:
        os.makedirs(path, exist_ok=True)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path):
        with open(path, "w"):
            pass


def drop_to(uid: int, gid: int) -> None:
    """Become an unprivileged host user for good (no capabilities left, no new privileges)."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    sc.prctl(sc.PR_SET_NO_NEW_PRIVS, 1)
