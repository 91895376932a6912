"""Celery app of the learning workers (queues ``learning`` and ``maintenance``) and beat."""

from __future__ import annotations

import threading
from typing import Any

from celery.signals import worker_process_init

from shared.broker import make_celery
from workers.learning.schedule import BEAT_SCHEDULE

app = make_celery("agentcards-learning")
app.conf.include = ["workers.learning.tasks"]
app.conf.beat_schedule = BEAT_SCHEDULE


@worker_process_init.connect
def _warm_embedder(**_: Any) -> None:
    """Load the embedding model when a pool process starts, not on its first new capability.

    Loading takes seconds; done lazily it would delay the first ingestion past the
    gateway's grace for reporting the learned capability. A thread keeps the pool
    process ready for messages meanwhile (the embedder's lock serialises the load).
    """
    from workers.learning import resources

    threading.Thread(target=lambda: resources.embedder().embed(["warm-up"]), daemon=True).start()
