"""The query adapter trained by another ref's trainer (torch, before 2026-11-28) beside this
checkout's (numpy), on each set's learning half, scored as adapted dense on its test half.

    python -m research.search.trainer_check [--ref 2205161] nestful livemcpbench ...

Full-batch training (at most ``MAX_PAIRS`` pairs and ``MAX_NEGATIVES`` tools) gives the same
matrix to float precision; above the bounds the per-step samples come from another random
generator, so the figures differ by sampling alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from deploy.bench import datasets
from deploy.bench.search_recall import indexed_texts, learning_split, tool_ids
from shared.config import Settings
from shared.embeddings import get_embedder
from shared.search import adapter
from shared.search.tool_vectors import Run

ROOT = Path(__file__).resolve().parents[2]


def _unit(m: Any) -> np.ndarray:
    m = np.asarray(m, np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _trainer_of(ref: str, folder: Path) -> Any:
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{ref}:shared/search/adapter.py"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    path = folder / "ref_adapter.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("ref_adapter", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.train_adapter


def check(name: str, *, ref_train: Any, embedder: Any) -> dict[str, Any]:
    """Dense, the ref's adapter and this one's: top-1 and recall@5 on the test half."""
    dataset = getattr(datasets, name)()
    ids = [t.id for t in dataset.tools]
    catalogue = _unit(embedder.embed(indexed_texts(dataset.tools)))
    descriptions = dict(zip(ids, catalogue, strict=True))
    key_to_id = tool_ids(dataset)
    learn, test = learning_split(dataset.queries)
    learned = _unit(embedder.embed([q.text for q in learn]))
    tested = _unit(embedder.embed([q.text for q in test]))
    runs = [
        Run(order=i, vector=v, tools=tuple(sorted(key_to_id[g] for g in q.gold)))
        for i, (q, v) in enumerate(zip(learn, learned, strict=True))
    ]
    keys = [t.name if dataset.by == "name" else t.id for t in dataset.tools]
    out: dict[str, Any] = {"tools": len(ids), "pairs": sum(len(r.tools) for r in runs)}
    out["test"] = len(test)
    arms = {
        "dense": None,
        "ref": ref_train(descriptions, runs),
        "this": adapter.train_adapter(descriptions, runs),
    }
    for arm, matrix in arms.items():
        queries = tested if matrix is None else _unit(tested @ matrix.T)
        top = np.argsort(-(queries @ catalogue.T), axis=1)[:, :5]
        top1 = np.mean([keys[row[0]] in q.gold for row, q in zip(top, test, strict=True)])
        recall5 = np.mean(
            [
                len({keys[i] for i in row} & q.gold) / len(q.gold)
                for row, q in zip(top, test, strict=True)
            ]
        )
        out[arm] = [round(float(top1), 4), round(float(recall5), 4)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="2205161", help="the ref whose trainer is compared")
    parser.add_argument("sets", nargs="+")
    args = parser.parse_args()
    embedder = get_embedder(Settings())
    with tempfile.TemporaryDirectory() as tmp:
        ref_train = _trainer_of(args.ref, Path(tmp))
        print(json.dumps({s: check(s, ref_train=ref_train, embedder=embedder) for s in args.sets}))


if __name__ == "__main__":
    main()
