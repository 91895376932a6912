"""Score fusion: dense similarity plus fitted weights on separate evidence, and the reason for a hit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# The evidence beside the dense similarity, each a number per tool (0 when absent):
# clause   how much better one step of a multi-step request matches than the whole (≥ 0)
# name, description, params, server   share of the query's words (idf-weighted) in that field
# graph    graph score relative to the best candidate's (context tools given), in [0, 1]
# pagerank PageRank relative to the best candidate's, in [0, 1]
# learned  the vote of the tenant's nearest past intents, in [-1, 1] (shared.search.learned)
FEATURES = ("clause", "name", "description", "params", "server", "graph", "pagerank", "learned")

# Measured by no set: the bench's requests come without context tools and its catalogues
# without a usage graph, so these two are 0 there whatever their weight, and a fit would
# keep them at 0. Fixed instead, on the scale of the fitted ones (a feature in [0, 1]
# against cosines whose top ten on a short request span ~0.1-0.2): the tool that most often
# follows the context gains 0.1, enough to decide between close semantic matches and not to
# override a clearly better one; PageRank, a weak prior, a fifth of that (as in the earlier
# reciprocal-rank fusion, where it weighed 0.2 against the graph's 1). Graph evidence exists
# only when the request names context tools (``gather_evidence``).
UNMEASURED: dict[str, float] = {"graph": 0.1, "pagerank": 0.02}

# Fitted, not chosen: `agentcards bench search` maximises top-1 + recall@5 + @10 on the
# tuning splits of every set, subject to no k on any set scoring below the dense
# baseline (deploy/bench/search_fit.py); the held-out splits are reported after. Dense
# similarity has weight 1, so all-zero weights are exactly the dense ranking.
# The learned vote is the exception: on the bench's learned protocol (requests split by
# tool, so a test request is another request for the tool, rarely a paraphrase of a
# learned one) its objective is flat from 0.3 to 5 with the squared-closeness vote
# (``learned_weight_objective`` in the bench's JSON). 1.0 is the smallest weight for which
# one run of the very same request (vote 1) outweighs any cosine gap inside a top ten
# (~0.1-0.3 on short requests); a paraphrase at 0.8 then adds 0.36, a request at 0.6 0.04.
WEIGHTS: dict[str, float] = {
    "clause": 0.3,
    "name": 0.08,
    "description": 0.2,
    "params": 0.08,
    "server": 0.3,
    "learned": 1.0,
    **UNMEASURED,
}


def fuse(
    *,
    dense: Mapping[str, float],
    features: Mapping[str, Mapping[str, float]],
    weights: Mapping[str, float] = WEIGHTS,
) -> dict[str, float]:
    """Per candidate: dense similarity + Σ weight * feature.

    A score, not a rank fusion: reciprocal ranks throw away how far apart two
    similarities are, which is most of what a short request has, and gave the
    lexical list as much say as the dense one (the ablation in the bench). Candidates
    that only other evidence found get the lowest dense similarity seen: they were
    not in the dense top list, so that is an upper bound on theirs.
    """
    floor = min(dense.values(), default=0.0)
    return {
        tool: dense.get(tool, floor)
        + sum(weights.get(name, 0.0) * value for name, value in features.get(tool, {}).items())
        for tool in dict.fromkeys([*dense, *features])
    }


def explain(
    *,
    semantic: float | None,
    matched_words: Sequence[str],
    graph_reasons: Sequence[str],
    pagerank_share: float,
    learned: float,
) -> str:
    """A one-line reason naming the evidence that placed the tool."""
    parts: list[str] = []
    if learned > 0:
        parts.append(f"used for similar requests before (vote {learned:.2f})")
    elif learned < 0:
        parts.append(f"failed for similar requests before (vote {learned:.2f})")
    if semantic is not None:
        parts.append(f"semantic similarity {semantic:.2f}")
    if matched_words:
        parts.append(f"matches query words {', '.join(sorted(matched_words)[:5])}")
    parts.extend(graph_reasons)
    if pagerank_share >= 0.5:
        parts.append("a central tool in the usage graph")
    return "; ".join(parts) if parts else "weak match on every signal"
