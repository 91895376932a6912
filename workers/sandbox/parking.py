"""A run waiting for a person's answer gives its place in the worker back: while it waits
("parked"), its sandbox worker runs one pool process more, and one fewer once it goes on.

The waiting run's pool process stays where it is, blocked on the answer (its sandbox child
is paused on its call and uses no CPU); nothing about its sandbox changes. What it gives
back is its place: the worker's pool (and its prefetch, so the broker hands it one more
run) grows by one per parked run, at most ``AGENTCARDS_APPROVAL_MAX_PARKED`` per worker
(beyond it a waiting run keeps its place, as without parking), and shrinks back as they go
on. So at most the worker's concurrency of runs use CPU at once, save one run that just
went on while the place it gave away is still busy (it shrinks when one is idle).

How: the worker's main process makes a shared array of slots before it forks its pool; a
parked run writes its pool process's pid in a free slot, and clears it when it goes on. A
consumer bootstep of the main process matches the pool to the live slots twice a second,
as Celery's own ``pool_grow``/``pool_shrink`` remote commands do (the pool and the
prefetch). A pool process killed while parked frees its slot: its pid is no longer one of
the pool's.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from billiard.sharedctypes import Array
from celery import bootsteps

log = logging.getLogger(__name__)

# How often the main process matches the pool to the parked runs (seconds).
MATCH_EVERY_S = 0.5
_slots: Any = None  # the shared array (made by the worker's main process before it forks)


@contextlib.contextmanager
def parked() -> Iterator[bool]:
    """While inside, this pool process's run waits: its place is given back when a slot is
    free (yields whether it was)."""
    slots = _slots
    if slots is None:  # not in a sandbox worker's pool, or parking is off
        yield False
        return
    pid, index = os.getpid(), None
    with slots.get_lock():
        for i in range(len(slots)):
            if slots[i] == 0:
                slots[i], index = pid, i
                break
    try:
        yield index is not None
    finally:
        if index is not None:
            with slots.get_lock():
                if slots[index] == pid:
                    slots[index] = 0


class Parking(bootsteps.StartStopStep):
    """The main process's side: the pool grown by the parked runs, shrunk as they go on."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        global _slots
        super().__init__(parent, **kwargs)
        from shared.config import get_settings

        self.cap = get_settings().approval_max_parked
        self.grown = 0  # places added for parked runs (processes and prefetch)
        self.owed = 0  # processes still to stop once idle (the prefetch is already down)
        self._timer: Any = None
        # Made here, in the main process before the pool forks: every pool process has it.
        if self.cap > 0 and _slots is None:
            _slots = Array("i", self.cap)

    def start(self, parent: Any) -> None:
        pool = getattr(parent.pool, "_pool", None)
        if _slots is None or not hasattr(pool, "_pool") or parent.controller.autoscaler:
            return  # parking is off, or the pool is not prefork or sizes itself
        self._timer = parent.timer.call_repeatedly(MATCH_EVERY_S, self.match, (parent,))

    def stop(self, parent: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def match(self, consumer: Any) -> None:
        """Grow or shrink the pool to its size plus the parked runs (within the cap)."""
        try:
            self._match(consumer)
        except Exception:  # the worker must go on: the next look tries again
            log.exception("could not match the pool to the runs waiting for approval")

    def _match(self, consumer: Any) -> None:
        processes = [p for p in consumer.pool._pool._pool if p.exitcode is None]
        live = {p.pid for p in processes}
        with _slots.get_lock():
            for i in range(len(_slots)):
                if _slots[i] and _slots[i] not in live:  # killed while parked
                    _slots[i] = 0
            want = sum(1 for i in range(len(_slots)) if _slots[i])
        multiplier = consumer.prefetch_multiplier
        if want > self.grown:
            more = want - self.grown
            while self.owed and more:  # a place given back but its process not yet stopped
                self.owed, more, self.grown = self.owed - 1, more - 1, self.grown + 1
                consumer.qos.increment_eventually(multiplier)
            if more:
                consumer.pool.grow(more)
                consumer.qos.increment_eventually(more * multiplier)
                self.grown += more
            log.info("pool grown to %s: %s runs wait", self._size(consumer), want)
        elif want < self.grown:
            fewer = self.grown - want
            # The prefetch first, so no run comes for the place; the process once it is idle.
            consumer.qos.decrement_eventually(fewer * multiplier)
            self.grown, self.owed = want, self.owed + fewer
        # One process stops per look, once the last one stopped has left the pool's list
        # (dead is not enough: until the pool joins it, its shrink may take it again).
        stopping = any(
            getattr(p, "_controlled_termination", False) for p in consumer.pool._pool._pool
        )
        if self.owed and not stopping:
            try:
                consumer.pool.shrink(1)
            except ValueError:  # every process is busy: one stops at a later look
                pass
            else:
                self.owed -= 1
                log.info("pool shrunk to %s: %s runs wait", self._size(consumer), want)
        consumer.initial_prefetch_count = self._size(consumer) * multiplier

    def _size(self, consumer: Any) -> int:
        """The pool's size as the prefetch counts it (processes still to stop left out)."""
        return int(consumer.pool.num_processes) - self.owed
