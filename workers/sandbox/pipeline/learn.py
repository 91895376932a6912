"""Last stage, in every run: ask the learning workers to learn from the stored execution."""

from __future__ import annotations

from shared.dispatch import send_ingest
from workers.sandbox.pipeline.context import RunContext


def learn(ctx: RunContext) -> None:
    """Sent after the store, also for a run that ended broken (its row is terminal too).
    Never raises: a lost message is sent again by beat's resend sweep."""
    # Imported here: the app needs the stack's URLs, the stage list (and its tests) do not;
    # in a worker the task module has imported it already.
    from workers.sandbox.celery_app import app

    # Without an intent no waiting response waits to see it learned (ops/wait.py).
    send_ingest(app, ctx.execution_id, later=not ctx.row.get("intent"))
