"""What the sandbox filesystem contains: this interpreter, its stdlib (no site-packages), shared libs, /dev nodes."""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Host user the sandbox runs as: never uid 0, so root-owned host files stay out of reach
# even where a path is mapped, and RLIMIT_NPROC applies.
SANDBOX_UID = 65534
SANDBOX_GID = 65534
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
_LIB_DIRS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/lib32", "/lib32")


@dataclass(frozen=True, slots=True)
class FsPlan:
    """Mounts for the zygote's root plus the Landlock read-only list derived from them."""

    executable: str
    binds: list[dict[str, Any]]
    masks: list[str]
    symlinks: list[tuple[str, str]]
    stdlib_paths: list[str]
    deno: str | None = (
        None  # the TypeScript runtime's binary, bound read-only (None: not installed)
    )

    def to_wire(self) -> dict[str, Any]:
        """JSON for the zygote's init message."""
        return {
            "scratch": "/tmp",  # a mount point for the scratch root (hides nothing: fsview)
            "binds": self.binds,
            "masks": self.masks,
            "symlinks": [list(s) for s in self.symlinks],
            "devices": list(DEVICES),
            "stdlib_paths": self.stdlib_paths,
            "uid": SANDBOX_UID,
            "gid": SANDBOX_GID,
        }

    def read_only_paths(self) -> list[str]:
        """Landlock read/execute rules: every bind, the devices, and /proc."""
        return [b["dst"] for b in self.binds] + [
            "/dev/zero",
            "/dev/urandom",
            "/dev/random",
            "/proc",
        ]


def _real(path: str) -> str:
    return os.path.realpath(path)


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def build_plan() -> FsPlan:
    """Plan for the running interpreter (the base install when inside a venv)."""
    executable = _real(getattr(sys, "_base_executable", "") or sys.executable)
    # The base installation's paths: inside a venv, "platstdlib" and "platlib" would point
    # into the venv (its site-packages), which the sandbox must neither need nor see.
    paths = sysconfig.get_paths(
        vars={
            "base": sys.base_prefix,
            "platbase": sys.base_exec_prefix,
            "installed_base": sys.base_prefix,
            "installed_platbase": sys.base_exec_prefix,
        }
    )
    stdlib = [_real(paths["stdlib"]), _real(paths["platstdlib"])]
    dynload = _real(os.path.join(paths["platstdlib"], "lib-dynload"))
    binds: list[dict[str, Any]] = []
    bound: list[str] = []

    def add(path: str, *, exec_: bool) -> None:
        if path and os.path.exists(path) and not _under(path, bound):
            binds.append({"src": path, "dst": path, "exec": exec_})
            bound.append(path)

    symlinks: list[tuple[str, str]] = []
    for lib in _LIB_DIRS:
        if os.path.islink(lib):
            symlinks.append((os.readlink(lib), lib))
        elif os.path.isdir(lib):
            add(lib, exec_=True)
    add(executable, exec_=True)
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    soname = sysconfig.get_config_var("INSTSONAME") or ""
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and libdir and soname:
        add(_real(os.path.join(libdir, soname)), exec_=True)
    for path in [*stdlib, dynload]:
        add(path, exec_=True)
    deno = find_deno()
    if deno is not None:
        add(deno, exec_=True)
    candidates = {
        *site.getsitepackages(),
        site.getusersitepackages(),
        paths.get("purelib", ""),
        paths.get("platlib", ""),
    }
    for root in bound:  # e.g. Debian's dist-packages under a bound /usr/lib
        for sub in Path(root).glob("python3*/*-packages"):
            candidates.add(str(sub))
        for sub in Path(root).glob("python3/dist-packages"):
            candidates.add(str(sub))
    masks = sorted(
        {_real(c) for c in candidates if c and os.path.isdir(c) and _under(_real(c), bound)},
        key=len,
    )
    return FsPlan(
        executable=executable,
        binds=sorted(binds, key=lambda b: len(b["dst"])),
        masks=masks,
        symlinks=symlinks,
        stdlib_paths=sorted({*stdlib, dynload}),
        deno=deno,
    )


def find_deno() -> str | None:
    """The pinned ``deno`` binary from the PyPI package (a dependency), or None if it is missing.

    Only the one file is bound into the sandbox: the rest of site-packages stays masked.
    """
    try:
        from deno import find_deno_bin  # type: ignore[import-untyped]

        path = _real(find_deno_bin())
    except (ImportError, OSError, RuntimeError):
        return None
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
