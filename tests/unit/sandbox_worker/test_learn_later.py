"""The learn stage: a run with an intent is sent at once, the others together, a message a
``every_s`` at most (``workers/sandbox/pipeline/learn.py``)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from shared.config import Settings
from workers.sandbox.pipeline import learn
from workers.sandbox.pipeline.context import RunContext
from workers.sandbox.pipeline.learn import LaterIngests


class Sent:
    """A fake sender: the messages it was given, and an event per message count."""

    def __init__(self) -> None:
        self.messages: list[list[str]] = []
        self.arrived = threading.Semaphore(0)

    def __call__(self, ids: Sequence[str]) -> None:
        self.messages.append(list(ids))
        self.arrived.release()

    def wait_one(self) -> None:
        assert self.arrived.acquire(timeout=30), "the sender thread sent nothing"


def test_the_first_run_after_a_quiet_spell_goes_at_once_the_next_ones_together() -> None:
    sent = Sent()
    later = LaterIngests(sent, every_s=3600)
    later.add("a")
    sent.wait_one()
    later.add("b")
    later.add("c")
    # Within the hour nothing more leaves on its own; a stopping process sends what it holds.
    assert sent.messages == [["a"]]
    later.flush()
    assert sent.messages == [["a"], ["b", "c"]]
    later.flush()  # nothing held: no empty message
    assert sent.messages == [["a"], ["b", "c"]]


def test_held_runs_leave_in_one_message_once_the_interval_passed() -> None:
    sent = Sent()
    later = LaterIngests(sent, every_s=0.05)
    later.add("a")
    sent.wait_one()
    later.add("b")
    later.add("c")
    sent.wait_one()
    if sum(map(len, sent.messages)) < 3:  # c came after b's message left (a loaded machine)
        sent.wait_one()
    assert sent.messages[0] == ["a"]
    assert sorted(id_ for message in sent.messages[1:] for id_ in message) == ["b", "c"]


def test_a_sender_that_raises_does_not_stop_the_thread() -> None:
    sent = Sent()
    calls = 0

    def flaky(ids: Sequence[str]) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            sent.arrived.release()
            raise RuntimeError("broker away")
        sent(ids)

    later = LaterIngests(flaky, every_s=0.01)
    later.add("a")
    sent.wait_one()
    later.add("b")
    sent.wait_one()
    assert sent.messages == [["b"]]


def test_a_run_without_an_intent_is_held_not_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = Sent()
    later = LaterIngests(sent, every_s=3600)
    monkeypatch.setattr(learn, "later_ingests", lambda: later)
    for i, intent in enumerate((None, "")):
        ctx = RunContext(
            row={"id": f"e{i}", "intent": intent},
            settings=Settings(),
            redis=None,  # type: ignore[arg-type]
        )
        learn.learn(ctx)
    sent.wait_one()
    later.flush()
    assert [id_ for message in sent.messages for id_ in message] == ["e0", "e1"]
