"""ctypes wrappers for the Linux calls the sandbox needs; stdlib only so it runs inside the sandbox."""

from __future__ import annotations

import ctypes
import os
import platform

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2

# Landlock's numbers come from the generic syscall table: the same on x86_64 and aarch64.
_NR: dict[str, dict[str, int]] = {
    "x86_64": {
        "pivot_root": 155,
        "landlock_create": 444,
        "landlock_add": 445,
        "landlock_restrict": 446,
    },
    "aarch64": {
        "pivot_root": 41,
        "landlock_create": 444,
        "landlock_add": 445,
        "landlock_restrict": 446,
    },
}


def _nr(name: str) -> int:
    table = _NR.get(platform.machine())
    if table is None:
        raise OSError(38, f"unsupported architecture {platform.machine()}")
    return table[name]


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def _b(s: str | None) -> bytes | None:
    return None if s is None else os.fsencode(s)


# glibc mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def fix_malloc_thresholds(*, mmap_bytes: int = 1 << 20, trim_bytes: int = 4 << 20) -> None:
    """Pin glibc's mmap and trim thresholds (no syscall) so per-message buffers come from the heap.

    asyncio reads each frame with a 256 KiB recv buffer. Past the default 128 KiB mmap
    threshold, glibc serves it with mmap, shrinks it with mremap and frees it with munmap:
    three syscalls (each through the seccomp filter) per message, ~40 µs a tool call. glibc
    raises the threshold on its own only after some large mmapped block is freed, so
    without this the cost depended on what the process happened to allocate first.
    """
    if hasattr(_libc, "mallopt"):  # glibc; other C libraries keep their defaults
        _libc.mallopt(_M_MMAP_THRESHOLD, mmap_bytes)
        _libc.mallopt(_M_TRIM_THRESHOLD, trim_bytes)


def unshare(flags: int) -> None:
    """Move the calling process into new namespaces."""
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    """mount(2); raises OSError naming the target."""
    _check(_libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)), f"mount {target}")


def umount2(target: str, flags: int) -> None:
    """umount2(2)."""
    _check(_libc.umount2(_b(target), ctypes.c_int(flags)), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    """pivot_root(2) through the raw syscall (older glibc has no wrapper)."""
    _check(_libc.syscall(ctypes.c_long(_nr("pivot_root")), _b(new_root), _b(put_old)), "pivot_root")


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    """prctl(2)."""
    return _check(_libc.prctl(option, arg2, arg3, arg4, arg5), f"prctl({option})")


def sethostname(name: str) -> None:
    """sethostname(2) (only meaningful in a private UTS namespace)."""
    raw = name.encode()
    _check(_libc.sethostname(raw, ctypes.c_size_t(len(raw))), "sethostname")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_all_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets."""
    cap = 0
    while cap < 64:
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0:
            if ctypes.get_errno() == 22:  # EINVAL: past the last capability this kernel knows
                break
            _check(-1, f"capbset_drop({cap})")
        cap += 1
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp(bpf: bytes) -> None:
    """Load a classic-BPF seccomp program (compiled on the trusted side by libseccomp)."""
    if not bpf or len(bpf) % 8:
        raise OSError(22, "seccomp program is empty or not a whole number of instructions")
    buf = ctypes.create_string_buffer(bpf, len(bpf))
    prog = _SockFprog(len(bpf) // 8, ctypes.cast(buf, ctypes.c_void_p).value)
    _check(
        _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0), "seccomp"
    )


class LandlockRulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class LandlockPathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is absent or disabled."""
    ret = _libc.syscall(
        ctypes.c_long(_nr("landlock_create")), None, ctypes.c_size_t(0), ctypes.c_uint32(1)
    )
    return int(ret) if ret > 0 else 0


def landlock_create_ruleset(attr: LandlockRulesetAttr, size: int) -> int:
    """A ruleset fd; ``size`` selects how many attr fields the kernel reads (ABI-dependent)."""
    return _check(
        _libc.syscall(
            ctypes.c_long(_nr("landlock_create")),
            ctypes.byref(attr),
            ctypes.c_size_t(size),
            ctypes.c_uint32(0),
        ),
        "landlock_create_ruleset",
    )


def landlock_add_path(ruleset_fd: int, path_fd: int, access: int) -> None:
    """Allow ``access`` beneath the directory or file open at ``path_fd``."""
    rule = LandlockPathBeneath(access, path_fd)
    _check(
        _libc.syscall(
            ctypes.c_long(_nr("landlock_add")),
            ctypes.c_int(ruleset_fd),
            ctypes.c_int(1),  # LANDLOCK_RULE_PATH_BENEATH
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        ),
        "landlock_add_rule",
    )


def landlock_restrict_self(ruleset_fd: int) -> None:
    """Enforce the ruleset on this process and every process it forks."""
    _check(
        _libc.syscall(
            ctypes.c_long(_nr("landlock_restrict")), ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)
        ),
        "landlock_restrict_self",
    )
