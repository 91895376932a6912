"""Starts the zygote (once per process) and turns a spawn request into a confined child with a channel.

Protocol: the launcher hands the zygote one end of a fresh socketpair over a
SOCK_SEQPACKET control socket (SCM_RIGHTS); the confined child says ``hello`` on it
and the kernel stamps that message with the child's pid as seen from here
(SCM_CREDENTIALS), which is how we get a pidfd and place it in its cgroup before
any agent code runs.
"""

from __future__ import annotations

import array
import asyncio
import atexit
import base64
import contextlib
import json
import logging
import os
import select
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.errors import SandboxError
from shared.sandbox import cgroups, fsplan, seccomp_policy
from shared.sandbox.child import wire
from shared.sandbox.limits import Language, SandboxLimits

log = logging.getLogger(__name__)

_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
_BOOT = "import sys; sys.path.insert(0, sys.argv[2]); from shared.sandbox.child.zygote import main; main(int(sys.argv[1]))"
_ZYGOTE_START_TIMEOUT_S = 15.0
_HELLO_TIMEOUT_S = 10.0
_KILL_WAIT_S = 5.0
# Distinct limit sets kept pre-spawned (normally one: every run uses the settings').
_MAX_READY_KEYS = 4
_CRED = struct.Struct("iII")  # struct ucred: pid, uid, gid


def _sandbox_error(layer: str, message: str) -> SandboxError:
    return SandboxError(f"sandbox layer {layer!r} unavailable: {message}", layer=layer)


