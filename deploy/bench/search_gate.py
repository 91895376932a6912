"""`agentcards bench search --gate REF`: this checkout's tool search against REF's, per set.

Both sides are measured on the same sets (this checkout's, including the look-only-after
ones), each in a process of its own running its own product code: REF's tree (a git ref
or a checkout's directory) gets this checkout's harness (``datasets``, ``search_recall``,
this module and ``data/``) laid over it, so only the product differs. Per set and side,
per request:

- ``zero_shot``: every request, the product as searched before any learning, beside dense;
- ``distractors``: the same with the 13 tools of ``server-everything`` added to the
  catalogue (sets that lack them): a big, generic server must not take the top;
- ``learned``: the learned protocol of ``search_recall`` (requests split by tool) on a
  fresh tenant per point: the learning share's runs ingested as the learning worker does,
  then the test half searched right after the runs (``vote``: nothing consolidated yet),
  after one consolidation and after three, at 10, 25 and 50 % of the set's requests.

The gate compares the sides request by request. A figure's noise is twice the standard
error of the paired per-request difference (at least one request's worth, 1/n): a drop
larger than that on any set, arm and metric fails the gate. The figures' own sampling
error (the standard error of each side's mean) is reported beside them.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from deploy.bench.database import bench_database, index_tools
from deploy.bench.datasets import DATA, SearchSet, Tool, all_sets, server_requests
from deploy.bench.search_recall import (
    KS,
    TENANT,
    indexed_texts,
    judge,
    learn_from,
    learning_split,
    metrics,
)
from shared.config import Settings
from shared.db import connect
from shared.embeddings import Embedder, get_embedder
from shared.learning.consolidate import consolidate_tenant
from shared.search.fusion import WEIGHTS, fuse

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ("datasets.py", "search_recall.py", "search_gate.py")
FRACTIONS = (0.10, 0.25, 0.50)
# (stage, consolidations run before it, counted from the previous stage)
STAGES = (("vote", 0), ("consolidated_1", 1), ("consolidated_3", 2))
METRICS = ("top1", "@5")
DISTRACTOR_SERVER = "everything"


class _CachedEmbedder:
    """The embedder's query-side calls, memoised: each request is searched many times."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.model_name = embedder.model_name
        self._query: dict[tuple[str, ...], list[list[float]]] = {}
        self._reference: dict[str, list[float]] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embedder.embed(texts)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        key = tuple(texts)
        if key not in self._query:
            self._query[key] = self.embedder.embed_query(texts)
        return self._query[key]

    def encode_reference(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in self._reference]
        if missing:
            vectors = self.embedder.encode_reference(missing)
            self._reference.update(zip(missing, vectors, strict=True))
        return [self._reference[t] for t in texts]


def distractors() -> list[Tool]:
    """The tools of ``server-everything`` as listed (``data/real_servers``)."""
    every = server_requests(DATA / "real_servers")
    return [t for t in every.tools if t.server == DISTRACTOR_SERVER]


def with_distractors(dataset: SearchSet) -> SearchSet | None:
    """``dataset`` with the distractor server's tools added, or None when it has them."""
    if any(t.server == DISTRACTOR_SERVER for t in dataset.tools):
        return None
    return replace(
        dataset, name=f"{dataset.name}+everything", tools=[*dataset.tools, *distractors()]
    )


def _rows(ranked: Sequence[str], gold: frozenset[str], scoring: str) -> list[float]:
    m = metrics(ranked, gold, scoring=scoring)
    return [m["top1"], *(m[f"@{k}"] for k in KS[1:])]


def _ranked(evidence: Any, key: dict[str, str]) -> list[str]:
    fused = fuse(dense=evidence.dense, features=evidence.features, weights=WEIGHTS)
    return [key.get(t, t) for t in sorted(fused, key=lambda t: (-fused[t], t))[: max(KS)]]


