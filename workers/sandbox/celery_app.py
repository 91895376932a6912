"""Celery app of the sandbox workers (queue ``executions``)."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_process_init

from shared.broker import make_celery

app = make_celery("agentcards-sandbox")
app.conf.include = ["workers.sandbox.tasks"]


@worker_process_init.connect
def _start_heartbeat(**_: Any) -> None:
    """Each pool process beats while it lives: the reaper tells a dead worker by its silence."""
    from workers.sandbox import resources

    resources.heartbeat()
