"""`agentcards bench match`: capability matching on written paraphrase sets, at the threshold a fresh install uses.

Every capability of a set is stored with its intent embedding and a success rate
cycling through 1.0 / 0.8 / 0.6 (boosted, neutral, neutral); each paraphrase should
match its own capability first, and the unrelated intents should match nothing.
Reported at the threshold a fresh tenant starts with (nothing is set: the value
``shared.matching.thresholds`` ships), beside the dense baseline in the same run (plain
cosine to the capability intents, exact, same threshold), and the curve over thresholds
for information. Three sets: ``match_set.json`` chose the starting threshold;
``match_set_heldout.json`` was written after that and is never tuned on;
``match_set_heldout2.json`` was written later still, by a writer who had not seen the
method, in domains neither of the others uses.

After runs: each capability is then run once with its first paraphrase as the intent
(stored as an alias, as ingestion does for a run of a capability), and its other two
paraphrases, which nothing has seen, are matched at the same fresh-install threshold,
beside the zero-shot figure on those same two. Reported beside the zero-shot figures,
never instead of them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from deploy.bench.database import bench_database
from deploy.bench.datasets import MATCH_HELDOUT, MATCH_HELDOUT2, MATCH_SET, load_set
from shared.capabilities.aliases import add_aliases
from shared.config import Settings
from shared.db import connect
from shared.embeddings import Embedder, get_embedder
from shared.matching.capabilities import match_capabilities
from shared.matching.thresholds import Context, get_threshold, initial_threshold, set_threshold
from shared.offline import go_offline

SETS = (MATCH_SET, MATCH_HELDOUT, MATCH_HELDOUT2)
ROLES = {
    MATCH_SET.name: "tuning: the starting threshold was chosen on its curve",
    MATCH_HELDOUT.name: "held-out: written after the threshold was chosen; never tuned on",
    MATCH_HELDOUT2.name: "second held-out: written later by someone who had not seen the method",
}
SUCCESS_RATES = (1.0, 0.8, 0.6)  # one third boosted by reliability, the rest neutral
# The adaptive threshold's range, from MIN_THRESHOLD up: the curve is for information.
CURVE = (*(round(0.40 + 0.02 * i, 2) for i in range(16)), 0.75, 0.80, 0.90)
TENANT = "bench"


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
    """Top-1 accuracy on paraphrases and false-match rate on unrelated intents, as
    ``match_capabilities`` answers at the tenant's current threshold."""
    correct = 0
    for expected, vector in paraphrases:
        found = match_capabilities(conn, intent_embedding=vector, tenant_id=TENANT, limit=1)
        if found["capabilities"] and found["capabilities"][0]["id"] == expected:
            correct += 1
    false_matches = sum(
        1
        for vector in unrelated
        if match_capabilities(conn, intent_embedding=vector, tenant_id=TENANT, limit=1)[
            "total_found"
        ]
    )
    return {
        "top1": round(correct / max(1, len(paraphrases)), 3),
        "false_match_rate": round(false_matches / max(1, len(unrelated)), 3),
    }


def dense_baseline(
    *, gold: np.ndarray, para: np.ndarray, unrelated: np.ndarray, threshold: float
) -> dict[str, float]:
    """The same figures for plain cosine to the capability intents (rows of ``para`` and
    ``unrelated`` are each query's cosines to every capability)."""
    hit = (para.argmax(axis=1) == gold) & (para.max(axis=1) >= threshold)
    return {
        "top1": round(float(hit.mean()), 3),
        "false_match_rate": round(float((unrelated.max(axis=1) >= threshold).mean()), 3),
    }


def after_one_run_each(
    conn: psycopg.Connection[Any],
    *,
    learn: list[tuple[str, str, list[float]]],
    unseen: list[tuple[str, list[float]]],
    unrelated: list[list[float]],
) -> dict[str, Any]:
    """``learn`` (capability id, phrasing, embedding) stored as aliases, as a run of the
    capability with that intent leaves them; ``unseen`` paraphrases and the unrelated
    intents matched before and after, at the tenant's current threshold."""
    before = evaluate(conn, paraphrases=unseen, unrelated=unrelated)
    add_aliases(conn, rows=learn)
    conn.commit()
    return {
        "runs": len(learn),
        "unseen_paraphrases": len(unseen),
        "zero_shot_unseen": before,
        "after_runs_unseen": evaluate(conn, paraphrases=unseen, unrelated=unrelated),
    }


