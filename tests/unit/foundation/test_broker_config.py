"""The Celery configuration: task events cost broker writes and are off unless asked for."""

from __future__ import annotations

from shared.broker import celery_config
from shared.config import Settings

URLS = {"database_url": "postgresql://x@localhost/x", "redis_url": "redis://localhost:1/0"}


def test_task_events_are_off_by_default() -> None:
    config = celery_config(Settings(**URLS))
    assert config["worker_send_task_events"] is False
    assert config["task_send_sent_event"] is False


def test_task_events_on_when_configured() -> None:
    config = celery_config(Settings(**URLS, celery_task_events=True))
    assert config["worker_send_task_events"] is True
    assert config["task_send_sent_event"] is True
