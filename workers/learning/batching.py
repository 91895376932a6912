"""A Celery task class that receives its buffered messages as one list, without losing any.

celery-batches buffers messages in the worker and hands them to a pool process as a
list, but it acknowledges them whenever that process returns or dies. Here:

- a pool process killed mid-batch (worker lost) rejects every message with requeue,
  so the batch is redelivered (the work is idempotent: see shared.learning.ingest);
- a batch whose ``run`` returns ``REQUEUE`` (say, the database is away) is requeued
  instead of acknowledged;
- the flush timer does not hand over a partial batch while every pool process is
  busy with one: under load the buffer grows to a full batch instead of queueing
  many small ones (each costs its fixed round trips), while a lone message still
  goes out after one ``flush_interval``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from celery.worker.request import Request
from celery_batches import Batches, SimpleRequest
from celery_batches.trace import apply_batches_task

# What a batch returns to have its messages redelivered rather than acknowledged.
REQUEUE = "requeue"


class ReliableBatches(Batches):  # type: ignore[misc]  # celery-batches ships no type stubs
    """``Batches`` with requeue on worker loss or on request; acks only what was done."""

    abstract = True

    def __init__(self) -> None:
        super().__init__()
        self._in_flight = 0  # batches handed to the pool and not yet returned

    def _do_flush(self) -> None:
        full = self._buffer.qsize() >= self.flush_every
        if not full and self._pool is not None and self._in_flight >= self._pool.num_processes:
            return  # the timer calls again; a full batch is flushed by the message count
        super()._do_flush()

    def flush(self, requests: Collection[Request]) -> Any:
        requests = list(requests)
        simple = ([SimpleRequest.from_request(r) for r in requests],)

        def on_return(result: Any) -> None:
            self._in_flight -= 1
            for request in requests:
                if result == REQUEUE:
                    request.reject(requeue=True)
                else:
                    request.acknowledge()

        def on_error(_exc_info: Any) -> None:
            # Called when the pool process died (WorkerLostError) or the batch timed out.
            self._in_flight -= 1
            for request in requests:
                request.reject(requeue=True)

        self._in_flight += 1
        return self._pool.apply_async(
            apply_batches_task,
            (self, simple, 0, None),
            callback=on_return,
            error_callback=on_error,
        )
