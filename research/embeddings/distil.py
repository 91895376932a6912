"""Distil all-mpnet-base-v2 into MiniLM's query adapter, offline (issue 50): the teacher ranks,
the student learns.

Per set, ``bench search``'s learning split (each gold tool's requests alternate between a
learning and a test half). The learning half's requests are the tenant's runs; the shipped
adapter (``train_adapter``: cross-entropy of the adapted MiniLM query against the run's
tool, softmax over the catalogue) is compared with adapters trained on soft targets
``(1 - lam) * onehot(tool) + lam * softmax(mpnet cosine / TAU)``: mpnet's ranking of the
same catalogue for the same request, which consolidation could compute with the larger
model off the query path. Dense top-1 / @5 of the adapted MiniLM query on the test half;
noise: the standard error of the per-request difference from the shipped adapter.

    PYTHONPATH=. HF_HUB_OFFLINE=1 nice -n 10 python -m research.embeddings.distil \\
        --teacher /tmp/vectors/mpnet.npz
(the teacher's vectors from ``encoder_table``, which saves them beside its models folder).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from deploy.bench.search_recall import indexed_texts, learning_split, metrics, tool_ids
from research.search.datasets import all_sets, real_servers_issue31
from shared.embeddings import Embedder
from shared.search.adapter import DECAY, EPOCHS, SEED, TAU, _Adam, adapt, train_adapter
from shared.search.tool_vectors import Run

LAMBDAS = (0.25, 0.5, 1.0)


def train_soft(
    d: np.ndarray, x: np.ndarray, targets: np.ndarray, *, batch: int = 512
) -> np.ndarray:
    """W fitted to soft targets over the catalogue ``d`` (rows of ``targets`` sum to 1)."""
    identity = np.eye(d.shape[1], dtype=np.float32)
    w, adam = identity.copy(), _Adam(identity.shape)
    rng = np.random.default_rng(SEED)
    for _ in range(EPOCHS):
        pick = rng.choice(len(x), size=min(batch, len(x)), replace=False)
        xb, tb = x[pick], targets[pick]
        z = xb @ w.T
        norms = np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
        q = z / norms
        logits = (q @ d.T) / TAU
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        dq = ((p - tb) / (len(xb) * TAU)) @ d
        dz = (dq - q * (dq * q).sum(axis=1, keepdims=True)) / norms
        adam.step(w, (dz.T @ xb + 2.0 * DECAY * (w - identity)).astype(np.float32))
    return w


def _rows(
    d: np.ndarray,
    keys: list[str],
    queries: np.ndarray,
    golds: list[frozenset[str]],
    scoring: str,
    *,
    matrix: np.ndarray | None = None,
) -> list[dict[str, float]]:
    """Per request, top-1 / @5 / @10 of the (adapted) dense ranking over ``d``."""
    rows = []
    for v, gold in zip(queries, golds, strict=True):
        a = adapt(matrix, v)
        ranked = [keys[j] for j in np.argsort(-(d @ a), kind="stable")[:10]]
        rows.append(metrics(ranked, gold, scoring=scoring))
    return rows


def _softmax(s: np.ndarray) -> np.ndarray:
    s = s / TAU
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def study(teacher: dict[str, np.ndarray], embedder: Embedder) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dataset in [*all_sets(), real_servers_issue31()]:
        name = dataset.name
        ids = [t.id for t in dataset.tools]
        keys = [t.name if dataset.by == "name" else t.id for t in dataset.tools]
        id_of = tool_ids(dataset)
        col = {tool: i for i, tool in enumerate(ids)}
        d = np.asarray(embedder.embed(indexed_texts(dataset.tools)), np.float32)
        qs = np.asarray(embedder.embed([q.text for q in dataset.queries]), np.float32)
        td, tq = teacher[f"{name}/tools"], teacher[f"{name}/queries"]
        position = {id(q): i for i, q in enumerate(dataset.queries)}
        learn, test = learning_split(dataset.queries)
        runs, x, y = [], [], []
        for order, q in enumerate(learn):
            i = position[id(q)]
            tools = tuple(id_of[g] for g in sorted(q.gold) if g in id_of)
            runs.append(Run(order=order, vector=qs[i], tools=tools))
            for tool in tools:
                x.append(qs[i])
                y.append((col[tool], i))
        shipped = train_adapter(dict(zip(ids, d, strict=True)), runs)
        xs = np.stack(x)
        onehot = np.zeros((len(y), len(ids)), np.float32)
        onehot[np.arange(len(y)), [c for c, _ in y]] = 1.0
        taught = _softmax(tq[[i for _, i in y]] @ td.T).astype(np.float32)
        arms = {"dense": None, "shipped adapter": shipped}
        for lam in LAMBDAS:
            arms[f"distil lam={lam}"] = train_soft(d, xs, (1 - lam) * onehot + lam * taught)

        test_q = np.stack([qs[position[id(q)]] for q in test])
        golds = [q.gold for q in test]
        rows = {
            arm: _rows(d, keys, test_q, golds, dataset.scoring, matrix=m) for arm, m in arms.items()
        }
        teacher_q = np.stack([tq[position[id(q)]] for q in test])
        rows["teacher dense (mpnet)"] = _rows(td, keys, teacher_q, golds, dataset.scoring)
        base = rows["shipped adapter"]
        table: dict[str, Any] = {"learn": len(learn), "test": len(test)}
        for arm, r in rows.items():
            entry: dict[str, float] = {}
            for metric in ("top1", "@5"):
                values = np.array([row[metric] for row in r])
                diff = values - np.array([row[metric] for row in base])
                entry[metric] = round(float(values.mean()), 3)
                entry[f"{metric} vs shipped"] = round(float(diff.mean()), 3)
                entry[f"{metric} se"] = round(float(diff.std(ddof=1) / np.sqrt(len(diff))), 3)
            table[arm] = entry
        out[name] = table
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--teacher", type=Path, required=True)
    args = parser.parse_args()
    teacher = dict(np.load(args.teacher))
    embedder = Embedder(model_name="all-MiniLM-L6-v2")
    print(json.dumps(study(teacher, embedder), indent=1))


if __name__ == "__main__":
    main()
