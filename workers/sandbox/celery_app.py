"""Celery app of the sandbox workers (queue ``executions``)."""

from __future__ import annotations

from typing import Any

from celery import Task
from celery.signals import (
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
)

from shared.broker import make_celery, worker_logging
from shared.celery_events import BatchedTaskEvents
from shared.config import get_settings
from shared.logs import bind
from shared.queues import TaskName
from shared.runtime import freeze_long_lived
from shared.telemetry import instrument_celery, setup
from workers.sandbox.parking import Parking

app = make_celery("agentcards-sandbox")
worker_logging(get_settings())
# Pool processes inherit it (the exporter thread restarts in each, by the SDK's fork hook).
if setup("agentcards-sandbox-worker"):
    instrument_celery()
app.conf.include = ["workers.sandbox.tasks"]
# A run waiting for approval gives its place in the pool back (parking.py).
app.steps["consumer"].add(Parking)
# Flower's task events leave in one message per 0.2 s, not one per event (celery_events.py).
app.steps["consumer"].add(BatchedTaskEvents)


@worker_process_init.connect
def _start_heartbeat(**_: Any) -> None:
    """Each pool process beats while it lives: the reaper tells a dead worker by its silence."""
    from workers.sandbox import clients

    clients.heartbeat()


@worker_init.connect
@worker_process_init.connect
def _freeze_imports(**_: Any) -> None:
    """What the worker and each pool process start with live as long as they do: out of the
    collector's reach (the main process before its pool forks, each pool process once it
    started). Only worker processes: importing this app elsewhere freezes nothing."""
    freeze_long_lived("sandbox worker")


@worker_process_shutdown.connect
def _send_held_ingests(**_: Any) -> None:
    """A pool process that stops sends the runs it held for learning (pipeline/learn.py)."""
    from workers.sandbox.pipeline.learn import later_ingests

    later_ingests().flush()


@task_prerun.connect
def _bind_execution(*, task: Task, args: tuple[Any, ...] | None = None, **_: Any) -> None:
    """Every line logged while an execution runs names it (the tenant is bound at its claim)."""
    if task.name == TaskName.RUN_EXECUTION and args:
        bind(execution_id=args[0], tenant_id=None)


@task_postrun.connect
def _unbind_execution(**_: Any) -> None:
    """A pool process runs one task after another: the next must not inherit the ids."""
    bind(execution_id=None, tenant_id=None, tool_call_id=None)