@dataclass(slots=True)
class SandboxProcess:
    """A confined child waiting for its ``start`` frame, plus what we need to destroy it."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    pid: int
    pidfd: int
    cgroup: cgroups.Cgroup | None
    layers: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    _killed: bool = False
    _reaped: bool = False

    @property
    def missing_layers(self) -> list[str]:
        """Isolation layers that did not come up."""
        return sorted(name for name, value in self.layers.items() if value is False)

    async def destroy(self) -> None:
        """``kill``, then ``reap`` (in a thread: it waits)."""
        self.kill()
        await asyncio.to_thread(self.reap)

    def kill(self) -> None:
        """SIGKILL pid 1 of the child's namespace (the kernel kills the rest) and its cgroup,
        and close our end of its channel: from here on nothing it sends is read."""
        if self._killed:
            return
        self._killed = True
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill()
        self.writer.close()

    def reap(self) -> None:
        """After ``kill``: wait for the child's end, then remove its cgroup (blocking, any
        thread; at most ``_KILL_WAIT_S`` for each)."""
        assert self._killed, "reap a killed child only"
        if self._reaped:
            return
        self._reaped = True
        poll = select.poll()
        poll.register(self.pidfd, select.POLLIN)
        poll.poll(_KILL_WAIT_S * 1000)
        os.close(self.pidfd)
        if self.cgroup is not None:
            deadline = time.monotonic() + _KILL_WAIT_S
            while not self.cgroup.remove() and time.monotonic() < deadline:
                self.cgroup.kill()
                time.sleep(0.005)


class Launcher:
    """Owns this process's zygote; restarts it if it died (or if we are a fork of its owner)."""

    def __init__(self, *, prewarm: bool = True) -> None:
        self.prewarm = prewarm
        self._lock = threading.Lock()
        self._owner = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctl: socket.socket | None = None
        self.zygote_info: dict[str, Any] = {}
        self._plan: fsplan.FsPlan | None = None
        self._ready: dict[str, _RawChild] = {}
        # Children being made ahead, by key: done once the child is ready (or failed).
        self._filling: dict[str, Future[None]] = {}

    def start(self) -> None:
        """Start the zygote now (idempotent); raises SandboxError naming the layer that failed."""
        with self._lock:
            self._start_locked()

    def _alive(self) -> bool:
        return (
            self._owner == os.getpid()
            and self._proc is not None
            and self._proc.poll() is None
            and self._ctl is not None
        )

    def _start_locked(self) -> None:
        if self._alive():
            return
        self._stop_locked()
        try:
            plan = fsplan.build_plan()
            bpf = seccomp_policy.compile_filter()
        except (OSError, RuntimeError, ValueError) as exc:
            raise _sandbox_error("seccomp", f"cannot compile the filter: {exc}") from exc
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        errlog = tempfile.TemporaryFile()  # noqa: SIM115 - kept open for the zygote's stderr
        try:
            proc = subprocess.Popen(
                [
                    plan.executable,
                    "-I",
                    "-S",
                    "-B",
                    "-c",
                    _BOOT,
                    str(theirs.fileno()),
                    _PROJECT_ROOT,
                ],
                env={},  # fresh exec, empty environment: the zygote never sees a secret
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errlog,
                pass_fds=(theirs.fileno(),),
                close_fds=True,
                start_new_session=True,
            )
        except OSError as exc:
            raise _sandbox_error("fresh_interpreter", str(exc)) from exc
        finally:
            theirs.close()
        ours.settimeout(_ZYGOTE_START_TIMEOUT_S)
        try:
            ours.send(
                json.dumps(
                    {"plan": plan.to_wire(), "seccomp_bpf": base64.b64encode(bpf).decode()}
                ).encode()
            )
            raw = ours.recv(1 << 16)
        except OSError as exc:
            raw = b""
            log.error("sandbox zygote did not answer: %s", exc)
        reply: dict[str, Any] = json.loads(raw) if raw else {}
        if not reply.get("ok"):
            proc.kill()
            proc.wait()
            errlog.seek(0)
            detail = (
                reply.get("error")
                or errlog.read().decode(errors="replace")[-2000:]
                or "zygote exited"
            )
            raise _sandbox_error(reply.get("layer", "zygote"), detail)
        errlog.close()
        ours.settimeout(None)
        self._proc, self._ctl, self._owner, self._plan = proc, ours, os.getpid(), plan
        atexit.register(self.stop)  # spares' cgroups are removed, not left for the sweeper
        self.zygote_info = {
            "fresh_interpreter": True,
            "clean_env": bool(reply.get("clean_env")),
            "filesystem_view": True,
            "unprivileged_user": True,
        }
        cgroups.sweep_stale()

    def stop(self) -> None:
        """Close the control socket: the zygote and every child it forked die with it."""
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        mine = self._owner == os.getpid()
        for raw in self._ready.values():
            if mine:
                raw.discard()
            else:  # inherited across fork (e.g. Celery prefork): the spares are the parent's
                os.close(raw.pidfd)
                raw.sock.close()
        self._ready.clear()
        if not mine:  # the parent's fills: no thread of ours ends them
            self._filling.clear()
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None
        if self._proc is not None and self._owner == os.getpid():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=2)
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def _send_spawn(self, cfg_json: str, fd: int) -> None:
        payload = cfg_json.encode()
        fds = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
        with self._lock:
            for attempt in (1, 2):
                self._start_locked()
                assert self._ctl is not None
                try:
                    self._ctl.sendmsg([payload], fds)
                    return
                except OSError:
                    if attempt == 2:
                        raise
                    self._stop_locked()  # zygote died: start a fresh one and retry once

    async def spawn(self, limits: SandboxLimits, language: Language = "python") -> SandboxProcess:
        """A confined child ready for ``start``; raises SandboxError if it cannot be made.

        Children are made ahead of time (one per distinct set of limits, see ``prepare``):
        a request takes the waiting one. A waiting child has never run anything; it sits
        in a blocking read inside its own namespaces and cgroup.
        """
        cfg = self._child_config(limits, language)
        key = json.dumps(cfg, sort_keys=True)
        raw = self._take_ready(key)
        if raw is None:
            with self._lock:  # (a fork's inherited entries are its parent's: not waited for)
                filling = self._filling.get(key) if self._owner == os.getpid() else None
            if filling is not None:
                # The child made after the last run is on its way (a loaded machine): it is
                # ready sooner than one started now, and a second fork would race it for CPU.
                await asyncio.wrap_future(filling)
                raw = self._take_ready(key)
        if raw is None:
            raw = await asyncio.to_thread(self._spawn_blocking, key, limits)
        try:
            raw.sock.setblocking(False)
            reader, writer = await asyncio.open_unix_connection(sock=raw.sock, limit=1 << 20)
        except BaseException:
            raw.discard()
            raise
        return SandboxProcess(
            reader, writer, raw.pid, raw.pidfd, raw.cgroup, raw.layers, raw.errors
        )

    def has_ready(self, limits: SandboxLimits, language: Language = "python") -> bool:
        """Whether a pre-spawned child for ``limits`` is waiting (benchmarks wait for it)."""
        key = json.dumps(self._child_config(limits, language), sort_keys=True)
        with self._lock:
            return key in self._ready

    def _child_config(self, limits: SandboxLimits, language: Language) -> dict[str, Any]:
        """What the zygote applies to one child; a TypeScript child differs (its own spares).

        It names the Deno binary it will exec and gets V8's address-space reservation
        (see limits.deno_rlimits); the cgroup caps its memory instead.
        """
        plan = self._plan or fsplan.build_plan()
        typescript = language == "typescript"
        return {
            "language": language,
            "deno": plan.deno if typescript else None,
            "v8_heap_mb": limits.v8_heap_mb if typescript else None,
            "tmp_bytes": limits.tmp_bytes,
            "rlimits": limits.deno_rlimits() if typescript else limits.rlimits(),
            "landlock": {
                "read_only": plan.read_only_paths(),
                "read_write_files": ["/dev/null"],
                "writable_dirs": ["/tmp"],
            },
            "cgroup": [limits.memory_bytes, limits.max_processes],
        }

    def _take_ready(self, key: str) -> _RawChild | None:
        with self._lock:
            raw = self._ready.pop(key, None)
        if raw is not None and not raw.alive():
            raw.discard()
            return None
        return raw

    def prepare(
        self, limits: SandboxLimits, language: Language = "python", *, wait: bool = False
    ) -> None:
        """Make the next child for ``limits`` in a background thread (``wait``: in this one,
        for a caller that is a teardown thread already: a thread started per run costs a run).

        Called after an execution is torn down, not during one: on two cores a fork
        racing the running execution doubled its start latency.
        """
        if not self.prewarm:
            return
        key = json.dumps(self._child_config(limits, language), sort_keys=True)
        with self._lock:
            if key in self._ready or key in self._filling or len(self._ready) >= _MAX_READY_KEYS:
                return
            filled: Future[None] = Future()
            filled.set_running_or_notify_cancel()  # a waiter cancelled cannot cancel it
            self._filling[key] = filled

        def fill() -> None:
            raw: _RawChild | None = None
            try:
                raw = self._spawn_blocking(key, limits)
            except Exception as exc:  # the next on-demand spawn reports it properly
                log.debug("sandbox pre-spawn failed: %s", exc)
            try:
                with self._lock:
                    del self._filling[key]
                    if raw is not None and key not in self._ready and self._owner == os.getpid():
                        self._ready[key] = raw
                        return
                if raw is not None:
                    raw.discard()
            finally:
                filled.set_result(None)

        if wait:
            fill()
        else:
            threading.Thread(target=fill, name="sandbox-prespawn", daemon=True).start()

    def _spawn_blocking(self, key: str, limits: SandboxLimits) -> _RawChild:
        """Fork one confined child through the zygote and wait for its hello (blocking)."""
        if not self._alive():
            self.start()
        errors: dict[str, str] = {}
        cgroup: cgroups.Cgroup | None = None
        try:
            cgroup = cgroups.create(
                memory_bytes=limits.memory_bytes, max_processes=limits.max_processes
            )
        except cgroups.CgroupUnavailable as exc:
            errors["cgroup"] = str(exc)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        try:
            try:
                self._send_spawn(key, theirs.fileno())
            finally:
                theirs.close()
            hello, pid = _recv_hello(ours, _HELLO_TIMEOUT_S)
            pidfd = os.pidfd_open(pid)
        except BaseException:
            ours.close()
            if cgroup is not None:
                cgroup.kill()
                cgroup.remove()
            raise
        if cgroup is not None:
            try:
                cgroup.add(pid)
            except OSError as exc:
                errors["cgroup"] = f"cannot move the child into its cgroup: {exc}"
                cgroup.remove()
                cgroup = None
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 0)
        typescript = json.loads(key).get("language") == "typescript"
        # The child waits for this before it does anything more: what it makes ahead of its
        # run (a Python child's event loop, a TypeScript child's Deno: a process forked earlier
        # would stay outside the cgroup, uncapped) is made inside its cgroup. Without one a
        # TypeScript child starts nothing; the bridge refuses TypeScript runs without a cgroup.
        # Then it is a spare once Deno has booted and said so: a run never waits for V8.
        try:
            ours.sendall(wire.encode({"op": "placed", "cgroup": cgroup is not None}))
            if typescript and cgroup is not None:
                _recv_ready(ours, _HELLO_TIMEOUT_S)
        except (OSError, SandboxError) as exc:
            ours.close()
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)
            if cgroup is not None:
                cgroup.kill()
                if not cgroup.remove():
                    cgroups.remove_later(cgroup)
            if isinstance(exc, SandboxError):
                raise
            raise _sandbox_error("spawn", f"the sandbox child went away: {exc}") from exc
        layers: dict[str, Any] = dict(self.zygote_info)
        child_layers = hello.get("layers")
        if isinstance(child_layers, dict):
            layers.update(
                {str(k): v for k, v in child_layers.items() if isinstance(v, (bool, int))}
            )
        child_errors = hello.get("errors")
        if isinstance(child_errors, dict):
            errors.update({str(k): str(v)[:500] for k, v in child_errors.items()})
        layers["cgroup"] = cgroup is not None
        return _RawChild(ours, pid, pidfd, cgroup, layers, errors)


