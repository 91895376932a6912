"""Benchmark of privacy's tokenisation (docs/privacy.md): a 1 MB tool result and a
100-record JSON result, tokenised, beside the untokenised path.

The untokenised path is what a run's outcome costs without privacy on the way to the store:
encoding it as JSON. The tokenised path is a fresh run's tokenizer over the value (every
string scanned by every detector, values replaced) and then the same encoding. The vault
write (one INSERT of the run's few distinct tokens) is not included.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from shared.privacy.keys import PiiKeys
from shared.privacy.tokens import Tokenizer

KEYS = PiiKeys(current=b"\x07" * 32)
TENANT = "bench"


def records(n: int) -> list[dict[str, Any]]:
    """``n`` CRM-like records: half their fields personal data, half ordinary values."""
    return [
        {
            "id": f"CUST-{i:06d}",
            "name": f"Customer {i}",
            "email": f"customer{i}@example.com",
            "phone": f"+1 415-555-{i % 10000:04d}",
            "card": "4111 1111 1111 1111",
            "iban": "DE89 3704 0044 0532 0130 00",
            "created": "2024-01-15T10:30:00Z",
            "balance": f"${i * 3.5:.2f}",
            "status": "active",
            "notes": f"Called on 2024-02-{1 + i % 28:02d}; prefers e-mail at customer{i}@example.com.",
        }
        for i in range(n)
    ]


def document(size: int) -> str:
    """About ``size`` bytes of prose with an e-mail and a phone number every ~1 KB."""
    line = (
        "The quarterly report was reviewed by the team on 2024-03-01 and version 2.4.1 of the "
        "pipeline processed 1234567 rows at $0.004 each; follow-ups go to ops@example.com or "
        "+44 7911 123456 before the next review. "
    )
    return (line * (size // len(line) + 1))[:size]


def _p50(fn: Callable[[], object], n: int) -> float:
    fn()  # warm-up: compiled patterns, first allocations
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _case(value: Any, n: int) -> dict[str, Any]:
    def plain() -> bytes:
        return orjson.dumps(value)

    def tokenised() -> bytes:
        tok = Tokenizer(KEYS.token_key(TENANT))
        return orjson.dumps(tok.value(value))

    tok = Tokenizer(KEYS.token_key(TENANT))
    tok.value(value)
    base, with_pii = _p50(plain, n), _p50(tokenised, n)
    return {
        "bytes": len(orjson.dumps(value)),
        "distinct_tokens": len(tok.produced),
        "untokenised_p50_ms": round(base, 3),
        "tokenised_p50_ms": round(with_pii, 3),
        "added_p50_ms": round(with_pii - base, 3),
    }


def e2e_overhead(n: int) -> dict[str, Any]:
    """`bench e2e`'s one-tool path (one client, one sandbox worker) on a stack with
    `AGENTCARDS_PII=off` and one with `tokenize`, both up at once and every request
    alternating between them (the order flipped every round), so that other work on the
    machine hits both alike: p50 of each and their ratio, beside each one's Celery floor."""
    import contextlib
    import tempfile
    from pathlib import Path

    from deploy.bench.e2e import Side, _latency
    from deploy.bench.echo_server import write_config
    from deploy.launcher.harness import temporary_stack

    load_start = os.getloadavg()
    with (
        tempfile.TemporaryDirectory(prefix="agentcards-bench-") as tmp,
        contextlib.ExitStack() as stacks,
    ):
        config = write_config(Path(tmp) / "mcp.json", agentcards={"cache": {"ttl_s": 0}})
        sides = []
        for mode in ("off", "tokenize"):
            handle = stacks.enter_context(
                temporary_stack(mcp_config=config, sandbox_workers=1, pii=mode)
            )
            side = Side.of(handle, name=mode)
            stacks.callback(side.close)
            sides.append(side)
        off, on = _latency(sides, n=n)
    return {
        "n": n,
        "alternating": True,
        "load_avg_start": load_start,
        "load_avg_end": os.getloadavg(),
        "off_p50_ms": off["latency_ms"]["p50"],
        "tokenize_p50_ms": on["latency_ms"]["p50"],
        "ratio_p50": round(on["latency_ms"]["p50"] / off["latency_ms"]["p50"], 3),
        "no_tool_off_p50_ms": off["no_tool_latency_ms"]["p50"],
        "no_tool_tokenize_p50_ms": on["no_tool_latency_ms"]["p50"],
        "no_tool_ratio_p50": round(
            on["no_tool_latency_ms"]["p50"] / off["no_tool_latency_ms"]["p50"], 3
        ),
        "celery_noop_p50_ms": {
            "off": off["celery_noop_ms"]["p50"],
            "tokenize": on["celery_noop_ms"]["p50"],
        },
        "phases_ms": {"off": off["phases_ms"], "tokenize": on["phases_ms"]},
        "target_ratio_p50": 1.10,
    }


def run(n: int = 20, e2e: int = 0) -> dict[str, Any]:
    """p50 over ``n`` runs of each case; with ``e2e`` > 0, the end-to-end overhead too."""
    result: dict[str, Any] = {
        "benchmark": "pii",
        "runs": n,
        "tool_result_1mb": _case(document(1 << 20), n),
        "records_100": _case(records(100), max(n, 100)),
    }
    if e2e > 0:
        result["e2e_one_tool"] = e2e_overhead(e2e)
    return result
