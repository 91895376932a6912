"""Score fusion: dense similarity plus fitted weights on separate evidence, and the reason for a hit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shared.search.learned import FITTED

# The evidence beside the dense similarity, each a number per tool (0 when absent):
# clause   how much better one step of a multi-step request matches than the whole (≥ 0)
# frame    how much better the request's action without its payload (names, quoted text,
#          what follows "that" or a colon: ``query.query_frame``) matches than the whole
#          (≥ 0), for tools that do not declare the opposite direction (``hybrid.frame_lifts``)
# name, description, params, server   share of the query's words (idf-weighted) in that field
# graph    graph score relative to the best candidate's (context tools given), in [0, 1]
# pagerank PageRank relative to the best candidate's, in [0, 1]
# learned  the vote of the tenant's nearest past intents, in [-1, 1] (shared.search.learned)
# toolvec  cosine to the tenant's consolidated tool vector minus cosine to the description
#          (shared.search.tool_vectors); not read by searches since the query adapter
#          (weight 0, the bench's ablation only: docs/search.md)
FEATURES = (
    "clause",
    "frame",
    "name",
    "description",
    "params",
    "server",
    "graph",
    "pagerank",
    "learned",
    "toolvec",
)

# Measured by no set: the bench's requests come without context tools and its catalogues
# without a usage graph, so these two are 0 there whatever their weight, and a fit would
# keep them at 0. Fixed instead, on the scale of the fitted ones (a feature in [0, 1]
# against cosines whose top ten on a short request span ~0.1-0.2): the tool that most often
# follows the context gains 0.1, enough to decide between close semantic matches and not to
# override a clearly better one; PageRank, a weak prior, a fifth of that (as in the earlier
# reciprocal-rank fusion, where it weighed 0.2 against the graph's 1). Graph evidence exists
# only when the request names context tools (``gather_evidence``).
UNMEASURED: dict[str, float] = {"graph": 0.1, "pagerank": 0.02}

# Fitted, not chosen: `python -m research.search.recall --bench` maximises top-1 + recall@5
# + @10 on the tuning splits of every set, subject to no k on any set scoring below the
# dense baseline (research/search/fit.py); the held-out splits are reported after. Dense
# similarity has weight 1, so all-zero weights are exactly the dense ranking.
# The learned vote is the exception: on the bench's learned protocol (requests split by
# tool, so a test request is another request for the tool, rarely a paraphrase of a
# learned one) its objective is flat from 0.3 to 5 with the squared-closeness vote
# (``learned_weight_objective`` in that JSON). 1.0 is the smallest weight for which
# one run of the very same request (vote 1) outweighs any cosine gap inside a top ten
# (~0.1-0.3 on short requests); a paraphrase at 0.8 then adds 0.36, a request at 0.6 0.04.
# Not fitted (the fit predates the frame): the frame's whole gain over the request, for
# tools of the request's direction (``hybrid.frame_lifts``). The smallest of 0.5 and 1.0 that
# puts a memory write tool in the top three for the issue 49 §4 requests of
# tests/integration/discovery/test_real_servers_search_db.py (research/notes/search-history.md).
FRAME_WEIGHT = 1.0
WEIGHTS: dict[str, float] = {
    "clause": 0.3,
    "frame": FRAME_WEIGHT,
    "name": 0.08,
    "description": 0.2,
    "params": 0.08,
    "server": 0.3,
    "learned": FITTED.weight,
    "toolvec": 0.0,  # not read by searches since the query adapter (docs/search.md)
    **UNMEASURED,
}


# Priors: evidence about the tool, not about the request. They may only reorder hits the
# request itself speaks for, so each is scaled by the tool's ``support`` in [0, 1]: a tool
# with no semantic or lexical support gains nothing from them (unscaled, with a busy
# filesystem/git graph, "remember that Alice works at Acme" would rank git tools at cosine
# 0.04 first on their graph bonus alone). Multiplicative rather than a cap: a weakly
# supported tool gets a proportionally weak prior, so the prior never outweighs the text
# evidence that admitted the tool.
PRIORS = ("graph", "pagerank")
# Fields whose word coverage is lexical support.
LEXICAL = ("name", "description", "params", "server")
# Semantic support rises linearly from 0, at this far below the best candidate's cosine,
# to 1 at the best: a short request's top ten span ~0.1-0.2 (see UNMEASURED), and a tool
# further below the best than that is not what the request asks for.
SUPPORT_BAND = 0.15


def support(
    *, dense: Mapping[str, float], features: Mapping[str, Mapping[str, float]]
) -> dict[str, float]:
    """Per candidate, how much the request itself speaks for it, in [0, 1]: the larger of its
    semantic support (best of query and clause cosine, relative to the best candidate's,
    see ``SUPPORT_BAND``) and its lexical support (the largest share of the query's words
    one of its fields holds)."""
    floor = min(dense.values(), default=0.0)
    tools = list(dict.fromkeys([*dense, *features]))
    semantic = {
        t: dense.get(t, floor)
        + features.get(t, {}).get("clause", 0.0)
        + features.get(t, {}).get("frame", 0.0)
        for t in tools
    }
    top = max(semantic.values(), default=0.0)
    out: dict[str, float] = {}
    for tool in tools:
        near = min(1.0, max(0.0, (semantic[tool] - (top - SUPPORT_BAND)) / SUPPORT_BAND))
        lexical = max((features.get(tool, {}).get(f, 0.0) for f in LEXICAL), default=0.0)
        out[tool] = max(near, min(1.0, lexical))
    return out


def contributions(
    *,
    dense: Mapping[str, float],
    features: Mapping[str, Mapping[str, float]],
    weights: Mapping[str, float] = WEIGHTS,
) -> dict[str, dict[str, float]]:
    """Per candidate, what each signal adds to its score: ``semantic`` (its cosine), each
    feature's weight * value, priors also times the candidate's ``support``. They sum to
    the fused score, and ``explain`` names each, so nothing lifts a hit unexplained.

    Candidates that only other evidence found get the lowest dense similarity seen: they
    were not in the dense top list, so that is an upper bound on theirs.
    """
    floor = min(dense.values(), default=0.0)
    backing = support(dense=dense, features=features)
    out: dict[str, dict[str, float]] = {}
    for tool in dict.fromkeys([*dense, *features]):
        parts = {"semantic": dense.get(tool, floor)}
        for name, value in features.get(tool, {}).items():
            amount = weights.get(name, 0.0) * value
            if name in PRIORS:
                amount *= backing[tool]
            if amount:
                parts[name] = amount
        out[tool] = parts
    return out


def fuse(
    *,
    dense: Mapping[str, float],
    features: Mapping[str, Mapping[str, float]],
    weights: Mapping[str, float] = WEIGHTS,
) -> dict[str, float]:
    """Per candidate: dense similarity + Σ weight * feature, priors scaled by support
    (``contributions``).

    A score, not a rank fusion: reciprocal ranks throw away how far apart two
    similarities are, which is most of what a short request has, and gave the
    lexical list as much say as the dense one (the ablation in the bench).
    """
    return {
        tool: sum(parts.values())
        for tool, parts in contributions(dense=dense, features=features, weights=weights).items()
    }


def explain(
    *,
    parts: Mapping[str, float],
    matched_words: Mapping[str, Sequence[str]] | None = None,
    graph_reasons: Sequence[str] = (),
    semantic: float | None = None,
    learned: float = 0.0,
    support: float | None = None,
) -> str:
    """A one-line reason naming every signal that placed the tool, each with what it added
    (``parts`` from ``contributions``; amounts in parentheses sum to the score).

    ``semantic`` is the cosine to show when it differs from the one scored (a
    candidate outside the dense list is scored at the list's lowest); ``matched_words``
    the query words per field; ``support`` what the priors were scaled by.
    """
    words = matched_words or {}
    items: list[str] = []

    def add(text: str, amount: float) -> None:
        if abs(amount) >= 0.0005:
            items.append(f"{text} ({amount:+.3f})")

    if "learned" in parts:
        verb = "used" if learned >= 0 else "failed"
        add(f"{verb} for similar requests before (vote {learned:.2f})", parts["learned"])
    if "semantic" in parts:
        shown = parts["semantic"] if semantic is None else semantic
        items.append(f"semantic similarity {shown:.2f} ({parts['semantic']:+.3f})")
    add("closer to how this tenant asked for it before", parts.get("toolvec", 0.0))
    add("one step of the request matches better", parts.get("clause", 0.0))
    add("the request's action, without its payload, matches better", parts.get("frame", 0.0))
    for field in LEXICAL:
        if field in parts:
            found = sorted(words.get(field, ()))[:5]
            add(
                f"query words in its {field}" + (f": {', '.join(found)}" if found else ""),
                parts[field],
            )
    backed = "" if support is None else f", scaled by support {support:.2f}"
    if "graph" in parts:
        add(
            f"usage graph: {'; '.join(graph_reasons) or 'related to the context'}{backed}",
            parts["graph"],
        )
    if "pagerank" in parts:
        add(f"central in the usage graph (PageRank prior{backed})", parts["pagerank"])
    for name, amount in parts.items():
        if name not in ("learned", "toolvec", "semantic", "clause", "frame", *LEXICAL, *PRIORS):
            add(name, amount)
    return "; ".join(items) if items else "weak match on every signal"
