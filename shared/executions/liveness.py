"""Sandbox worker heartbeats: each pool process writes one expiring Redis key while it lives.

The reaper (shared.recovery.reaper) reads them to tell a dead worker from a slow one,
and /healthz and `agentcards status` count them. A process is named ``<host>:<pid>``,
the same string its claimed executions carry in ``executions.worker``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass

import orjson
import redis

from shared.queues import HEARTBEAT_PREFIX, direct_lease_key
from shared.rpc.heartbeat import read_heartbeats

log = logging.getLogger(__name__)

SANDBOX_PATTERN = f"{HEARTBEAT_PREFIX}sandbox:*"
# A beat every second, gone after three missed: a SIGKILLed worker is noticed within
# ~3 s (plus the reaper's confirmation), a busy one never misses (the beat is a thread).
BEAT_EVERY_S = 1.0
BEAT_TTL_S = 3


def worker_name() -> str:
    """This process's name as stored in ``executions.worker``; computed per call (after fork)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def sandbox_key(worker: str) -> str:
    """One sandbox worker process's heartbeat key."""
    return f"{HEARTBEAT_PREFIX}sandbox:{worker}"


@dataclass(frozen=True, slots=True)
class SandboxBeat:
    """The body of one sandbox worker process's heartbeat."""

    worker: str
    started_at: float
    busy: str | None = None  # the execution it is running, if any

    def encode(self) -> bytes:
        return orjson.dumps(
            {"worker": self.worker, "started_at": self.started_at, "busy": self.busy}
        )

    @classmethod
    def decode(cls, raw: bytes | str) -> SandboxBeat:
        body = orjson.loads(raw)
        return cls(str(body["worker"]), float(body["started_at"]), body.get("busy"))


def read_sandbox_beats(client: redis.Redis) -> list[SandboxBeat]:
    """Every live sandbox worker process's heartbeat."""
    return [SandboxBeat.decode(raw) for raw in read_heartbeats(client, SANDBOX_PATTERN)]


# The ``executions.worker`` of a direct call made as an MCP task: its lease, not a process
# (``shared.queues.direct_lease_key``).
LEASE_WORKER = "direct-task:"


def lease_worker(execution_id: str) -> str:
    """The ``executions.worker`` of a direct call made as a task (alive while its lease is)."""
    return f"{LEASE_WORKER}{execution_id}"


def _liveness_key(worker: str) -> str:
    """The key that exists while ``worker`` lives: a sandbox process's beat, or a lease."""
    if worker.startswith(LEASE_WORKER):
        return direct_lease_key(worker.removeprefix(LEASE_WORKER))
    return sandbox_key(worker)


def alive(client: redis.Redis, workers: list[str]) -> set[str]:
    """Which of ``workers`` have a live heartbeat or lease (one round trip)."""
    if not workers:
        return set()
    pipe = client.pipeline(transaction=False)
    for worker in workers:
        pipe.exists(_liveness_key(worker))
    return {w for w, n in zip(workers, pipe.execute(), strict=True) if n}


class Heartbeat:
    """A daemon thread beating for this process; ``busy`` names the running execution."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._worker = worker_name()
        self._started_at = time.time()
        self.busy: str | None = None
        self._written: str | None = None  # the ``busy`` the last beat wrote
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sandbox-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self.beat()
        self._thread.start()
        return self

    def mark(self, busy: str | None) -> None:
        """``busy`` changed. A process that was idle as last written beats now, off the
        caller's path; any other change rides the next beat (within ``BEAT_EVERY_S``), so
        back-to-back runs cost no write of their own (only ``/healthz`` reads ``busy``)."""
        self.busy = busy
        if busy is not None and self._written is None:
            self._wake.set()

    def beat(self) -> None:
        """Write the key now; Redis errors are logged once."""
        busy = self.busy
        body = SandboxBeat(self._worker, self._started_at, busy).encode()
        self._written = busy
        try:
            self._client.set(sandbox_key(self._worker), body, ex=BEAT_TTL_S)
        except redis.RedisError as exc:
            log.debug("sandbox heartbeat failed: %s", exc)

    def _run(self) -> None:
        while True:
            self._wake.wait(BEAT_EVERY_S)
            self._wake.clear()  # before the beat: a change after it wakes the next one
            self.beat()
