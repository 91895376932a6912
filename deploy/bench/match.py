"""`agentcards bench match`: capability matching on a written paraphrase set at the adaptive threshold.

Every capability of ``data/match_set.json`` is stored with its intent embedding and
a success rate cycling through 1.0 / 0.8 / 0.6 (boosted, neutral, neutral); each
paraphrase should match its own capability first, and the unrelated intents should
match nothing. Reported at the adaptive threshold of a fresh tenant (start 0.70),
with a sweep over the threshold's range to show the trade-off the adaptation moves along.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from deploy.bench.search import bench_database
from shared.config import Settings
from shared.db import connect
from shared.embeddings import get_embedder
from shared.matching.capabilities import match_capabilities
from shared.matching.thresholds import Context, get_threshold, set_threshold
from shared.offline import go_offline

DATA = Path(__file__).parent / "data" / "match_set.json"
SUCCESS_RATES = (1.0, 0.8, 0.6)  # one third boosted by reliability, the rest neutral
SWEEP = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
TENANT = "bench"


def load_set(path: Path = DATA) -> dict[str, Any]:
    """The paraphrase set: capabilities (intent, code, paraphrases) and unrelated intents."""
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def store_capabilities(
    conn: psycopg.Connection[Any], *, capabilities: list[dict[str, Any]], vectors: list[list[float]]
) -> list[str]:
    """Insert the capabilities; returns their ids in order."""
    ids = []
    for i, (cap, vector) in enumerate(zip(capabilities, vectors, strict=True)):
        row = conn.execute(
            """
            INSERT INTO capabilities (tenant_id, code_hash, code, intent, intent_embedding, name,
                                      description, tools_used, usage_count, success_count,
                                      failure_count, success_rate)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 10, %s, %s, %s) RETURNING id
            """,
            (
                TENANT,
                hashlib.sha256(cap["code"].encode() + cap["name"].encode()).hexdigest(),
                cap["code"],
                cap["intent"],
                np.asarray(vector, dtype=np.float32),
                cap["name"],
                cap["intent"],
                Jsonb(cap.get("tools_used", [])),
                round(10 * SUCCESS_RATES[i % 3]),
                10 - round(10 * SUCCESS_RATES[i % 3]),
                SUCCESS_RATES[i % 3],
            ),
        ).fetchone()
        assert row is not None
        ids.append(str(row["id"]))
    conn.commit()
    return ids


def evaluate(
    conn: psycopg.Connection[Any],
    *,
    paraphrases: list[tuple[str, list[float]]],
    unrelated: list[list[float]],
) -> dict[str, Any]:
    """Top-1 accuracy on paraphrases and false-match rate on unrelated intents, at the current threshold."""
    correct = correct_any_threshold = 0
    for expected, vector in paraphrases:
        found = match_capabilities(conn, intent_embedding=vector, tenant_id=TENANT, limit=1)
        if found["capabilities"] and found["capabilities"][0]["id"] == expected:
            correct += 1
        nearest = conn.execute(
            "SELECT id FROM capabilities WHERE tenant_id = %s "
            "ORDER BY intent_embedding <=> %s LIMIT 1",
            (TENANT, np.asarray(vector, dtype=np.float32)),
        ).fetchone()
        if nearest and str(nearest["id"]) == expected:
            correct_any_threshold += 1
    false_matches = sum(
        1
        for vector in unrelated
        if match_capabilities(conn, intent_embedding=vector, tenant_id=TENANT, limit=1)[
            "total_found"
        ]
    )
    return {
        "threshold": get_threshold(conn, context=Context.CAPABILITY_MATCHING, tenant_id=TENANT),
        "top1_accuracy": round(correct / max(1, len(paraphrases)), 3),
        "false_match_rate": round(false_matches / max(1, len(unrelated)), 3),
        "nearest_neighbour_top1": round(correct_any_threshold / max(1, len(paraphrases)), 3),
    }


def run(*, path: Path = DATA) -> dict[str, Any]:
    """The whole benchmark as a JSON-ready dict."""
    data = load_set(path)
    caps = data["capabilities"]
    embedder = get_embedder(Settings())
    cap_vectors = embedder.embed([c["intent"] for c in caps])
    para_texts = [(i, p) for i, c in enumerate(caps) for p in c["paraphrases"]]
    para_vectors = embedder.embed([p for _, p in para_texts])
    unrelated_vectors = embedder.embed(data["unrelated"])
    with bench_database() as (url, _settings), connect(url) as conn:
        ids = store_capabilities(conn, capabilities=caps, vectors=cap_vectors)
        paraphrases = [(ids[i], v) for (i, _), v in zip(para_texts, para_vectors, strict=True)]
        adaptive = evaluate(conn, paraphrases=paraphrases, unrelated=unrelated_vectors)
        sweep = []
        for value in SWEEP:
            set_threshold(
                conn,
                context=Context.CAPABILITY_MATCHING,
                value=value,
                reason="bench sweep",
                tenant_id=TENANT,
            )
            sweep.append(evaluate(conn, paraphrases=paraphrases, unrelated=unrelated_vectors))
    return {
        "benchmark": "match",
        "model": embedder.model_name,
        "capabilities": len(caps),
        "paraphrases": len(para_texts),
        "unrelated": len(data["unrelated"]),
        "success_rates": list(SUCCESS_RATES),
        "at_adaptive_threshold": adaptive,
        "threshold_sweep": sweep,
    }


if __name__ == "__main__":
    go_offline()
    print(json.dumps(run(), indent=2))
