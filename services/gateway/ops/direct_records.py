"""This gateway's drainer of direct calls' records (``shared.direct.drain``), as a thread."""

from __future__ import annotations

import threading

import redis

from services.gateway.state import GatewayState
from shared.direct.drain import BLOCK_MS, Drainer
from shared.dispatch import send_ingests
from shared.executions.liveness import worker_name


def start_drainer(state: GatewayState) -> Drainer:
    """A drainer consuming as this process, running in a daemon thread until ``stop()``."""
    _, redis_url = state.settings.require_urls()
    # Its own client: a read blocks up to BLOCK_MS, longer than a request's command may.
    client = redis.Redis.from_url(
        redis_url, socket_timeout=BLOCK_MS / 1000 + 5, socket_connect_timeout=1
    )
    drainer = Drainer(
        client=client,
        connection=state.pool.connection,
        learn=lambda execution_ids: send_ingests(state.celery, execution_ids),
        consumer=f"gateway:{worker_name()}",
    )
    threading.Thread(target=drainer.run, name="direct-records", daemon=True).start()
    return drainer
