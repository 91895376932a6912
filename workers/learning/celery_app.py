"""Celery app of the learning workers (queues ``learning`` and ``maintenance``) and beat."""

from __future__ import annotations

from shared.broker import make_celery
from workers.learning.schedule import BEAT_SCHEDULE

app = make_celery("agentcards-learning")
app.conf.include = ["workers.learning.tasks"]
app.conf.beat_schedule = BEAT_SCHEDULE
