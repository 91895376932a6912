"""Sandbox tasks: load an execution by id, run it in an isolated child, store the outcome."""

from __future__ import annotations

import logging

from shared.queues import Queue, TaskName
from workers.sandbox.celery_app import app

log = logging.getLogger(__name__)


@app.task(name=TaskName.SANDBOX_PING, ignore_result=False, queue=Queue.EXECUTIONS)
def sandbox_ping() -> str:
    """Round-trip check for the sandbox worker pool."""
    return "pong"
