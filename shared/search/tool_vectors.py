"""Consolidated learning: per-tenant tool vectors from the intents each tool served.

A tool's vector mixes its description embedding with the mean embedding of the tenant's
past intents whose runs called it successfully (Tool2Vec-style):

    vector(tool) = normalise(alpha * description + (1 - alpha) * normalise(mean(intents))),
    alpha = k / (n + k)        (n = the tool's learned intents)

so one run moves the vector a little and many move it toward how the tenant asks for the
tool. A search scores ``weight * (cosine(query, vector) - cosine(query, description))``
beside the dense cosine (fusion feature ``toolvec``): a tool the tenant never ran has no
vector and keeps exactly its description similarity, so zero-shot rankings and other
tenants' rankings are unchanged.

Vectors are computed by the learning worker on the beat schedule (``shared.learning.
consolidate``), versioned, and a new version replaces the current one only when it scores
at least as well on the tenant's held-back runs (each tool's most recent run, ``hold_out``).
Everything here is pure arithmetic on arrays; the database side is in ``consolidate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Mix:
    """``k``: how many intents weigh as much as the description (alpha = k / (n + k));
    ``weight``: the fusion weight of the vector's gain over the description similarity
    (``fusion.WEIGHTS['toolvec']``)."""

    k: float
    weight: float


# Fitted beside the vote in use on the validation slices of the learned protocol
# (`python -m research.search.recall --fit`: ``fit_combined``; never the test halves;
# research/notes/search-history.md): 2026-11-26, livemcpbench + real_servers + real_servers_issue31,
# objective 2.1137 against 2.1127 for the vote alone. Eight intents weigh as much as the
# description and the vector's gain counts a tenth: on these sets the vectors add almost
# nothing the vote does not already give, so the fit keeps their say small.
FITTED_MIX = Mix(k=8.0, weight=0.1)


@dataclass(frozen=True)
class Run:
    """One learned run of a tenant: its order (larger = more recent), intent embedding and
    the tools whose calls succeeded."""

    order: int
    vector: np.ndarray
    tools: tuple[str, ...]


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def mix_weight(n: int, *, k: float) -> float:
    """alpha, the description's share of a tool vector learned from ``n`` intents."""
    return 1.0 if n <= 0 else k / (n + k)


def tool_vectors(
    descriptions: Mapping[str, np.ndarray], runs: Sequence[Run], *, k: float
) -> dict[str, tuple[np.ndarray, int]]:
    """Per tool that has learned runs and a description embedding: (vector, intents used).
    A tool named by runs but absent from ``descriptions`` (removed) gets no vector."""
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for run in runs:
        for tool in run.tools:
            if tool not in descriptions:
                continue
            sums[tool] = sums.get(tool, 0.0) + np.asarray(run.vector, np.float32)
            counts[tool] = counts.get(tool, 0) + 1
    out: dict[str, tuple[np.ndarray, int]] = {}
    for tool, total in sums.items():
        n = counts[tool]
        alpha = mix_weight(n, k=k)
        mixed = alpha * _unit(np.asarray(descriptions[tool], np.float32)) + (1 - alpha) * _unit(
            total / n
        )
        out[tool] = (_unit(mixed).astype(np.float32), n)
    return out


def gains(
    query: np.ndarray,
    *,
    descriptions: Mapping[str, np.ndarray],
    vectors: Mapping[str, np.ndarray],
) -> dict[str, float]:
    """Per tool with a vector: cosine(query, vector) - cosine(query, description), the
    ``toolvec`` feature (0 for every other tool)."""
    q = np.asarray(query, np.float32)
    return {
        tool: float(vector @ q) - float(np.asarray(descriptions[tool], np.float32) @ q)
        for tool, vector in vectors.items()
        if tool in descriptions
    }


def hold_out(runs: Sequence[Run]) -> tuple[list[Run], list[Run]]:
    """(training runs, held-back runs): each tool with two runs or more has its most recent
    run held back (a run held back for one tool is held back for all it names); a tool run
    once keeps its run for training."""
    by_tool: dict[str, list[Run]] = {}
    for run in runs:
        for tool in run.tools:
            by_tool.setdefault(tool, []).append(run)
    held_orders = {
        max(r.order for r in members) for members in by_tool.values() if len(members) >= 2
    }
    train = [r for r in runs if r.order not in held_orders]
    held = [r for r in runs if r.order in held_orders]
    return train, held


HOLD_OUT_BLOCK = 1024  # held-back runs scored per matrix product


def held_back_top1(
    held: Sequence[Run],
    *,
    descriptions: Mapping[str, np.ndarray],
    vectors: Mapping[str, np.ndarray],
    weight: float,
) -> float:
    """Share of held-back runs whose best-scoring tool (description cosine + ``weight`` x
    the vector's gain, over every tool in ``descriptions``) is one the run used. 0 with none."""
    if not held or not descriptions:
        return 0.0
    names = list(descriptions)
    matrix = np.stack([np.asarray(descriptions[t], np.float32) for t in names])
    learned = np.stack(
        [
            np.asarray(vectors[t], np.float32) if t in vectors else matrix[i]
            for i, t in enumerate(names)
        ]
    )
    hits = 0
    for start in range(0, len(held), HOLD_OUT_BLOCK):  # bounded memory at 10k tools
        block = held[start : start + HOLD_OUT_BLOCK]
        queries = np.stack([np.asarray(r.vector, np.float32) for r in block])
        base = queries @ matrix.T
        scores = base + weight * (queries @ learned.T - base)
        best = np.argmax(scores, axis=1)
        hits += sum(names[b] in r.tools for b, r in zip(best, block, strict=True))
    return hits / len(held)


# The tenant's tool vectors nearest a query (HNSW, as the past intents). No join: a row
# goes with its tool and with its description (migration 0023's foreign key and trigger),
# so every row read is current; an unavailable tool is dropped with the other evidence.
# (Joining tools to check the description here cost ~6 ms of search p95 at 10k vectors.)
NEAREST_TOOL_VECTORS_SQL = """
SELECT tool_id, 1 - (vector <=> %(v)s) AS sim
  FROM tool_vectors
 WHERE tenant_id = %(tenant)s
 ORDER BY vector <=> %(v)s
 LIMIT %(n)s
"""


def nearest_tool_vectors_query(
    *, vector: np.ndarray, tenant_id: str, limit: int
) -> tuple[str, dict[str, Any]]:
    """The statement (and its parameters) reading a query's nearest tool vectors."""
    return NEAREST_TOOL_VECTORS_SQL, {"v": vector, "tenant": tenant_id, "n": limit}
