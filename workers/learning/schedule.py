"""The whole beat schedule, one entry per periodic job with why it runs that often."""

from __future__ import annotations

from typing import Any

from shared.queues import Queue, TaskName

BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    # Liveness of the learning worker pool as seen by Flower; cheap, every minute.
    "heartbeat": {
        "task": TaskName.PING,
        "schedule": 60.0,
        "options": {"queue": Queue.MAINTENANCE, "expires": 55},
    },
}
