"""Every message that starts work on a worker is sent from here: one place per task name.

Two policies, because the senders need two:

- ``send_run`` raises: a caller that just recorded a ``queued`` row must know the message
  never left (the gateway rejects the row and answers 503). ``resend_run`` is for a row
  already re-queued by recovery: a failure is logged, and the queue-wait limit ends the run
  if it is never sent.
- ``send_ingest`` never raises: the run is stored already, and beat's resend sweep sends
  the ingestion of a run still unlearned again (``workers/learning/maintenance.py``).
  It returns whether the message left, for callers that count.

Messages carry ids only (ARCHITECTURE: id-only messages); kombu raises several connection
error types, so failures are caught broadly and logged with the task name and id.

Every message says ``ignore_result``: the row is the result. Celery's ``send_task`` marks a
message `ignore_result: false` unless told (whatever ``task_ignore_result`` says), and the
worker then wrote each task's state to the result backend (a GET and a SET per task, kept
``result_expires``) while the sender subscribed to a result channel nobody read.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from celery import Celery

from shared.queues import TaskName

log = logging.getLogger(__name__)


def send_run(app: Celery, execution_id: str) -> None:
    """Send a queued execution to the sandbox workers; raises if the broker refused it.

    ``declare=[]``: the message goes by the default exchange straight to its queue's list
    (an LPUSH), which needs no declaration; the workers declare the queues they consume.
    Declaring it here cost every publish kombu's check of its declared-entity cache (a
    copy and bind of the queue object), about a sixth of the publish's CPU."""
    app.send_task(TaskName.RUN_EXECUTION, args=[execution_id], ignore_result=True, declare=[])


def resend_run(app: Celery, execution_id: str) -> bool:
    """Send a re-queued execution (``"retry": "safe"``) again; a failure is logged, not raised
    (the row waits ``queued`` and the queue-wait limit ends it if it is never sent)."""
    try:
        send_run(app, execution_id)
    except Exception as exc:  # kombu raises several connection errors
        log.error("could not send re-queued execution %s: %s", execution_id, exc)
        return False
    return True


def send_ingest(app: Celery, execution_id: str) -> bool:
    """Ask the learning workers to learn from a finished execution; never raises."""
    return send_ingests(app, [execution_id])


def send_ingests(app: Celery, execution_ids: Sequence[str]) -> bool:
    """``send_ingest`` of several executions in one message (``args``: their ids): a batch
    of direct calls' records, or a sandbox worker's runs without an intent of the last
    second, costs one message to send, receive and acknowledge."""
    if not execution_ids:
        return True
    try:
        app.send_task(TaskName.INGEST_EXECUTION, args=list(execution_ids), ignore_result=True)
    except Exception as exc:  # kombu raises several connection errors; the row is stored
        log.error(
            "could not enqueue ingestion of %s (the resend sweep will): %s",
            ", ".join(execution_ids),
            exc,
        )
        return False
    return True
