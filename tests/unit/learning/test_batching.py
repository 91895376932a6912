"""ReliableBatches' delivery rules: ack when done, requeue on worker loss or on request."""

from __future__ import annotations

from typing import Any

import pytest

from workers.learning.batching import REQUEUE, ReliableBatches


class FakeRequest:
    def __init__(self) -> None:
        self.acked = False
        self.rejected: bool | None = None  # requeue flag when rejected
        self.eta = None  # no countdown

    def acknowledge(self) -> None:
        self.acked = True

    def reject(self, *, requeue: bool) -> None:
        self.rejected = requeue


class FakeJob:
    """billiard's ApplyResult as far as the batching task reads it."""

    _accepted = False  # set once a pool process took the job


class FakePool:
    num_processes = 1

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []
        self.results: list[FakeJob] = []

    def apply_async(self, target: Any, args: Any, **callbacks: Any) -> FakeJob:
        self.jobs.append(callbacks)
        self.results.append(FakeJob())
        return self.results[-1]


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> ReliableBatches:
    # SimpleRequest.from_request reads Celery request internals the fakes do not have.
    monkeypatch.setattr("workers.learning.batching.SimpleRequest.from_request", lambda r: r)
    task = ReliableBatches()
    task._pool = FakePool()
    return task


@pytest.mark.parametrize(
    ("finish", "acked", "rejected"),
    [
        (lambda job: job["callback"](None), True, None),
        (lambda job: job["callback"](REQUEUE), False, True),
        (lambda job: job["error_callback"](RuntimeError("worker lost")), False, True),
    ],
    ids=["done", "requeue-requested", "worker-lost"],
)
def test_a_batch_is_acked_only_when_done_else_requeued(
    batches: ReliableBatches, finish: Any, acked: bool, rejected: bool | None
) -> None:
    requests = [FakeRequest(), FakeRequest()]
    batches.flush(requests)
    finish(batches._pool.jobs[0])
    assert [(r.acked, r.rejected) for r in requests] == [(acked, rejected)] * 2
    assert not batches._handed


def test_the_timer_holds_a_partial_batch_while_every_process_is_busy(
    batches: ReliableBatches,
) -> None:
    batches.flush_every = 3
    batches.flush([FakeRequest()])  # the only pool process is now busy
    batches._buffer.put(FakeRequest())  # type: ignore[arg-type]
    batches._do_flush()  # timer tick: partial batch, nobody free
    assert len(batches._pool.jobs) == 1 and batches._buffer.qsize() == 1
    batches._pool.jobs[0]["callback"](None)  # the process is free again
    batches._do_flush()
    assert len(batches._pool.jobs) == 2 and batches._buffer.qsize() == 0


def test_after_a_reconnect_batches_no_process_accepted_are_requeued_at_once(
    batches: ReliableBatches,
) -> None:
    running, discarded = [FakeRequest()], [FakeRequest(), FakeRequest()]
    batches.flush(running)
    batches._pool.results[0]._accepted = True  # a process is ingesting it
    batches.flush(discarded)  # waiting for a process when the connection dropped
    batches._requeue_discarded()
    assert [r.rejected for r in discarded] == [True, True]
    assert running[0].rejected is None and not running[0].acked  # its callback still comes
    batches._pool.jobs[0]["callback"](None)
    assert running[0].acked and not batches._handed