def run_set(*, embedder: Embedder, path: Path, curve: tuple[float, ...] = CURVE) -> dict[str, Any]:
    """One set at the fresh-install threshold, beside dense, and the curve over thresholds."""
    data = load_set(path)
    caps = data["capabilities"]
    cap_vectors = embedder.embed([c["intent"] for c in caps])
    para_texts = [(i, p) for i, c in enumerate(caps) for p in c["paraphrases"]]
    para_vectors = embedder.embed([p for _, p in para_texts])
    unrelated_vectors = embedder.embed(data["unrelated"])
    reference = np.asarray(cap_vectors, np.float32)
    gold = np.asarray([i for i, _ in para_texts])
    para_cos = np.asarray(para_vectors, np.float32) @ reference.T
    unrelated_cos = np.asarray(unrelated_vectors, np.float32) @ reference.T
    with bench_database() as (url, _settings), connect(url) as conn:
        ids = store_capabilities(conn, capabilities=caps, vectors=cap_vectors)
        paraphrases = [(ids[i], v) for (i, _), v in zip(para_texts, para_vectors, strict=True)]
        # A fresh tenant: nothing set, so this is the value the system ships with.
        operating = get_threshold(conn, context=Context.CAPABILITY_MATCHING, tenant_id=TENANT)
        assert operating == initial_threshold(Context.CAPABILITY_MATCHING)
        at_operating = {
            "threshold": operating,
            "system": evaluate(conn, paraphrases=paraphrases, unrelated=unrelated_vectors),
            "dense": dense_baseline(
                gold=gold, para=para_cos, unrelated=unrelated_cos, threshold=operating
            ),
        }
        points = []
        for value in curve:
            set_threshold(
                conn,
                context=Context.CAPABILITY_MATCHING,
                value=value,
                reason="bench curve",
                tenant_id=TENANT,
            )
            points.append(
                {
                    "threshold": value,
                    "system": evaluate(conn, paraphrases=paraphrases, unrelated=unrelated_vectors),
                    "dense": dense_baseline(
                        gold=gold, para=para_cos, unrelated=unrelated_cos, threshold=value
                    ),
                }
            )
        set_threshold(
            conn,
            context=Context.CAPABILITY_MATCHING,
            value=operating,
            reason="bench after runs",
            tenant_id=TENANT,
        )
        first = {i: row for row, (i, _) in reversed(list(enumerate(para_texts)))}
        unseen = [row for row in range(len(para_texts)) if row not in first.values()]
        after_runs = after_one_run_each(
            conn,
            learn=[(ids[i], para_texts[row][1], para_vectors[row]) for i, row in first.items()],
            unseen=[paraphrases[row] for row in unseen],
            unrelated=unrelated_vectors,
        )
        after_runs["dense_unseen"] = dense_baseline(
            gold=gold[unseen], para=para_cos[unseen], unrelated=unrelated_cos, threshold=operating
        )
    return {
        "file": path.name,
        "role": ROLES.get(path.name, "not tuned on"),
        "capabilities": len(caps),
        "paraphrases": len(para_texts),
        "unrelated": len(data["unrelated"]),
        "at_operating_threshold": at_operating,
        "after_one_run_per_capability": after_runs,
        # Top-1 of the nearest capability whatever its score: what no threshold can beat.
        "nearest_neighbour_top1": round(float((para_cos.argmax(axis=1) == gold).mean()), 3),
        "curve": points,
    }


def run(*, paths: tuple[Path, ...] = SETS, curve: tuple[float, ...] = CURVE) -> dict[str, Any]:
    """The whole benchmark as a JSON-ready dict (a shorter curve for smoke tests)."""
    embedder = get_embedder(Settings())
    return {
        "benchmark": "match",
        "model": embedder.model_name,
        "success_rates": list(SUCCESS_RATES),
        "target": {"top1": 0.95, "false_match_rate": 0.02},
        "sets": {path.stem: run_set(embedder=embedder, path=path, curve=curve) for path in paths},
    }


if __name__ == "__main__":
    go_offline()
    print(json.dumps(run(), indent=2))
