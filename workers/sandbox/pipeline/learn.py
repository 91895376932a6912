"""Last stage, in every run: ask the learning workers to learn from the stored execution.

A run with an intent is sent at once: its ``wait=true`` response waits to see it learned
(``ops/wait.py``). Nobody waits for a run without one, so its id joins this process's
``LaterIngests``: one learning message a ``EVERY_S`` at most names every such run since the
last, sent by a thread of its own. The stage itself then does no I/O, and a run's tail (a
Celery publish and its `task-sent` event, two round trips and ~1 CPU-ms of kombu) no longer
stands between its end and the worker taking the next message. An id held by a process that
dies (at most ``EVERY_S`` of runs) is sent again by beat's sweep of unlearned runs
(``resend_unlearned``), as the direct-records drainer's are.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from functools import lru_cache

from shared.dispatch import send_ingest, send_ingests
from workers.sandbox.pipeline.context import RunContext

log = logging.getLogger(__name__)

# How often at most a process sends learning the runs nobody waits to see learned: at 30
# runs/s, one message a second instead of 30. Their graph edges appear up to ~1 s after them,
# as a direct call's do (``shared/direct/drain.py``'s ``LEARN_EVERY_S``).
EVERY_S = 1.0


class LaterIngests:
    """Ids waiting to be sent to learning together; ``send`` is called from one thread."""

    def __init__(self, send: Callable[[Sequence[str]], object], *, every_s: float = EVERY_S):
        self._send = send
        self._every_s = every_s
        self._ids: list[str] = []
        self._cond = threading.Condition()
        self._sent_at = -every_s  # the first id after a quiet spell goes at once
        self._thread: threading.Thread | None = None

    def add(self, execution_id: str) -> None:
        """Hold ``execution_id`` for the next message (the sender thread starts on first use:
        after Celery forked this pool process)."""
        with self._cond:
            self._ids.append(execution_id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="learn-later", daemon=True)
                self._thread.start()
            if len(self._ids) == 1:  # only a thread waiting for a first id needs waking; one
                self._cond.notify()  # waiting out the interval is not woken by every run

    def flush(self) -> None:
        """Send whatever is held now (a pool process that stops)."""
        with self._cond:
            ids, self._ids = self._ids, []
        if ids:
            self._send(ids)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._ids:
                    self._cond.wait()
                # Sent less than every_s ago: gather until then.
                while (due := self._sent_at + self._every_s - time.monotonic()) > 0:
                    self._cond.wait(due)
                ids, self._ids = self._ids, []
                self._sent_at = time.monotonic()
            try:
                self._send(ids)
            except Exception:  # send_ingests never raises; the sweep resends what is lost
                log.exception("could not send the ingestion of %d run(s)", len(ids))


def _send_to_learning(ids: Sequence[str]) -> None:
    from workers.sandbox.celery_app import app

    send_ingests(app, ids)


@lru_cache(maxsize=1)
def later_ingests() -> LaterIngests:
    """This pool process's holder of runs learned later."""
    return LaterIngests(_send_to_learning)


def learn(ctx: RunContext) -> None:
    """Sent after the store, also for a run that ended broken (its row is terminal too).
    Never raises: a lost message is sent again by beat's resend sweep."""
    if not ctx.row.get("intent"):
        later_ingests().add(ctx.execution_id)
        return
    # Imported here: the app needs the stack's URLs, the stage list (and its tests) do not;
    # in a worker the task module has imported it already.
    from workers.sandbox.celery_app import app

    send_ingest(app, ctx.execution_id)