def measure_set(
    *,
    embedder: Any,
    dataset: SearchSet,
    learned: bool = True,
    fractions: Sequence[float] = FRACTIONS,
) -> dict[str, Any]:
    """Per-request [top1, @5, @10] of the product and of dense, zero-shot and learned."""
    key = {t.id: (t.name if dataset.by == "name" else t.id) for t in dataset.tools}
    docs = [f"{t.name}: {t.description}" for t in dataset.tools]
    reference = np.asarray(embedder.encode_reference(docs), np.float32)
    scoring = dataset.scoring
    out: dict[str, Any] = {"tools": len(dataset.tools), "queries": len(dataset.queries)}

    def search(conn: Any, queries: Sequence[Any], tenant: str, adapted: bool) -> dict[str, Any]:
        judged = judge(
            conn,
            embedder=embedder,
            dataset=dataset,
            queries=queries,
            reference=reference,
            tenant=tenant,
            adapted=adapted,
        )
        return {
            "product": [_rows(_ranked(j.evidence, key), j.gold, scoring) for j in judged],
            "dense": [_rows(j.dense, j.gold, scoring) for j in judged],
        }

    with bench_database() as (url, _settings), connect(url) as conn:
        vectors = np.asarray(embedder.embed(indexed_texts(dataset.tools)))
        index_tools(conn, tools=dataset.tools, vectors=vectors)
        conn.autocommit = True
        out["zero_shot"] = search(conn, dataset.queries, TENANT, False)
        if not learned:
            return out
        learn, test = learning_split(dataset.queries)
        out["learned"] = {"test_queries": len(test)}
        for fraction in fractions:
            tenant = f"{TENANT}-{int(fraction * 100)}"
            upto = min(len(learn), round(fraction * len(dataset.queries)))
            conn.autocommit = False
            learn_from(
                conn, embedder=embedder, dataset=dataset, queries=learn[:upto], tenant=tenant
            )
            point: dict[str, Any] = {"learned_executions": upto}
            for stage, passes in STAGES:
                conn.autocommit = False
                for _ in range(passes):
                    consolidate_tenant(conn, tenant_id=tenant)
                    conn.commit()
                conn.autocommit = True
                found = search(conn, test, tenant, True)
                point[stage] = found["product"]
                point.setdefault("dense", found["dense"])
            out["learned"][f"{int(fraction * 100)}%"] = point
    return out


def measure(
    names: Sequence[str] | None = None,
    *,
    learned: Sequence[str] | None = None,
    distracted: Sequence[str] | None = None,
    fractions: Sequence[float] = FRACTIONS,
) -> dict[str, Any]:
    """Per-request figures of this checkout's product on every set (or those ``names``);
    the learned protocol on every set (or those ``learned``), the distractors on every set
    (or those ``distracted``)."""
    embedder = _CachedEmbedder(get_embedder(Settings()))
    sets = [s for s in all_sets() if names is None or s.name in names]
    out: dict[str, Any] = {"model": embedder.model_name, "sets": {}}
    for dataset in sets:
        out["sets"][dataset.name] = measure_set(
            embedder=embedder,
            dataset=dataset,
            learned=learned is None or dataset.name in learned,
            fractions=fractions,
        )
        extra = with_distractors(dataset)
        if extra is not None and (distracted is None or dataset.name in distracted):
            out["sets"][extra.name] = measure_set(embedder=embedder, dataset=extra, learned=False)
    return out


# --- comparing two sides ---------------------------------------------------------------


def _arms(measured: dict[str, Any]) -> Iterator[tuple[str, list[list[float]]]]:
    """(arm name, per-request rows) of one set: zero-shot, dense and each learned point."""
    yield "zero_shot", measured["zero_shot"]["product"]
    yield "dense", measured["zero_shot"]["dense"]
    for point, figures in measured.get("learned", {}).items():
        if isinstance(figures, dict):
            for stage, _ in STAGES:
                yield f"learned {point} {stage}", figures[stage]
            yield f"learned {point} dense", figures["dense"]


def _mean_se(values: np.ndarray) -> tuple[float, float]:
    n = len(values)
    if n == 0:
        return 0.0, 0.0
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0


