"""Does a run's time depend on what was sent just before it? `bench e2e`'s old order, beside others.

    python -m research.runs.sequence [ROOT] [--n 40] [--rounds 2]

One stack of the checkout at ROOT (default: this one) with `bench e2e`'s echo server, results
never cached. Each sequence repeats its kinds ``n`` times, one request at a time (`tool`: a
run with one tool call, `no_tool`: without, `noop`: a Celery no-op on the learning worker,
`gap`: 30 ms asleep); the sequences take turns ``rounds`` times, so the machine's load hits
each alike. For each run kind: the client's p50, and the p50s of the row's `created_at` →
`started_at` (the pickup) and `started_at` → `finished_at` (claim to the finishing UPDATE).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from deploy.bench.e2e import CODE, NO_TOOL_CODE, Side, _ms, _sample, wait_synced
from deploy.bench.echo_server import write_config
from deploy.bench.held import held_stack
from shared.db import connect

ROOT = Path(__file__).resolve().parents[2]
SEQUENCES = (
    ("tool", "no_tool", "noop"),  # bench e2e's fixed order until it shuffled its rounds
    ("no_tool",),
    ("tool", "no_tool"),
    ("no_tool", "noop"),
    ("tool", "gap", "no_tool", "gap"),
)
GAP_S = 0.03


def _run_sequence(side: Side, kinds: tuple[str, ...], n: int, base: int) -> dict[str, Any]:
    samples: dict[str, list[dict[str, Any]]] = {"tool": [], "no_tool": []}
    for i in range(n):
        for kind in kinds:
            if kind == "tool":
                samples["tool"].append(_sample(side.http, CODE, base + i))
            elif kind == "no_tool":
                samples["no_tool"].append(_sample(side.http, NO_TOOL_CODE, -(base + i)))
            elif kind == "noop":
                side.noop()
            else:
                time.sleep(GAP_S)
    out: dict[str, Any] = {}
    with connect(side.database_url, autocommit=True) as conn:
        for kind, got in samples.items():
            if not got:
                continue
            rows = conn.execute(
                "SELECT extract(epoch FROM started_at - created_at) * 1000 AS pickup_ms, "
                "extract(epoch FROM finished_at - started_at) * 1000 AS run_ms "
                "FROM executions WHERE id::text = ANY(%s)",
                ([s["id"] for s in got],),
            ).fetchall()
            out[kind] = {
                "client_p50": round(statistics.median(_ms(s) for s in got), 2),
                "pickup_p50": round(statistics.median(float(r["pickup_ms"]) for r in rows), 2),
                "started_to_finished_p50": round(
                    statistics.median(float(r["run_ms"]) for r in rows), 2
                ),
            }
    return out


def run(root: Path, n: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentcards-sequence-") as tmp:
        config = write_config(Path(tmp) / "mcp.json", agentcards={"cache": {"ttl_s": 0}})
        with held_stack(root, config, name=str(root)) as stack:
            wait_synced(stack.database_url)
            side = Side(stack.gateway_url, stack.database_url, stack.redis_url)
            try:
                side.warm_up()
                out: dict[str, Any] = {"root": str(root), "n": n, "sequences": {}}
                base = 1000  # unique arguments: nothing is cached
                for _ in range(rounds):
                    for kinds in SEQUENCES:
                        got = _run_sequence(side, kinds, n, base)
                        base += n + 1
                        out["sequences"].setdefault(" ".join(kinds), []).append(got)
                return out
            finally:
                side.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("root", nargs="?", default=str(ROOT), help="a checkout's directory")
    parser.add_argument("--n", type=int, default=40, help="repetitions of each sequence")
    parser.add_argument("--rounds", type=int, default=2, help="turns each sequence takes")
    args = parser.parse_args()
    print(json.dumps(run(Path(args.root), args.n, args.rounds), indent=1))


if __name__ == "__main__":
    main()
