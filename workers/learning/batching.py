"""A Celery task class that receives its buffered messages as one list, without losing any.

celery-batches buffers messages in the worker and hands them to a pool process as a
list, but it acknowledges them whenever that process returns or dies. Here:

- a pool process killed mid-batch (worker lost) rejects every message with requeue,
  so the batch is redelivered (the work is idempotent: see shared.learning.ingest);
- a batch whose ``run`` returns ``REQUEUE`` (say, the database is away) is requeued
  instead of acknowledged;
- a consumer restart (the broker connection dropped) starts the flush timer again and
  requeues at once the batches the pool discarded with the old connection (they would
  come back only after the visibility timeout);
- the flush timer does not hand over a partial batch while every pool process is
  busy with one: under load the buffer grows to a full batch instead of queueing
  many small ones (each costs its fixed round trips), while a lone message still
  goes out after one ``flush_interval``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from celery.worker.request import Request
from celery_batches import Batches, SimpleRequest
from celery_batches.trace import apply_batches_task

# What a batch returns to have its messages redelivered rather than acknowledged.
REQUEUE = "requeue"


@dataclass(eq=False)  # compared by identity: a set of the batches in the pool
class _Handed:
    """A batch handed to the pool: its messages, and the pool's job for it once there is one."""

    requests: list[Request]
    job: Any = None  # billiard's ApplyResult


class ReliableBatches(Batches):  # type: ignore[misc]  # celery-batches ships no type stubs
    """``Batches`` with requeue on worker loss or on request; acks only what was done."""

    abstract = True

    def __init__(self) -> None:
        super().__init__()
        self._handed: set[_Handed] = set()  # batches handed to the pool and not yet returned

    def Strategy(self, task: Any, app: Any, consumer: Any) -> Any:
        """Called at every consumer start, reconnections to the broker included.

        When the broker connection drops, Celery clears the event loop's timers
        (``celery.worker.loops.asynloop``) and discards batches still waiting for a pool
        process (``AsynPool.flush``) without calling their callbacks. celery-batches starts
        its flush timer only while ``_tref`` is None, so without this reset no partial batch
        would ever be flushed again: after a Redis restart the worker fetched messages and
        ingested none. A discarded batch's messages are requeued here, now that the broker
        is back; left alone they would come back only after the visibility timeout
        (``AGENTCARDS_CELERY_VISIBILITY_TIMEOUT_S``). A process may already have read a
        discarded job and run it: its messages then run twice, which ingestion allows (it
        locks the executions and skips those already learned).
        """
        stale: Any = getattr(self, "_tref", None)  # celery-batches: no type stubs
        if stale is not None:
            stale.cancel()
        self._tref = None
        self._requeue_discarded()
        handler = super().Strategy(task, app, consumer)
        if self._buffer.qsize() or self._pending.qsize():  # fetched before the drop
            self._tref = consumer.timer.call_repeatedly(self.flush_interval, self._do_flush)
        return handler

    def _requeue_discarded(self) -> None:
        """Requeue the batches no pool process accepted: ``AsynPool.flush`` dropped them all."""
        for batch in list(self._handed):
            if batch.job is not None and not getattr(batch.job, "_accepted", True):
                self._handed.discard(batch)
                for request in batch.requests:
                    request.reject(requeue=True)

    def _do_flush(self) -> None:
        full = self._buffer.qsize() >= self.flush_every
        if not full and self._pool is not None and len(self._handed) >= self._pool.num_processes:
            return  # the timer calls again; a full batch is flushed by the message count
        super()._do_flush()

    def flush(self, requests: Collection[Request]) -> Any:
        batch = _Handed(list(requests))
        simple = ([SimpleRequest.from_request(r) for r in batch.requests],)

        def on_return(result: Any) -> None:
            self._handed.discard(batch)
            for request in batch.requests:
                if result == REQUEUE:
                    request.reject(requeue=True)
                else:
                    request.acknowledge()

        def on_error(_exc_info: Any) -> None:
            # Called when the pool process died (WorkerLostError) or the batch timed out.
            self._handed.discard(batch)
            for request in batch.requests:
                request.reject(requeue=True)

        self._handed.add(batch)
        batch.job = self._pool.apply_async(
            apply_batches_task,
            (self, simple, 0, None),
            callback=on_return,
            error_callback=on_error,
        )
        return batch.job
