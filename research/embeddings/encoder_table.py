"""The encoder table (issue 50): dense quality, short-query latency and memory per encoder.

Encoders: MiniLM and all-mpnet-base-v2, each run by torch (the product's default path) and by
ONNX Runtime with int8 weights, all loaded through the product's ``load_model``.

    PYTHONPATH=. HF_HUB_OFFLINE=1 nice -n 10 python -m research.embeddings.encoder_table \
        --models-dir /tmp/models > encoder_table.json

- quality: every set of ``bench search`` plus real_servers_issue31; each catalogue embedded as
  the toolhost embeds it (``indexed_texts``), each request as the gateway does
  (``embed_query``); dense top-1 and @5 over all requests (both splits);
- latency: ``bench search``'s short requests, one at a time, one thread, every encoder in
  one process and the encoders taken in turn per request, so load moves them alike;
- memory: PSS (``/proc/self/smaps_rollup``) of a fresh process per encoder after loading it
  and embedding one request, and the same process's import-only PSS as the floor.
- fidelity: mean and minimum cosine of each int8 encoder's request vectors with its torch one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ENCODERS = {
    "MiniLM": ("all-MiniLM-L6-v2", "torch"),
    "MiniLM int8": ("all-MiniLM-L6-v2", "onnx-int8"),
    "mpnet": ("all-mpnet-base-v2", "torch"),
    "mpnet int8": ("all-mpnet-base-v2", "onnx-int8"),
}
WARMUP = 10


def _pss_kib() -> int:
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def _embedder(label: str, models_dir: Path) -> Any:
    from shared.embeddings import Embedder

    name, backend = ENCODERS[label]
    return Embedder(model_name=name, backend=backend, models_dir=models_dir, device="cpu")


def memory(label: str, models_dir: Path) -> dict[str, float]:
    """PSS in MiB after imports, then after loading ``label`` and one request."""
    import torch  # noqa: F401 - the floor every embedding process pays

    from shared.embeddings import Embedder  # noqa: F401

    floor = _pss_kib()
    started = time.perf_counter()
    embedder = _embedder(label, models_dir)
    embedder.embed_query(["list the files in the repository"])
    return {
        "pss_mib": round(_pss_kib() / 1024, 1),
        "imports_pss_mib": round(floor / 1024, 1),
        "load_s": round(time.perf_counter() - started, 1),
    }


def quality(label: str, models_dir: Path) -> dict[str, Any]:
    """Dense top-1 / @5 per set, and the short requests' vectors (for fidelity)."""
    from deploy.bench.search import short_requests
    from deploy.bench.search_recall import indexed_texts, metrics
    from research.search.datasets import all_sets, real_servers_issue31

    embedder = _embedder(label, models_dir)
    sets = {s.name: s for s in [*all_sets(), real_servers_issue31()]}
    out: dict[str, Any] = {}
    saved: dict[str, np.ndarray] = {}
    for name, dataset in sets.items():
        tools = np.asarray(embedder.embed(indexed_texts(dataset.tools)), np.float32)
        keys = [t.name if dataset.by == "name" else t.id for t in dataset.tools]
        rows, queries = [], []
        for query in dataset.queries:
            vector = np.asarray(embedder.embed_query([query.text])[0], np.float32)
            queries.append(vector)
            ranked = [keys[i] for i in np.argsort(-(tools @ vector), kind="stable")[:10]]
            rows.append(metrics(ranked, query.gold, scoring=dataset.scoring))
        saved[f"{name}/tools"], saved[f"{name}/queries"] = tools, np.stack(queries)
        out[name] = {
            "n": len(rows),
            "top1": round(float(np.mean([r["top1"] for r in rows])), 3),
            "@5": round(float(np.mean([r["@5"] for r in rows])), 3),
        }
    vectors = embedder.embed_query(short_requests())
    # Kept for the distillation study (research/embeddings/distil.py).
    (models_dir.parent / "vectors").mkdir(exist_ok=True)
    np.savez(models_dir.parent / "vectors" / f"{label.replace(' ', '_')}.npz", **saved)  # type: ignore[arg-type]
    return {"sets": out, "short_vectors": vectors}


def latency(labels: list[str], models_dir: Path, rounds: int) -> dict[str, Any]:
    """p50/p95 ms of one short request's embedding, encoders interleaved."""
    from deploy.bench.search import short_requests

    texts = short_requests()
    embedders = {label: _embedder(label, models_dir) for label in labels}
    for embedder in embedders.values():
        for text in texts[:WARMUP]:
            embedder.embed_query([text])
    samples: dict[str, list[float]] = {label: [] for label in labels}
    for _ in range(rounds):
        for text in texts:
            for label, embedder in embedders.items():
                started = time.perf_counter()
                embedder.embed_query([text])
                samples[label].append((time.perf_counter() - started) * 1000)
    tokens = [len(ids) for ids in next(iter(embedders.values())).token_ids(texts)]
    return {
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "requests": len(texts),
        "rounds": rounds,
        "tokens_median": float(np.median(tokens)),
        "ms": {
            label: {
                "p50": round(float(np.percentile(s, 50)), 2),
                "p95": round(float(np.percentile(s, 95)), 2),
            }
            for label, s in samples.items()
        },
    }


def _child(args: list[str]) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "research.embeddings.encoder_table", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models-dir", type=Path, required=True)
    parser.add_argument("--only", choices=["memory", "quality", "latency"])
    parser.add_argument("--encoder", choices=list(ENCODERS))
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    if args.only == "memory":
        print(json.dumps(memory(args.encoder, args.models_dir)))
        return
    if args.only == "quality":
        print(json.dumps(quality(args.encoder, args.models_dir)))
        return
    if args.only == "latency":
        print(json.dumps(latency(list(ENCODERS), args.models_dir, args.rounds)))
        return
    base = ["--models-dir", str(args.models_dir)]
    table: dict[str, Any] = {"encoders": {}}
    vectors = {}
    for label in ENCODERS:
        mem = _child([*base, "--only", "memory", "--encoder", label])
        got = _child([*base, "--only", "quality", "--encoder", label])
        vectors[label] = np.asarray(got.pop("short_vectors"), np.float32)
        table["encoders"][label] = {"memory": mem, **got}
        print(f"{label}: done", file=sys.stderr)
    for label, (_, backend) in ENCODERS.items():
        if backend != "torch":
            plain = vectors[label.removesuffix(" int8")]
            cos = np.sum(vectors[label] * plain, axis=1)
            table["encoders"][label]["cosine_with_torch"] = {
                "mean": round(float(cos.mean()), 4),
                "min": round(float(cos.min()), 4),
            }
    table["latency"] = _child([*base, "--only", "latency", "--rounds", str(args.rounds)])
    print(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
