"""Landlock policy for one execution: read-only paths, a writable /tmp, no TCP, scoped signals and abstract sockets."""

from __future__ import annotations

import os

from shared.sandbox.child import syscalls

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

# Rights that make sense on a non-directory; the kernel rejects others on file rules.
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ_ONLY = EXECUTE | READ_FILE | READ_DIR

MAX_ABI = 7


def handled_fs(abi: int) -> int:
    """Every filesystem right this ABI can restrict (so anything not granted is denied)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def restrict(*, read_only: list[str], read_write_files: list[str], writable_dirs: list[str]) -> int:
    """Apply the policy to this process; returns the ABI used. Raises OSError if unavailable."""
    abi = min(syscalls.landlock_abi(), MAX_ABI)
    if abi < 1:
        raise OSError(95, "landlock is not supported by this kernel")
    fs = handled_fs(abi)
    attr = syscalls.LandlockRulesetAttr(fs, 0, 0)
    size = 8
    if abi >= 4:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP  # no TCP rule is added: all denied
        size = 16
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = 24
    ruleset = syscalls.landlock_create_ruleset(attr, size)
    try:
        for path in read_only:
            _add(ruleset, path, READ_ONLY & fs)
        for path in read_write_files:
            _add(ruleset, path, (READ_FILE | WRITE_FILE | TRUNCATE) & fs)
        for path in writable_dirs:
            _add(ruleset, path, fs & ~EXECUTE & ~MAKE_CHAR & ~MAKE_BLOCK & ~IOCTL_DEV)
        syscalls.landlock_restrict_self(ruleset)
    finally:
        os.close(ruleset)
    return abi


def _add(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # a bind the plan made optional (e.g. /dev/random on odd hosts)
    try:
        if not os.path.isdir(path):
            access &= FILE_RIGHTS
        syscalls.landlock_add_path(ruleset, fd, access)
    finally:
        os.close(fd)