@dataclass(slots=True)
class _RawChild:
    """A confined child before it is attached to an event loop."""

    sock: socket.socket
    pid: int
    pidfd: int
    cgroup: cgroups.Cgroup | None
    layers: dict[str, Any]
    errors: dict[str, str]

    def alive(self) -> bool:
        """False once the process exited (its pidfd turns readable)."""
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        return not poller.poll(0)

    def discard(self) -> None:
        """Kill without waiting (used for spares that are no longer wanted)."""
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill()
        os.close(self.pidfd)
        self.sock.close()
        if self.cgroup is not None and not self.cgroup.remove():
            cgroups.remove_later(self.cgroup)


def _recv_hello(sock: socket.socket, timeout: float) -> tuple[dict[str, Any], int]:
    """The child's first frame and its pid as the kernel reports it (not as the child claims)."""
    sock.settimeout(timeout)
    buf = bytearray()
    pid: int | None = None
    size = 0
    while True:
        try:
            data, ancdata, _flags, _addr = sock.recvmsg(1 << 16, socket.CMSG_SPACE(_CRED.size))
        except TimeoutError:
            raise _sandbox_error("spawn", "the sandbox child did not start in time") from None
        if not data:
            raise _sandbox_error("spawn", "the sandbox child exited before it was ready")
        for level, kind, cdata in ancdata:
            if (
                level == socket.SOL_SOCKET
                and kind == socket.SCM_CREDENTIALS
                and len(cdata) >= _CRED.size
            ):
                pid = _CRED.unpack(cdata[: _CRED.size])[0]
        buf += data
        if len(buf) >= wire.HEADER.size:
            (size,) = wire.HEADER.unpack(buf[: wire.HEADER.size])
            if size > 1 << 16:
                raise _sandbox_error("spawn", "oversized hello from the sandbox child")
            if len(buf) >= wire.HEADER.size + size:
                break
    if not pid or pid <= 0:
        raise _sandbox_error("spawn", "no kernel credentials on the child's hello")
    try:
        hello = wire.decode(bytes(buf[wire.HEADER.size : wire.HEADER.size + size]))
    except wire.WireError as exc:
        raise _sandbox_error("spawn", f"bad hello: {exc}") from exc
    return hello, pid


