"""`bench footprint`'s second look: the learning worker after a consolidation pass.

On the held stack (``deploy.bench.held``), ``RUNS`` learned runs of the time server (each
its own phrasing, so each is an intent); ``pass_after_runs_s``: how soon after them a pass
had read them all, if one did within ``SOON_WAIT_S`` without the beat; then the beat's
consolidation task sent as the beat sends it. ``task_s`` is how long the task took in the learning worker's one pool
process: the time it learns no runs. Once a pass has read every run (and any process it
started has exited), the learning worker's processes are measured again: PSS/RSS and
whether they map torch, beside the figures the stack had idle.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import psutil

from deploy.bench.held import HeldStack
from shared.broker import make_celery
from shared.config import Settings
from shared.db import connect
from shared.queues import TaskName

RUNS = 12
ZONES = ("Asia/Tokyo", "Europe/Berlin", "America/Lima", "Africa/Cairo")
CODE = 'return await mcp.time.get_current_time(timezone=args["zone"])'
PASS_TIMEOUT_S = 300.0
SOON_WAIT_S = 60.0  # the beat's period is 600 s: a pass before this was queued by ingestion
CHILD = "workers.learning.consolidator"


def _runs(gateway_url: str) -> int:
    """The learned runs (succeeded with the time server's tool), one intent each."""
    learned = 0
    with httpx.Client(base_url=gateway_url, timeout=180) as client:
        for i in range(RUNS):
            zone = ZONES[i % len(ZONES)]
            body = {"code": CODE, "args": {"zone": zone}, "intent": f"time now in {zone}, ask {i}"}
            reply = client.post("/v1/executions", params={"wait": "true"}, json=body)
            learned += reply.status_code == 200 and reply.json().get("status") == "succeeded"
    return learned


def _read_every_run(database_url: str) -> bool:
    with connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM tool_vector_versions v WHERE v.runs_seen = "
            "(SELECT count(*) FROM intent_tools i WHERE i.tenant_id = v.tenant_id "
            "AND cardinality(i.tools_ok) > 0)"
        ).fetchone()
    return bool(row and row["n"])


def _pass_running(learning_pid: int) -> bool:
    for child in psutil.Process(learning_pid).children(recursive=True):
        try:
            if CHILD in " ".join(child.cmdline()):
                return True
        except psutil.Error:
            continue
    return False


def after_a_pass(stack: HeldStack, learning_pid: int) -> dict[str, Any]:
    """Runs, the beat's task, and the wait for its pass; what the task cost the worker."""
    learned = _runs(stack.gateway_url)
    # A pass queued by ingestion itself (a checkout that consolidates soon after runs):
    # seconds from the last run's answer until a pass had read every run, else None.
    ran = time.perf_counter()
    soon_s = None
    while time.perf_counter() - ran < SOON_WAIT_S:
        if _read_every_run(stack.database_url):
            soon_s = round(time.perf_counter() - ran, 1)
            break
        time.sleep(0.5)
    celery = make_celery(
        "bench-footprint",
        settings=Settings(redis_url=stack.redis_url, database_url=stack.database_url),
    )
    try:
        started = time.perf_counter()
        celery.send_task(TaskName.CONSOLIDATE_TOOL_VECTORS).get(timeout=PASS_TIMEOUT_S)
        task_s = time.perf_counter() - started
    finally:
        celery.close()
    deadline = time.monotonic() + PASS_TIMEOUT_S
    while not _read_every_run(stack.database_url) or _pass_running(learning_pid):
        if time.monotonic() > deadline:
            raise RuntimeError("no consolidation pass read every run")
        time.sleep(0.5)
    return {"learned_runs": learned, "pass_after_runs_s": soon_s, "task_s": round(task_s, 3)}
