"""The seccomp filter every execution loads, compiled once on the trusted side with libseccomp.

Default allow, explicit deny (the Codex/nsjail style): the child is already in its
own namespaces under Landlock, so the filter's job is to close the kernel attack
surface those do not cover and any way back out of them.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from functools import lru_cache

import pyseccomp as seccomp

DENIED_SYSCALLS = (
    # debugging and reading other processes' memory
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
    # leaving or reshaping the namespaces and mounts we built
    "mount", "umount2", "unshare", "setns", "pivot_root", "chroot", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "open_by_handle_at",
    "name_to_handle_at",
    # large kernel attack surfaces a script never needs
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "keyctl", "add_key", "request_key", "fanotify_init",
    # host-wide state
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "quotactl", "syslog", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "vhangup", "iopl", "ioperm", "personality",
    # every new socket: the only channel is the inherited socketpair to the bridge
    "socket",
)  # fmt: skip

_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)


@lru_cache(maxsize=1)
def compile_filter() -> bytes:
    """Classic BPF bytes for the policy, for the native architecture."""
    deny = seccomp.ERRNO(errno.EPERM)
    f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            f.add_rule(deny, name)
        except (RuntimeError, ValueError, OSError):
            continue  # a syscall this architecture does not have
    # clone() may make threads and processes but never namespaces.
    for flag in _NAMESPACE_FLAGS:
        f.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    # clone3 passes flags in memory a filter cannot read: ENOSYS makes glibc fall back to clone.
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    # socketpair stays (asyncio's self-pipe needs it) but only for AF_UNIX pairs.
    f.add_rule(deny, "socketpair", seccomp.Arg(0, seccomp.NE, socket.AF_UNIX))
    # No TTY exists, but TIOCSTI/TIOCLINUX injection stays impossible regardless.
    f.add_rule(deny, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, 0x5412))
    f.add_rule(deny, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, 0x541C))
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.flush()
        out.seek(0)
        data = out.read()
    if not data or len(data) % 8:
        raise OSError(errno.EINVAL, "libseccomp produced an empty filter")
    return data


def describe() -> str:
    """Short text for logs and the CLI."""
    return f"deny {len(DENIED_SYSCALLS)} syscalls + namespace clone flags, pid {os.getpid()}"