def _recv_ready(sock: socket.socket, timeout: float) -> None:
    """Wait for a TypeScript child's ``ready`` (Deno booted, its prelude waiting for start)."""
    sock.settimeout(timeout)
    try:
        header = _recv_exact(sock, wire.HEADER.size)
        (size,) = wire.HEADER.unpack(header)
        if size > 1 << 10:
            raise _sandbox_error("spawn", "oversized ready from the sandbox child")
        frame = wire.decode(_recv_exact(sock, size))
    except TimeoutError:
        raise _sandbox_error("spawn", "Deno did not start in time") from None
    except wire.WireError as exc:
        raise _sandbox_error("spawn", f"bad ready: {exc}") from exc
    if frame.get("op") != "ready":
        detail = frame.get("error") if frame.get("op") == "done" else frame.get("op")
        raise _sandbox_error("spawn", f"Deno did not start: {str(detail)[:500]}")


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise _sandbox_error("spawn", "the sandbox child exited before Deno was ready")
        buf += chunk
    return bytes(buf)


_launcher: Launcher | None = None
_launcher_lock = threading.Lock()


def get_launcher() -> Launcher:
    """The process-wide launcher (a forked worker process gets its own zygote on first use)."""
    global _launcher
    with _launcher_lock:
        if _launcher is None:
            _launcher = Launcher()
        return _launcher
