"""Celery app of the learning workers (queues ``learning`` and ``maintenance``) and beat."""

from __future__ import annotations

import sys
import threading
from typing import Any

from celery import bootsteps
from celery.signals import worker_init, worker_process_init

from shared.broker import make_celery, worker_logging
from shared.config import get_settings
from shared.db import check_database_model
from shared.offline import go_offline
from shared.runtime import freeze_long_lived
from shared.telemetry import instrument_celery, setup
from workers.learning.schedule import BEAT_SCHEDULE

# Workers, beat and Flower import this module first; the pool processes inherit it.
go_offline()

app = make_celery("agentcards-learning")
worker_logging(get_settings())
# Beat sends the periodic jobs; workers ingest and maintain. Flower only watches: not traced.
if "flower" not in sys.argv and setup(
    "agentcards-beat" if "beat" in sys.argv else "agentcards-learning-worker"
):
    instrument_celery()
# Every module that defines tasks: a worker registers only what it imports.
app.conf.include = ["workers.learning.tasks", "workers.learning.maintenance"]
app.conf.beat_schedule = BEAT_SCHEDULE
# One beat sends, however many run (workers.learning.leader).
app.conf.beat_scheduler = "workers.learning.leader:LeaderScheduler"
# Ingestion runs in batches (workers.learning.batching): each process may hold two
# batches' worth of unacknowledged messages, one being ingested and one filling up.
# The prefetch default of the shared config (one message) would starve the buffer.
app.conf.worker_prefetch_multiplier = 2 * get_settings().learning_batch_size


class StoredModelCheck(bootsteps.Step):
    """Refuse to start a worker configured with another embedding model than the database's
    vectors were made with, as the gateway and the toolhost refuse (``shared.db.migrate``):
    its intents' vectors would be ranked against the tools' though not comparable. Checked
    when the worker is built, before its pool processes load a model: the worker exits with
    code 1 and the error naming ``agentcards reembed``."""

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        check_database_model(get_settings())
        super().__init__(parent, **kwargs)


app.steps["worker"].add(StoredModelCheck)


@worker_init.connect
def _freeze_imports(**_: Any) -> None:
    """The worker's imports live as long as it: out of the collector's reach, before its
    pool forks (only worker processes: beat, Flower and importers of this app freeze nothing)."""
    freeze_long_lived("learning worker")


@worker_process_init.connect
def _warm_embedder(**_: Any) -> None:
    """Load the embedding model when a pool process starts, not on its first new capability.

    Loading takes seconds; done lazily it would delay the first ingestion past the
    gateway's grace for reporting the learned capability. A thread keeps the pool
    process ready for messages meanwhile (the embedder's lock serialises the load).
    A worker that asks the gateways for embeddings (``embeddings_from=gateway``) loads none.
    """
    from workers.learning import clients

    if get_settings().embeddings_from != "self":
        freeze_long_lived("learning worker")  # its imports: out of the collector's reach
        return

    def warm_up() -> None:
        clients.embedder().embed(["warm-up"])
        # The model and its libraries are ~1M long-lived objects; left in the collected
        # generations, every full collection walks them all (measured: 20 % of a batch).
        freeze_long_lived("learning worker")

    threading.Thread(target=warm_up, daemon=True).start()
