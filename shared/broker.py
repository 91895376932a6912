"""The Celery configuration every app shares: broker, routing, serializer, delivery guarantees."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import setup_logging
from kombu import Queue as KombuQueue

from shared.config import Settings, get_settings
from shared.logs import configure_logging
from shared.queues import TASK_ROUTES, Queue


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings derived from ours; one place so gateway and workers agree."""
    _, redis_url = settings.require_urls()
    return {
        "broker_url": redis_url,
        # kombu's Redis transport, one client per channel (shared/broker_transport.py).
        "broker_transport": "shared.broker_transport:Transport",
        # Results live in Postgres (executions rows); the backend only serves ping/bench.
        "result_backend": redis_url,
        "task_ignore_result": True,
        "result_expires": 300,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_queues": [KombuQueue(q.value) for q in Queue],
        "task_default_queue": Queue.MAINTENANCE.value,
        "task_routes": TASK_ROUTES,
        # One message at a time per process: executions are long and uneven.
        "worker_prefetch_multiplier": 1,
        # Redis redelivers an unacked message after this many seconds; it must exceed
        # the longest hard time limit or a still-running task would be handed out twice.
        "broker_transport_options": {"visibility_timeout": settings.celery_visibility_timeout_s},
        "result_backend_transport_options": {
            "visibility_timeout": settings.celery_visibility_timeout_s
        },
        "broker_connection_retry_on_startup": True,
        # Off by default: four extra broker writes per task that nobody reads. Flower sends
        # `enable_events` to the workers while it runs; `celery_task_events` turns them on.
        "worker_send_task_events": settings.celery_task_events,
        "task_send_sent_event": settings.celery_task_events,
        "worker_hijack_root_logger": False,
        "enable_utc": True,
    }


def make_celery(main: str, *, settings: Settings | None = None) -> Celery:
    """A Celery app configured from settings (validated: bad settings fail here)."""
    app = Celery(main)
    app.conf.update(celery_config(settings or get_settings()))
    return app


def worker_logging(settings: Settings) -> None:
    """JSON logs for a worker or beat process: set up now (start-up warnings come before
    Celery's logging), and again at Celery's `setup_logging`, which then leaves ours alone."""
    if settings.log_format == "json":
        configure_logging(level=settings.log_level, log_format="json")
        setup_logging.connect(_json_logging, weak=False)


def _json_logging(*, loglevel: int | str, **_: Any) -> None:
    """Celery's `setup_logging` hook: connected, Celery leaves logging to us."""
    configure_logging(level=loglevel, log_format="json")
