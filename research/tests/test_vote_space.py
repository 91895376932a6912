"""The bench's vote in the adapter's space (issue 31, round four): pure, small real-shaped data."""

from __future__ import annotations

import numpy as np

from research.search.fit import Judged, Learned
from research.search.vote_space import intents_in
from shared.search.learned import NEIGHBOURS
from shared.search.tool_vectors import Run
from tests.unit.search.test_adapter import _asked, _catalogue, _unit


def test_in_the_adapters_space_runs_for_the_tool_asked_stand_out() -> None:
    # Every request carries the tenant's slant, so as embedded every past request is near
    # every new one whatever its tool; mapped by the adapter the slant is removed and the
    # past requests for the tool asked for stand further above the others.
    rng = np.random.default_rng(1)
    descriptions = _catalogue(rng)
    names = list(descriptions)
    slant = _unit(descriptions["t:5"] + 0.3 * rng.normal(size=len(descriptions["t:0"])))
    runs = [
        Run(order=i, vector=_asked(descriptions[names[i % 5]], slant, rng), tools=(names[i % 5],))
        for i in range(40)
    ]
    learned = Learned(descriptions=descriptions, runs=runs[:30])
    margin = {"raw": 0.0, "both": 0.0}
    for run in runs[30:]:
        judged = Judged(
            evidence=None,  # type: ignore[arg-type]  # intents_in reads the runs only
            gold=frozenset(run.tools),
            dense=[],
            vector=run.vector,
            learned=learned,
        )
        for space in margin:
            rows = intents_in(judged, space=space)
            assert len(rows) == min(NEIGHBOURS, len(learned.runs))
            same = [r["sim"] for r in rows if r["tools_ok"] == list(run.tools)]
            other = [r["sim"] for r in rows if r["tools_ok"] != list(run.tools)]
            margin[space] += float(np.mean(same) - np.mean(other))
    assert margin["both"] > margin["raw"] > 0, margin
