"""The learned curve as a user meets it on the stack: a real learning worker ingests the
learning half, queues the tenant's pass soon after its runs, and runs it in its child.

Per set and point (the gate's learned protocol: ``search_recall.learning_split``, a fresh
tenant per point), the learning share's runs are written as finished executions and their
``ingest_execution`` messages sent at once (a burst) to a learning worker (embedded Postgres
and Redis, no beat). The test half is then searched, per request, as the product does:

- ``at_learned``: in one snapshot taken the moment every run is ingested (whatever passes
  had landed by then: with a burst longer than the first soon delay, one may have);
- ``soon``: once the pass that read the tenant's newest run has committed (its seconds
  after the last run was ingested, measured by polling every 0.1 s);
- ``soon_plus_1`` / ``soon_plus_3``: after one and three more passes forced in this process
  (the beat's pass skips a tenant with nothing new: on the stack the ``soon`` state stays).

The gate's stages (``vote``, ``consolidated_1``, ``consolidated_3``: ingested and
consolidated in-process, nothing in between) are measured by ``agentcards bench search
--gate``; the same test requests in the same order, so the two can be paired.

    PYTHONPATH=$PWD python -m research.search.soon_curve OUT.json [SET,...] [FRACTIONS]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from celery import Celery

from deploy.bench.database import index_tools
from deploy.bench.datasets import SearchSet, all_sets
from deploy.bench.learning import _ingest_rate, _send, _servers, _stop, _wait_learned
from deploy.bench.search_gate import FRACTIONS, _CachedEmbedder, _ranked, _rows
from deploy.bench.search_recall import (
    TENANT,
    indexed_texts,
    judge,
    learning_split,
    store_runs,
)
from shared.broker import make_celery
from shared.config import Settings, settings_to_env
from shared.db import connect
from shared.embeddings import get_embedder
from shared.learning.consolidate import consolidate_tenant
from shared.queues import Queue

POLL_S = 0.1
SOON_TIMEOUT_S = 900.0
# More passes forced after the soon one, as (stage, passes before it); set by the command line
# (``SOON_CURVE_FORCED=1``): the stack's beat skips a tenant with nothing new.
FORCED: tuple[tuple[str, int], ...] = ()


def _search(conn: Any, *, embedder: Any, dataset: SearchSet, test: Sequence[Any], tenant: str,
            reference: np.ndarray) -> dict[str, list[list[float]]]:  # fmt: skip
    key = {t.id: (t.name if dataset.by == "name" else t.id) for t in dataset.tools}
    judged = judge(
        conn,
        embedder=embedder,
        dataset=dataset,
        queries=test,
        reference=reference,
        tenant=tenant,
        adapted=True,
    )
    return {
        "product": [_rows(_ranked(j.evidence, key), j.gold, dataset.scoring) for j in judged],
        "dense": [_rows(j.dense, j.gold, dataset.scoring) for j in judged],
    }


def _passes(conn: Any, tenant: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT v.version, v.last_intent_id, v.runs_seen, v.seconds, v.created_at, "
        "a.shipped AS adapter_shipped, a.seconds AS adapter_seconds "
        # A pass writes both rows in one transaction (one now()); ingestion's adapter fits
        # number their versions ahead of the pass's, so the version does not pair them.
        "FROM tool_vector_versions v LEFT JOIN query_adapters a "
        "ON a.tenant_id = v.tenant_id AND a.created_at = v.created_at "
        "WHERE v.tenant_id = %s ORDER BY v.version",
        (tenant,),
    ).fetchall()
    return [dict(r) for r in rows]


def _start_worker(settings: Settings) -> subprocess.Popen[bytes]:
    """One learning worker as ``agentcards up`` starts it (queues learning and maintenance:
    the soon pass's task is a maintenance one), ready once it has ingested a run."""
    log = (settings.home / "learning.log").open("wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
    env |= settings_to_env(settings) | {"HF_HUB_OFFLINE": "1", "PYTHONSAFEPATH": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers.learning.celery_app", "worker",
         "-Q", f"{Queue.LEARNING.value},{Queue.MAINTENANCE.value}", "--concurrency", "1",
         "-n", f"soon-{uuid.uuid4().hex[:6]}@%h", "--without-gossip", "--without-mingle",
         "--loglevel", "INFO"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        _ingest_rate(settings, n=1, known=False, prefix="warmup")
    except BaseException:
        _stop(proc)
        raise
    return proc


def _newest(url: str, tenant: str) -> int:
    with connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT max(id) AS n FROM intent_tools WHERE tenant_id = %s", (tenant,)
        ).fetchone()
    return int(row["n"]) if row and row["n"] is not None else 0


class _Watcher(threading.Thread):
    """Seconds from ``since`` until a pass that read the tenant's ``newest`` run has committed
    (polled every ``POLL_S``), or None after ``SOON_TIMEOUT_S``."""

    def __init__(self, url: str, *, tenant: str, newest: int, since: float) -> None:
        super().__init__(daemon=True)
        self.url, self.tenant, self.newest, self.since = url, tenant, newest, since
        self.seconds: float | None = None

    def run(self) -> None:
        with connect(self.url, autocommit=True) as conn:
            while time.monotonic() < self.since + SOON_TIMEOUT_S:
                row = conn.execute(
                    "SELECT 1 FROM tool_vector_versions WHERE tenant_id = %s "
                    "AND last_intent_id >= %s",
                    (self.tenant, self.newest),
                ).fetchone()
                if row is not None:
                    self.seconds = round(time.monotonic() - self.since, 2)
                    return
                time.sleep(POLL_S)


def _say(*what: Any) -> None:
    print(time.strftime("%H:%M:%S"), *what, file=sys.stderr, flush=True)


def measure_point(
    settings: Settings,
    app: Celery,
    *,
    embedder: Any,
    dataset: SearchSet,
    learn: Sequence[Any],
    test: Sequence[Any],
    fraction: float,
    reference: np.ndarray,
) -> dict[str, Any]:
    """One point's stages (see the module's docstring)."""
    url = settings.database_url or ""
    tenant = f"{TENANT}-soon-{int(fraction * 100)}"
    upto = min(len(learn), round(fraction * len(dataset.queries)))
    with connect(url) as conn:
        ids = store_runs(conn, dataset=dataset, queries=learn[:upto], tenant=tenant)
        conn.commit()
    point: dict[str, Any] = {"learned_executions": upto}
    sent = time.monotonic()
    _send(app, ids)
    _wait_learned(settings, ids)
    learned = time.monotonic()
    point["ingest_seconds"] = round(learned - sent, 2)
    _say(dataset.name, fraction, "ingested", point["ingest_seconds"])
    newest = _newest(url, tenant)
    watcher = _Watcher(url, tenant=tenant, newest=newest, since=learned)
    watcher.start()
    with connect(url) as conn:
        # One snapshot for every search of this stage: the state the moment the runs were in.
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        point["passes_at_learned"] = len(_passes(conn, tenant))
        point["adapters_at_learned"] = [  # the adapter's fits so far, ingestion's included
            dict(r)
            for r in conn.execute(
                "SELECT version, trained_on, held_back, shipped FROM query_adapters "
                "WHERE tenant_id = %s ORDER BY version",
                (tenant,),
            ).fetchall()
        ]
        found = _search(conn, embedder=embedder, dataset=dataset, test=test, tenant=tenant,
                        reference=reference)  # fmt: skip
        conn.rollback()
        conn.isolation_level = None
        _say(dataset.name, fraction, "searched at learned")
        point["at_learned"], point["dense"] = found["product"], found["dense"]
        watcher.join(SOON_TIMEOUT_S)
        point["soon_seconds_after_learned"] = watcher.seconds
        conn.autocommit = True
        point["passes"] = [
            {k: (str(v) if k == "created_at" else v) for k, v in p.items()}
            for p in _passes(conn, tenant)
        ]
        point["soon"] = _search(conn, embedder=embedder, dataset=dataset, test=test,
                                tenant=tenant, reference=reference)["product"]  # fmt: skip
        _say(dataset.name, fraction, "soon pass after", watcher.seconds, "s")
        conn.autocommit = False
        for stage, passes in FORCED:
            for _ in range(passes):
                consolidate_tenant(conn, tenant_id=tenant)
                conn.commit()
            conn.autocommit = True
            point[stage] = _search(conn, embedder=embedder, dataset=dataset, test=test,
                                   tenant=tenant, reference=reference)["product"]  # fmt: skip
            conn.autocommit = False
    return point


def measure(
    names: Sequence[str] | None, fractions: Sequence[float], out_path: str | None = None
) -> dict[str, Any]:
    """Every set (or ``names``): the stages at each point, per test request (written to
    ``out_path`` after each set)."""
    embedder = _CachedEmbedder(get_embedder(Settings()))
    out: dict[str, Any] = {"model": embedder.model_name, "sets": {}}
    for dataset in all_sets():
        if names and dataset.name not in names:
            continue
        started = time.monotonic()
        load = os.getloadavg()[0]
        with _servers() as settings:
            with connect(settings.database_url or "") as conn:
                vectors = np.asarray(embedder.embed(indexed_texts(dataset.tools)))
                index_tools(conn, tools=dataset.tools, vectors=vectors)
                conn.commit()
            _say(dataset.name, "indexed")
            worker = _start_worker(settings)
            _say(dataset.name, "worker ready")
            app = make_celery("soon-curve", settings=settings)
            try:
                docs = [f"{t.name}: {t.description}" for t in dataset.tools]
                reference = np.asarray(embedder.encode_reference(docs), np.float32)
                learn, test = learning_split(dataset.queries)
                figures: dict[str, Any] = {"test_queries": len(test)}
                for fraction in fractions:
                    figures[f"{int(fraction * 100)}%"] = measure_point(
                        settings, app, embedder=embedder, dataset=dataset, learn=learn,
                        test=test, fraction=fraction, reference=reference,
                    )  # fmt: skip
            finally:
                app.close()
                _stop(worker)
        out["sets"][dataset.name] = {
            "tools": len(dataset.tools),
            "queries": len(dataset.queries),
            "learned": figures,
            "seconds": round(time.monotonic() - started, 1),
            "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
        }
        _say(dataset.name, "done", out["sets"][dataset.name]["seconds"])
        if out_path:
            with open(out_path, "w") as f:
                json.dump(out, f)
    return out


def _fig(values: Any) -> str:
    return f"{values[0]:.3f} / {values[1]:.3f}" if values is not None else "-"


def _share(rows: Any, *, dense: np.ndarray, c1_lift: float | None) -> str:
    """The stage's mean lift over dense (top-1 + @5, per request) as a share of one
    consolidation's, ± 2 x its standard error (the noise)."""
    lift = np.asarray(rows, np.float64)[:, :2].sum(1) - dense.sum(1)
    if c1_lift is None or c1_lift <= 0:
        return f"lift {lift.mean():+.3f} (no consolidated lift)"
    se = lift.std(ddof=1) / np.sqrt(len(lift)) if len(lift) > 1 else 0.0
    return f"{lift.mean() / c1_lift:.2f} ± {2 * se / c1_lift:.2f}"


def table(soon: dict[str, Any], gate: dict[str, Any]) -> list[str]:
    """Markdown rows per set and point: dense, zero-shot and the gate's stages (``gate``: the
    JSON of ``bench search --gate``, this checkout's side) beside the stack's (``soon``);
    top-1 / @5, and each stage's share of one consolidation's lift over dense (top-1 + @5)."""
    rows = [
        "| set, point | dense | zero-shot | vote (0 s) | at the last run | soon pass (s after) "
        "| one consolidation | three | share: vote / at last run / soon |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    summary = gate["new_summary"]
    for name, figures in soon["sets"].items():
        arms = summary.get(name, {}).get("top1_@5_@10", {})
        for point, f in figures["learned"].items():
            if not isinstance(f, dict):
                continue
            dense = np.asarray(f["dense"], np.float64)[:, :2]
            c1 = arms.get(f"learned {point} consolidated_1")
            c1_lift = (c1[0] + c1[1]) - float(dense.sum(1).mean()) if c1 is not None else None
            gate_share = summary.get(name, {}).get("vote_share", {}).get(point, {})
            at = np.asarray(f["at_learned"], np.float64).mean(0)
            soon_ = np.asarray(f["soon"], np.float64).mean(0)
            rows.append(
                f"| {name} {point} | {_fig(dense.mean(0))} | {_fig(arms.get('zero_shot'))} "
                f"| {_fig(arms.get(f'learned {point} vote'))} | {_fig(at)} "
                f"| {_fig(soon_)} ({f['soon_seconds_after_learned']}) | {_fig(c1)} "
                f"| {_fig(arms.get(f'learned {point} consolidated_3'))} "
                f"| {gate_share.get('vote_share_of_1')} / "
                f"{_share(f['at_learned'], dense=dense, c1_lift=c1_lift)} / "
                f"{_share(f['soon'], dense=dense, c1_lift=c1_lift)} |"
            )
    return rows


if __name__ == "__main__":
    from shared.offline import go_offline

    go_offline()
    if sys.argv[1] == "--table":
        with open(sys.argv[2]) as f, open(sys.argv[3]) as g:
            print("\n".join(table(json.load(f), json.load(g))))
        sys.exit(0)
    if os.environ.get("SOON_CURVE_FORCED"):
        FORCED = (("soon_plus_1", 1), ("soon_plus_3", 2))
    names = sys.argv[2].split(",") if len(sys.argv) > 2 and sys.argv[2] else None
    fractions = [float(f) for f in sys.argv[3].split(",")] if len(sys.argv) > 3 else FRACTIONS
    measure(names, fractions, sys.argv[1])
