"""The issue's offline arms (issue 31, round six): pure, small data."""

from __future__ import annotations

import numpy as np

from research.search.fit import Judged, Learned
from research.search.issue_arms import plain_vote_arm, space, tool2vec, tool2vec_arm
from shared.search.tool_vectors import Run


def _unit(v: np.ndarray) -> np.ndarray:
    return np.asarray(v / np.linalg.norm(v), np.float32)


def _point(runs: list[Run]) -> tuple[Judged, dict[str, str]]:
    # Two tools: the query reads like A's description, but the tenant ran B for it.
    a, b, query = np.eye(3, dtype=np.float32)
    descriptions = {"s:a": _unit(a + 0.2 * query), "s:b": _unit(b + 0.1 * query)}
    judged = Judged(
        evidence=None,  # type: ignore[arg-type]  # the arms read the vector and the runs only
        gold=frozenset({"s:b"}),
        dense=["s:a", "s:b"],
        vector=_unit(query + 0.05 * a),
        learned=Learned(descriptions=descriptions, runs=runs),
    )
    return judged, {t: t for t in descriptions}


def test_with_nothing_learned_every_arm_is_dense() -> None:
    judged, key = _point([])
    assert plain_vote_arm(weight=1.0)(judged, key)[0] == "s:a"
    assert tool2vec_arm(alpha=1.0)(judged, key)[0] == "s:a"


def test_runs_near_the_query_lift_their_tool() -> None:
    _, _, query = np.eye(3, dtype=np.float32)
    runs = [Run(order=i, vector=_unit(query + 0.1 * i), tools=("s:b",)) for i in range(3)]
    judged, key = _point(runs)
    assert plain_vote_arm(weight=1.0)(judged, key)[0] == "s:b"
    assert tool2vec_arm(alpha=1.0)(judged, key)[0] == "s:b"
    # A nudge of a vote does not overturn a clear description match.
    assert plain_vote_arm(weight=0.01)(judged, key)[0] == "s:a"


def test_tool2vec_leaves_unlearned_tools_at_their_description() -> None:
    _, _, query = np.eye(3, dtype=np.float32)
    judged, _ = _point([Run(order=0, vector=query, tools=("s:b",))])
    assert judged.learned is not None
    s = space(judged.learned)
    vectors = tool2vec(s, alpha=1.0)
    assert np.allclose(vectors[s.row["s:a"]], s.docs[s.row["s:a"]])
    assert not np.allclose(vectors[s.row["s:b"]], s.docs[s.row["s:b"]])
