"""Runs whose ingestion message was lost are sent to learning again by the beat's sweep."""

from __future__ import annotations

import re
from collections.abc import Callable

from shared.broker import make_celery
from shared.config import Settings
from shared.db import connect
from shared.queues import TaskName
from tests.harness import Proc
from tests.integration.learning.test_learning_worker import add_runs, wait_until


def _learned(settings: Settings, ids: list[str]) -> set[str]:
    with connect(settings.database_url or "") as conn:
        rows = conn.execute(
            "SELECT id::text AS id FROM executions WHERE id = ANY(%s::uuid[]) "
            "AND learned_at IS NOT NULL",
            (ids,),
        ).fetchall()
    return {row["id"] for row in rows}


def _sweeps_done(worker: Proc) -> int:
    return len(re.findall(rf"{TaskName.RESEND_UNLEARNED}\[[^\]]+\] succeeded", worker.log()))


def test_runs_whose_message_was_lost_are_learned_once_and_recent_ones_left_alone(
    settings: Settings, celery_worker: Callable[..., Proc]
) -> None:
    # Two finished two minutes ago and never sent to learning (Redis was down then), and
    # one finished just now: its own message may still be on its way.
    lost, (recent,) = add_runs(settings, 2), add_runs(settings, 1)
    with connect(settings.database_url or "") as conn:
        conn.execute(
            "UPDATE executions SET finished_at = now() - interval '2 minutes' "
            "WHERE id = ANY(%s::uuid[])",
            (lost,),
        )
        conn.commit()
    worker = celery_worker("workers.learning.celery_app", "learning,maintenance")
    app = make_celery("test", settings=settings)
    try:
        app.send_task(TaskName.RESEND_UNLEARNED)  # what beat sends every 30 s
        wait_until(lambda: _learned(settings, lost) == set(lost), what="the lost runs learned")
        app.send_task(TaskName.RESEND_UNLEARNED)
        wait_until(lambda: _sweeps_done(worker) == 2, what="the second sweep ran")
    finally:
        app.close()
    assert _learned(settings, [recent]) == set()  # not due yet: never sent
    with connect(settings.database_url or "") as conn:
        cap = conn.execute("SELECT usage_count FROM capabilities").fetchall()
    assert cap == [{"usage_count": 2}]  # each lost run learned once
    assert worker.log().count("sent 2 lost ingestion message(s) again") == 1
    assert worker.proc.poll() is None