def compare(ref: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Per set, arm and metric: both sides' means with their standard errors, the paired
    difference, its noise (2 x paired standard error, at least 1/n) and whether it drops
    by more than that."""
    rows: list[dict[str, Any]] = []
    for name, measured in new["sets"].items():
        if name not in ref["sets"]:
            continue
        before = dict(_arms(ref["sets"][name]))
        for arm, after_rows in _arms(measured):
            if arm not in before:
                continue
            a = np.asarray(before[arm], np.float64)
            b = np.asarray(after_rows, np.float64)
            for i, metric in enumerate(METRICS):
                ref_mean, ref_se = _mean_se(a[:, i])
                new_mean, new_se = _mean_se(b[:, i])
                diff, diff_se = _mean_se(b[:, i] - a[:, i])
                noise = max(2 * diff_se, 1.0 / max(1, len(a)))
                rows.append(
                    {
                        "set": name,
                        "arm": arm,
                        "metric": metric,
                        "n": len(a),
                        "ref": round(ref_mean, 4),
                        "ref_se": round(ref_se, 4),
                        "new": round(new_mean, 4),
                        "new_se": round(new_se, 4),
                        "diff": round(diff, 4),
                        "noise": round(noise, 4),
                        "dropped": diff < -noise and not arm.endswith("dense"),
                    }
                )
    failed = [r for r in rows if r["dropped"]]
    return {"passed": not failed, "failed": failed, "rows": rows}


def vote_share(measured: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per learned point: the share of the consolidated lift over dense (one consolidation,
    and three) that the vote alone carries, on top-1 + @5."""
    out: dict[str, dict[str, float | None]] = {}
    for point, figures in measured.get("learned", {}).items():
        if not isinstance(figures, dict):
            continue

        def score(stage: str, figures: dict[str, Any] = figures) -> float:
            a = np.asarray(figures[stage], np.float64)
            return float(a[:, 0].mean() + a[:, 1].mean())

        dense = score("dense")
        lifts = {stage: score(stage) - dense for stage, _ in STAGES}
        out[point] = {
            "vote_lift": round(lifts["vote"], 4),
            "consolidated_1_lift": round(lifts["consolidated_1"], 4),
            "consolidated_3_lift": round(lifts["consolidated_3"], 4),
            "vote_share_of_1": round(lifts["vote"] / lifts["consolidated_1"], 3)
            if lifts["consolidated_1"] > 0
            else None,
        }
    return out


def summary(measured: dict[str, Any]) -> dict[str, Any]:
    """Per set: each arm's mean top-1 / @5 / @10, and the vote's share of the lift."""
    out: dict[str, Any] = {}
    for name, figures in measured["sets"].items():
        arms = {
            arm: [round(float(v), 3) for v in np.asarray(rows, np.float64).mean(axis=0)]
            for arm, rows in _arms(figures)
            if rows
        }
        out[name] = {"top1_@5_@10": arms, "vote_share": vote_share(figures)}
    return out


# --- running a side ----------------------------------------------------------------------


@contextmanager
def _tree(ref: str) -> Iterator[Path]:
    """``ref``'s tree (a git ref, or a checkout's directory, copied) with this checkout's
    harness laid over it."""
    with tempfile.TemporaryDirectory(prefix="agentcards-gate-") as tmp:
        root = Path(tmp) / "tree"
        if Path(ref).is_dir():
            shutil.copytree(ref, root, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        else:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", "--format=tar", ref],
                capture_output=True,
                check=False,
            )
            if archive.returncode != 0:
                raise RuntimeError(f"--gate {ref}: {archive.stderr.decode(errors='replace')}")
            root.mkdir()
            subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
        bench = root / "deploy" / "bench"
        for name in HARNESS:
            shutil.copy2(ROOT / "deploy" / "bench" / name, bench / name)
        shutil.rmtree(bench / "data", ignore_errors=True)
        shutil.copytree(DATA, bench / "data")
        yield root


@contextmanager
def _side(root: Path, options: dict[str, Any], env: dict[str, str]) -> Iterator[Any]:
    """``measure(**options)`` started by the checkout at ``root`` in a process of its own;
    yields a function that waits for its result (both sides run at once)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out, tempfile.TemporaryFile() as log:
        argv = [sys.executable, "-m", "deploy.bench.search_gate", out.name, json.dumps(options)]
        proc = subprocess.Popen(
            argv, cwd=root, env={**env, "PYTHONPATH": str(root)}, stdout=log, stderr=log
        )

        def result() -> dict[str, Any]:
            if proc.wait() != 0:
                log.seek(0)
                tail = log.read().decode(errors="replace")[-3000:]
                raise RuntimeError(f"measuring {root} failed:\n{tail}")
            measured: dict[str, Any] = json.loads(Path(out.name).read_text())
            return measured

        try:
            yield result
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def run(
    ref: str,
    names: Sequence[str] | None = None,
    *,
    learned: Sequence[str] | None = None,
    distracted: Sequence[str] | None = None,
    fractions: Sequence[float] = FRACTIONS,
) -> dict[str, Any]:
    """Both sides on the same sets and one database server, compared (``compare``);
    ``names``, ``learned``, ``distracted`` and ``fractions`` narrow ``measure``."""
    options = {
        "names": names,
        "learned": learned,
        "distracted": distracted,
        "fractions": list(fractions),
    }
    env = dict(os.environ)
    with ExitStack() as stack:
        if not Settings().database_url:
            from deploy.launcher.embedded import EmbeddedPostgres

            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="agentcards-gate-pg-"))
            embedded = EmbeddedPostgres.start(Path(tmp) / "pgdata")
            stack.callback(embedded.stop)
            env["AGENTCARDS_DATABASE_URL"] = embedded.url
        load_start = os.getloadavg()[0]
        old_result = stack.enter_context(_side(stack.enter_context(_tree(ref)), options, env))
        new_result = stack.enter_context(_side(ROOT, options, env))
        old, new = old_result(), new_result()
    verdict = compare(old, new)
    return {
        "benchmark": "search-gate",
        "ref": ref,
        "new": str(ROOT),
        "model": new["model"],
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "measured": options,
        "passed": verdict["passed"],
        "failed": verdict["failed"],
        "ref_summary": summary(old),
        "new_summary": summary(new),
        "comparison": verdict["rows"],
    }


if __name__ == "__main__":
    from shared.offline import go_offline

    go_offline()
    Path(sys.argv[1]).write_text(json.dumps(measure(**json.loads(sys.argv[2]))))
