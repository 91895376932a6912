"""Celery app of the sandbox workers (queue ``executions``)."""

from __future__ import annotations

from shared.broker import make_celery

app = make_celery("agentcards-sandbox")
app.conf.include = ["workers.sandbox.tasks"]
