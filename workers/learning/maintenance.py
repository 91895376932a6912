"""Recovery sweeps beat runs on the ``maintenance`` queue: the reaper and the resend of lost
ingestion messages. Kept apart from the learning tasks: they learn nothing, they send work."""

from __future__ import annotations

import logging

from shared.config import get_settings
from shared.dispatch import resend_run, send_ingest
from shared.learning.lag import unlearned
from shared.queues import TaskName, learning_resent_key
from shared.recovery.reaper import reap_stale
from workers.learning import clients
from workers.learning.celery_app import app

log = logging.getLogger(__name__)
# A run is ingested within about a second of its end (one batch wait); one still unlearned
# after RESEND_AFTER_S lost its message, or sits in a long backlog (a copy is then skipped).
RESEND_AFTER_S = 30
RESEND_EVERY_S = 300
RESEND_BATCH = 500


@app.task(name=TaskName.REAP_EXECUTIONS, acks_late=True, reject_on_worker_lost=True)
def reap_executions() -> int:
    """End executions whose worker died or hung, and queued ones no worker came for.

    Idempotent: each is finished at most once (``finish_execution`` from the state read).
    """
    settings = get_settings()
    with clients.db_pool().connection() as conn:
        reaped = reap_stale(
            conn,
            clients.redis_client(),
            queue_max_s=settings.execution_queue_max_s,
            max_retries=settings.execution_max_retries,
            on_finished=_send_ingest,
            on_requeued=_resend_run,
        )
    return len(reaped)


def _send_ingest(execution_id: str) -> None:
    """The reaper's ``on_finished``: learn from the reaped run (a lost message is resent)."""
    send_ingest(app, execution_id)


def _resend_run(execution_id: str) -> None:
    """The reaper's ``on_requeued``: send a re-queued run (``"retry": "safe"``) again."""
    resend_run(app, execution_id)


@app.task(name=TaskName.RESEND_UNLEARNED, acks_late=True, reject_on_worker_lost=True)
def resend_unlearned() -> int:
    """Send the ingestion message again for runs still unlearned ``RESEND_AFTER_S`` after they
    ended: the sandbox worker's message is lost when Redis is down at the moment it finishes.

    Ingestion skips a run already learned, so a message merely slow is harmless twice; each
    run is sent again at most once per ``RESEND_EVERY_S`` (a Redis marker), so a long
    backlog is not flooded with copies. Returns how many were sent.
    """
    client = clients.redis_client()
    with clients.db_pool().connection() as conn:
        waiting = unlearned(conn, older_than_s=RESEND_AFTER_S, limit=RESEND_BATCH)
    sent = 0
    for execution_id in waiting:
        key = learning_resent_key(execution_id)
        if not client.set(key, 1, nx=True, ex=RESEND_EVERY_S):
            continue
        if send_ingest(app, execution_id):
            sent += 1
        else:
            client.delete(key)  # not sent: the next sweep tries it again
    if sent:
        log.warning("sent %d lost ingestion message(s) again", sent)
    return sent
