"""What loading the embedding model costs a process: read directly (lean) or through
sentence-transformers, each in fresh processes, alternated so both see the same machine load.

    python -m research.embeddings.load_cost [--runs 5]

Each run is a new interpreter that imports the product's embedder, loads the packaged model and
embeds one text (what a gateway does at start); it reports its CPU seconds (user + system, from
the interpreter's start), wall seconds, resident memory after (VmRSS) and at peak, and which of
sentence-transformers' dependencies it imported. Prints medians as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sentence_transformers", "transformers", "sklearn", "scipy")

_CHILD = """
import json, resource, sys
if sys.argv[1] == "sentence-transformers":
    import shared.embeddings.lean as lean
    lean.read_lean = lambda directory: None  # the fallback every model took before
from shared.embeddings import Embedder
embedder = Embedder(model_name="all-MiniLM-L6-v2")
vector = embedder.embed(["search the web for the weather in Paris"])[0]
usage = resource.getrusage(resource.RUSAGE_SELF)
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({
    "model": type(embedder._model).__name__,
    "cpu_s": usage.ru_utime + usage.ru_stime,
    "rss_mib": int(status["VmRSS"].split()[0]) / 1024,
    "peak_rss_mib": usage.ru_maxrss / 1024,
    "imported": [m for m in HEAVY if m in sys.modules],
    "vector_head": vector[:4],
}))
"""


def _run(mode: str) -> dict[str, Any]:
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{_CHILD}", mode],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    modes = ("lean", "sentence-transformers")
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for _ in range(args.runs):
        for mode in modes:
            runs[mode].append(_run(mode))
    report: dict[str, Any] = {"runs": args.runs, "load_average": os.getloadavg()}
    for mode, results in runs.items():
        report[mode] = {
            key: round(statistics.median(r[key] for r in results), 3)
            for key in ("cpu_s", "wall_s", "rss_mib", "peak_rss_mib")
        } | {"model": results[0]["model"], "imported": results[0]["imported"]}
    lean, st = runs["lean"][0]["vector_head"], runs["sentence-transformers"][0]["vector_head"]
    report["same_vector_head"] = all(abs(a - b) < 1e-6 for a, b in zip(lean, st, strict=True))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
