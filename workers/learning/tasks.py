"""Learning tasks: thin wrappers that load by id and call pure functions in ``shared``."""

from __future__ import annotations

import logging

from shared.queues import TaskName
from workers.learning.celery_app import app

log = logging.getLogger(__name__)


@app.task(name=TaskName.PING, ignore_result=False)
def ping() -> str:
    """Round-trip check used by `agentcards status` and the e2e benchmark baseline."""
    return "pong"
