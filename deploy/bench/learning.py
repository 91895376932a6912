"""`agentcards bench learning`: trace ingestion throughput (one learning worker) and graph refresh time.

Ingestion: N finished executions are written and N `ingest_execution` messages queued
while the (warm) worker does not consume; the clock starts when it resumes and stops
when every row has `learned_at`. "new" executions each carry distinct
code and intent (a capability insert with an embedding); "known" ones repeat code
already learned (the stats-update path). Refresh: the whole `refresh_metrics` (read
edges, PageRank, Louvain, write tools and capabilities) on synthetic graphs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from celery import Celery
from psycopg.types.json import Jsonb

from deploy.bench.learning_graph import synthetic_edges
from deploy.launcher.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from shared.broker import make_celery
from shared.config import Settings, settings_to_env
from shared.db import connect, migrate
from shared.dispatch import send_ingest
from shared.graph.metrics import compute_metrics
from shared.graph.store import refresh_metrics
from shared.queues import Queue

TOOLS = ("bench:fetch", "bench:store")
TOPICS = ("invoices", "weather", "tickets", "orders", "logs", "photos", "contracts", "news")


def run(n: int = 2000) -> dict[str, Any]:
    """Throughput for new and known capabilities, then refresh times at both graph sizes."""
    with _servers() as settings:
        worker = _start_worker(settings)
        try:
            new = _ingest_rate(settings, n=n, known=False)
            known = _ingest_rate(settings, n=n, known=True)
        finally:
            _stop(worker)
        refresh = [
            _refresh_time(settings, tools=t, edges=e)
            for t, e in ((1000, 10_000), (10_000, 100_000))
        ]
    return {
        "benchmark": "learning",
        "n": n,
        "ingest_new_capability_traces_per_s": new,
        "ingest_known_capability_traces_per_s": known,
        "refresh_graph_metrics": refresh,
        "targets": {"new_per_s": 200, "known_per_s": 1000, "refresh_10k_100k_s": 2.0},
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


@contextmanager
def _servers() -> Iterator[Settings]:
    home = Path(tempfile.mkdtemp(prefix="agentcards-bench-"))
    pg = EmbeddedPostgres.start(home / "pgdata")
    redis = EmbeddedRedis.start(home / "redis", port=free_port(), persist=False)
    try:
        settings = Settings(home=home, database_url=pg.url, redis_url=redis.url, env="test")
        migrate(settings)
        yield settings
    finally:
        redis.stop()
        pg.stop()
        shutil.rmtree(home, ignore_errors=True)


def _start_worker(settings: Settings) -> subprocess.Popen[bytes]:
    log = (settings.home / "learning.log").open("wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
    env |= settings_to_env(settings) | {"HF_HUB_OFFLINE": "1", "PYTHONSAFEPATH": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers.learning.celery_app", "worker",
         "-Q", "learning", "--concurrency", "1", "-n", f"bench-{uuid.uuid4().hex[:6]}@%h",
         "--without-gossip", "--without-mingle", "--loglevel", os.environ.get("BENCH_LOGLEVEL", "WARNING")],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    # Ready once it has ingested one execution (the embedding model is loaded by then).
    try:
        _ingest_rate(settings, n=1, known=False, prefix="warmup")
    except BaseException:
        _stop(proc)  # never leave a worker behind
        raise
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def _ingest_rate(settings: Settings, *, n: int, known: bool, prefix: str = "run") -> float:
    tag = uuid.uuid4().hex[:8]
    rows = []
    for i in range(n):
        # Known runs share one code text; new ones differ (and differ from the warm-up's).
        variant = tag if known else f"{prefix}{i}"
        code = (
            f"x = {variant!r}\nd = await mcp.bench.fetch(id=args['id'])\n"
            "return await mcp.bench.store(value=d)"
        )
        topic = TOPICS[i % len(TOPICS)]
        # 13 tokens, distinct per run: a realistic intent (the match set's are 10 at the
        # median) that the embedding cache cannot answer.
        intent = (
            "fetch and store a record"
            if known
            else f"{prefix}: fetch {topic} record {i} and store it"
        )
        rows.append((code, intent, _trace(i)))
    with connect(settings.database_url or "") as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO executions (status, code, intent, timeout_s, trace, duration_ms, "
            "finished_at, result) VALUES ('succeeded', %s, %s, 30, %s, 12.5, now(), "
            "'{\"ok\": true}') RETURNING id",  # a result: an empty one is no evidence
            [(code, intent, Jsonb(trace)) for code, intent, trace in rows],
            returning=True,
        )
        ids = []
        while True:
            ids.append(str(cur.fetchone()["id"]))  # type: ignore[index]
            if not cur.nextset():
                break
        conn.commit()
    if known:  # learn the shared code once before timing the known path
        app = make_celery("bench", settings=settings)
        _send(app, ids[:1])
        app.close()
        _wait_learned(settings, ids[:1])
        ids = ids[1:]
    # The queue is filled while the worker does not consume, and the clock starts when
    # it resumes: publishing (~1 ms a message from one client) must not be the limit.
    app = make_celery("bench", settings=settings)
    try:
        app.control.cancel_consumer(Queue.LEARNING.value, reply=True, limit=1, timeout=10)
        _send(app, ids)
        started = time.perf_counter()
        app.control.add_consumer(Queue.LEARNING.value, reply=True, limit=1, timeout=10)
        _wait_learned(settings, ids)
        elapsed = time.perf_counter() - started
    finally:
        app.control.add_consumer(Queue.LEARNING.value, reply=True, limit=1, timeout=10)
        app.close()
    return round(len(ids) / elapsed, 1)


def _send(app: Celery, ids: list[str]) -> None:
    for execution_id in ids:
        if not send_ingest(app, execution_id):  # logged; a benchmark missing runs is void
            raise RuntimeError(f"could not send the ingestion of {execution_id}")


def _wait_learned(settings: Settings, ids: list[str], timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    with connect(settings.database_url or "", autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) AS n FROM executions WHERE id = ANY(%s::uuid[]) AND learned_at IS NOT NULL",
                (ids,),
            ).fetchone()
            if row and int(row["n"]) == len(ids):
                return
            time.sleep(0.05)  # polling is Postgres work too: keep it off the two cores
    raise RuntimeError(f"ingestion did not finish within {timeout_s}s (see learning.log)")


def _trace(i: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    ts = 1_700_000_000.0 + i
    for n, tool in enumerate(TOOLS):
        call = f"c{n}"
        events.append(
            {"type": "tool_start", "call_id": call, "tool": tool, "parent": None, "ts": ts + n}
        )
        events.append(
            {"type": "tool_end", "call_id": call, "tool": tool, "parent": None, "ts": ts + n + 0.001,
             "duration_ms": 1.0, "ok": True, "error": None}
        )  # fmt: skip
    return events


def _refresh_time(settings: Settings, *, tools: int, edges: int) -> dict[str, Any]:
    rows = synthetic_edges(n_tools=tools, n_edges=edges, seed=0)
    with connect(settings.database_url or "") as conn:
        conn.execute("TRUNCATE tool_edges")
        conn.execute("DELETE FROM tools WHERE server = 'synthetic'")
        with conn.cursor() as cur:
            nodes = sorted({r[0] for r in rows} | {r[1] for r in rows})
            with cur.copy("COPY tools (id, server, name, schema_hash) FROM STDIN") as copy:
                for node in nodes:
                    copy.write_row((node, "synthetic", node, "x"))
            with cur.copy("COPY tool_edges (src, dst, kind, weight, count) FROM STDIN") as copy:
                seen = set()
                for src, dst, kind, weight in rows:
                    if (src, dst, kind) not in seen:
                        seen.add((src, dst, kind))
                        copy.write_row((src, dst, kind, weight, 1))
        conn.commit()
        # A learning worker imports scipy and igraph on its first refresh, not on every
        # one: pay that (~0.3 s) before the clock starts.
        compute_metrics(rows=rows[:10])
        started = time.perf_counter()
        metrics = refresh_metrics(conn)
        conn.commit()
        elapsed = time.perf_counter() - started
    return {
        "tools": tools,
        "edges": edges,
        "graph_nodes": metrics.nodes,
        "graph_edges": metrics.edges,
        "seconds": round(elapsed, 3),
    }
