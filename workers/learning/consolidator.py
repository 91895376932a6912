"""Consolidation passes in a short-lived child process of the learning worker.

A pass reads a tenant's runs (up to 100k intent vectors) and the catalogue, and trains for
up to a minute: done in the learning worker's one pool process, it would keep that process
from ingesting runs meanwhile and leave its memory grown for the rest of its life. The
tasks start this module as a child instead (``start``) and return at once; the child runs
the passes, reports them (metrics, log lines on the worker's stderr) and exits. One child
at a time per pool process: a caller that finds one running comes back later
(``consolidate_tenant_soon``) or leaves the tenant to the next beat pass.

Run as ``python -m workers.learning.consolidator [TENANT ...]`` (no tenant: every tenant
with new runs). It imports neither Celery nor the embedding model: numpy, psycopg, redis.
It shares the worker's process group, so stopping the stack stops a pass too; a pool
process killed alone leaves its pass to finish (it commits per tenant, and is idempotent).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Sequence

import redis

from shared import metrics
from shared.config import get_settings
from shared.db import connect
from shared.learning.consolidate import Fit, consolidate
from shared.logs import configure_logging

log = logging.getLogger(__name__)

# Training is background work: below the runs and searches sharing the cores.
NICENESS = 10
# One BLAS thread, as the torch training it replaced used one core: a pass never takes
# more than a core from the sandbox and the gateway.
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}

_running: subprocess.Popen[bytes] | None = None


def start(tenant_ids: Sequence[str] | None = None) -> int | None:
    """Start a pass over ``tenant_ids`` (None: every tenant with new runs) in a child
    process and return its pid; None while this process's previous child still runs."""
    global _running
    if _running is not None and _running.poll() is None:  # poll() also reaps a finished one
        return None
    _running = subprocess.Popen(
        [sys.executable, "-m", __name__, *(tenant_ids or [])],
        env={**os.environ, **ONE_THREAD},
    )
    # Reaped as soon as it exits (no zombie between passes); the pool process goes on.
    threading.Thread(target=_running.wait, name="consolidator-reaper", daemon=True).start()
    return _running.pid


def running() -> int | None:
    """The pid of this process's child while it runs."""
    return _running.pid if _running is not None and _running.poll() is None else None


def report_fit(client: redis.Redis, kind: str, *, fit: Fit) -> None:
    """One fit's metric (``agentcards_<kind>_fits_total{result}``) and log line."""
    result = "shipped" if fit.shipped else "kept"
    metrics.incr_labelled(client, f"{kind}_fits_total", result)
    log.info(
        "%s of %s: version %d %s (held-back top-1 %.3f -> %.3f, %.1f s)",
        kind.replace("_", " "),
        fit.tenant_id,
        fit.version,
        "shipped" if fit.shipped else "kept the current one",
        fit.score_before,
        fit.score_after,
        fit.seconds,
    )


def main(argv: Sequence[str]) -> int:
    """The child: the passes asked for, each committed and reported."""
    settings = get_settings()
    configure_logging(level=settings.log_level, log_format=settings.log_format)
    os.nice(NICENESS)
    database_url, redis_url = settings.require_urls()
    with connect(database_url) as conn:
        done = consolidate(conn, tenant_ids=list(argv) or None)
    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    for result in done:
        report_fit(client, "tool_vector", fit=result)
        if result.adapter is not None:
            report_fit(client, "query_adapter", fit=result.adapter)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
