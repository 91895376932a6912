"""One cgroup per execution capping memory and process count (v1 memory+pids+cpuacct here, v2 elsewhere)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PARENT = "agentcards-sandbox"


class CgroupUnavailable(OSError):
    """Raised when no writable memory+pids cgroup hierarchy exists."""


class Cgroup:
    """A per-execution cgroup; ``kill()`` then ``remove()`` guarantees nothing of it survives."""

    def __init__(self, dirs: dict[str, Path], version: int) -> None:
        self.dirs = dirs
        self.version = version

    def add(self, pid: int) -> None:
        """Move ``pid`` (and so every future child) into the group."""
        for path in dict.fromkeys(self.dirs.values()):
            (path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        """Processes still inside."""
        out: set[int] = set()
        for path in dict.fromkeys(self.dirs.values()):
            with contextlib.suppress(OSError):
                out.update(int(x) for x in (path / "cgroup.procs").read_text().split())
        return sorted(out)

    def memory_exceeded(self) -> bool:
        """Whether the OOM killer fired or the limit was hit."""
        mem = self.dirs["memory"]
        try:
            if self.version == 2:
                events = _kv((mem / "memory.events").read_text())
                return events.get("oom_kill", 0) > 0 or events.get("max", 0) > 0
            oom = _kv((mem / "memory.oom_control").read_text())
            if oom.get("oom_kill", 0) > 0:
                return True
            return int((mem / "memory.failcnt").read_text()) > 0
        except (OSError, ValueError):
            return False

    def cpu_seconds(self) -> float | None:
        """CPU time the whole group used, if the hierarchy accounts it."""
        try:
            if self.version == 2:
                return _kv((self.dirs["memory"] / "cpu.stat").read_text())["usage_usec"] / 1e6
            return int((self.dirs["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
        except (OSError, KeyError, ValueError):
            return None

    def kill(self) -> None:
        """SIGKILL everything inside (backstop for the pid-namespace kill)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.dirs["memory"] / "cgroup.kill").write_text("1")
                return
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> bool:
        """rmdir every directory; False while a process is still exiting inside."""
        ok = True
        for path in dict.fromkeys(self.dirs.values()):
            try:
                path.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                ok = False
        return ok


def _kv(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def detect() -> int:
    """2 for a unified hierarchy, 1 for v1 with memory and pids mounted, 0 for none usable."""
    if (ROOT / "cgroup.controllers").exists():
        return 2
    if (ROOT / "memory").is_dir() and (ROOT / "pids").is_dir():
        return 1
    return 0


def create(*, memory_bytes: int, max_processes: int) -> Cgroup:
    """A fresh group with the limits written; raises CgroupUnavailable naming the failure."""
    version = detect()
    name = uuid.uuid4().hex
    try:
        if version == 1:
            dirs = {
                "memory": ROOT / "memory" / PARENT / name,
                "pids": ROOT / "pids" / PARENT / name,
            }
            if (ROOT / "cpuacct").is_dir():
                dirs["cpuacct"] = ROOT / "cpuacct" / PARENT / name
            for path in dirs.values():
                path.mkdir(parents=True)
            mem = dirs["memory"]
            (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
            memsw = mem / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # also cap swap, or "memory" could spill to it
                memsw.write_text(str(memory_bytes))
            (dirs["pids"] / "pids.max").write_text(str(max_processes))
            return Cgroup(dirs, 1)
        if version == 2:
            parent = ROOT / PARENT
            if not parent.is_dir():
                parent.mkdir()
                (ROOT / "cgroup.subtree_control").write_text("+memory +pids +cpu")
                (parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
            path = parent / name
            path.mkdir()
            (path / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):
                (path / "memory.swap.max").write_text("0")
            (path / "pids.max").write_text(str(max_processes))
            return Cgroup({"memory": path, "pids": path}, 2)
    except OSError as exc:
        raise CgroupUnavailable(exc.errno or 0, f"cgroup v{version}: {exc}") from exc
    raise CgroupUnavailable(0, "no writable memory+pids cgroup hierarchy")


def sweep_stale(min_age_s: float = 600.0) -> None:
    """Remove empty leftovers of executions whose worker died before cleaning up.

    Only groups older than ``min_age_s``: a younger empty one may belong to another
    worker that created it and has not moved its child in yet.
    """
    now = time.time()
    for base in (
        ROOT / "memory" / PARENT,
        ROOT / "pids" / PARENT,
        ROOT / "cpuacct" / PARENT,
        ROOT / PARENT,
    ):
        if not base.is_dir():
            continue
        for child in base.iterdir():
            if child.is_dir() and now - child.stat().st_mtime > min_age_s:
                with contextlib.suppress(OSError):
                    child.rmdir()


def remove_later(group: Cgroup, attempts: int = 200) -> None:
    """rmdir in a background thread once the killed processes are gone."""

    def run() -> None:
        for _ in range(attempts):
            group.kill()
            if group.remove():
                return
            time.sleep(0.01)

    threading.Thread(target=run, name="cgroup-reaper", daemon=True).start()
