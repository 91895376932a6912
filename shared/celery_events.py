"""Task events (what Flower shows) sent in batches, off the path between two tasks.

Celery's worker already buffers its task events (`task-received`, `-started`, `-succeeded`)
and publishes them as one `task.multi` message, but it flushes the buffer on the event
loop's very next turn: every event is a publish of its own, one blocking Redis round trip
and ~0.5 CPU-ms of kombu in the consumer, three per task, in between a task's end and the
next message's delivery to the pool. ``BatchedTaskEvents`` flushes at most every
``EVERY_S`` instead: a task's three events (and every other task's in that time) leave in
one message. Flower reads `task.multi` as it reads single events (celery's ``EventReceiver``
takes a list body), so it shows the same tasks and states, up to ``EVERY_S`` later. The
buffer's own limit (24 events) still flushes at once; the consumer's stop and shutdown
flush what is left.
"""

from __future__ import annotations

import contextlib
from typing import Any

from celery import bootsteps

# How long a task event may wait for others to share its publish: a person watching Flower
# does not see 0.2 s; a run's worker then publishes one event message per ~6 runs at 30 runs/s.
EVERY_S = 0.2


class BatchedTaskEvents(bootsteps.StartStopStep):
    """A consumer bootstep (after Celery's ``Events``): task events flushed every ``EVERY_S``."""

    requires = ("celery.worker.consumer.events:Events",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._due = False

    def start(self, c: Any) -> None:
        dispatcher = c.event_dispatcher
        if dispatcher is None or c.hub is None:
            return  # no event loop: Celery sends each event as it comes
        hub = c.hub
        self._due = False

        def flush() -> None:
            self._due = False
            # Celery's flush publishes even an empty buffer (emptied meanwhile by its limit).
            if any(getattr(dispatcher, "_group_buffer", {None: True}).values()):
                c._flush_events()

        def buffered() -> None:
            if not self._due:
                self._due = True
                hub.call_later(EVERY_S, flush)

        dispatcher.on_send_buffered = buffered

    def stop(self, c: Any) -> None:
        self._flush(c)

    def shutdown(self, c: Any) -> None:
        self._flush(c)

    @staticmethod
    def _flush(c: Any) -> None:
        if c.event_dispatcher is not None:
            # A monitoring message: never worth failing a stop for.
            with contextlib.suppress(Exception):
                c.event_dispatcher.flush()
