"""Task events leave in one `task.multi` message per ``EVERY_S``, not one publish each
(``shared/celery_events.py``), and a stopping consumer sends what is held."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Celery

from shared.celery_events import EVERY_S, BatchedTaskEvents


class Hub:
    """The event loop's timer, run by hand."""

    def __init__(self) -> None:
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.timers.append((delay, callback))

    def fire(self) -> None:
        timers, self.timers = self.timers, []
        for _, callback in timers:
            callback()


class Consumer:
    def __init__(self, app: Celery) -> None:
        self.hub = Hub()
        self.published: list[tuple[str, Any]] = []
        self.event_dispatcher = app.events.Dispatcher(
            app.connection_for_write(),
            hostname="sandbox@test",
            enabled=True,
            buffer_group=["task"],
        )
        self.event_dispatcher._publish = self._record  # type: ignore[method-assign]

    def _record(self, event: Any, producer: Any, routing_key: str, **_: Any) -> None:
        # A copy: Celery empties the buffer's list in place once it is published.
        self.published.append((routing_key, list(event)))

    def _flush_events(self) -> None:
        self.event_dispatcher.flush()


def _consumer() -> tuple[Consumer, BatchedTaskEvents]:
    app = Celery("test", broker="memory://")
    consumer = Consumer(app)
    step = BatchedTaskEvents(consumer)
    step.start(consumer)
    return consumer, step


def test_a_tasks_events_leave_together_after_the_interval() -> None:
    consumer, _ = _consumer()
    for kind in ("task-received", "task-started", "task-succeeded"):
        consumer.event_dispatcher.send(kind, uuid="t1")
    assert consumer.published == []
    assert [delay for delay, _ in consumer.hub.timers] == [EVERY_S]  # one flush due, not three
    consumer.hub.fire()
    assert [key for key, _ in consumer.published] == ["task.multi"]
    events = consumer.published[0][1]
    assert [e["type"] for e in events] == ["task-received", "task-started", "task-succeeded"]
    assert {e["uuid"] for e in events} == {"t1"}
    consumer.hub.fire()  # nothing new: nothing sent
    assert len(consumer.published) == 1


def test_a_stopping_consumer_sends_what_it_holds() -> None:
    consumer, step = _consumer()
    consumer.event_dispatcher.send("task-received", uuid="t2")
    step.stop(consumer)
    assert [[e["uuid"] for e in events] for _, events in consumer.published] == [["t2"]]


def test_a_full_buffer_leaves_at_once() -> None:
    consumer, _ = _consumer()
    limit = consumer.event_dispatcher.buffer_limit
    for i in range(limit):
        consumer.event_dispatcher.send("task-received", uuid=f"t{i}")
    assert len(consumer.published) == 1 and len(consumer.published[0][1]) == limit
    consumer.hub.fire()  # the timer armed by the first event finds the buffer empty
    assert len(consumer.published) == 1
