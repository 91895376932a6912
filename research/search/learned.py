"""The learned protocol's ablation and the vote's fit (issue 31).

A set's requests are split by gold tool into a learning half and a test half
(``deploy.bench.search_recall.learning_split``). The learning half is split again, per tool, into a fit
part and a validation slice (one request of each tool with two or more), in two folds (each
tool's first, then second learning request is the validation one): each fold's fit part is
stored as a separate tenant's executions and its validation slice searched against it.
The vote's constants (``shared.search.learned.FITTED``) are fitted on the validation
slices only; the test half is searched by ``bench search`` after the fit and never here.

Every variant is computed in memory from one search's evidence: the search keeps the
nearest past intents it read (``Evidence.intents``), so re-voting them under other
constants costs no database work.

Refit: ``python -m research.search.recall --fit`` (prints JSON; copy ``fitted`` into
``shared/search/learned.py: FITTED``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from research.search.adapter import CAPACITIES, DECAYS, FITTED_DECAY, Capacity, with_adapter
from research.search.fit import Judged, Learned, evaluate, per_point
from shared.search.fusion import LEXICAL, WEIGHTS
from shared.search.hybrid import Evidence
from shared.search.learned import FITTED, LEGACY, UNGATED, Vote, tool_votes
from shared.search.tool_vectors import FITTED_MIX, Mix, tool_vectors

FIT_TENANT = "bench-fit"  # + the fold
# The fit's grid: floors from none to the old one, linear to steep closeness, shrinkage from
# none to several intents' worth, fusion weights from a nudge to a decision.
FLOORS = (0.0, 0.3, 0.5)
POWERS = (1.0, 2.0)
PRIORS = (0.0, 0.3, 1.0)
WEIGHT_GRID = (0.05, 0.1, 0.3, 0.8, 1.2)
# The relative gate (``Vote.gate``): none, or a past intent must come within this of the
# query's best description cosine (negative: below it) to count.
GATES = (None, -0.1, -0.05, 0.0, 0.05, 0.1)
ZERO_SHOT_OFF = {f: 0.0 for f in ("clause", *LEXICAL)}


FOLDS = 2  # each learning request of a tool with two or more is validation in one fold


def validation_split(learn: Sequence[Any], *, fold: int = 0) -> tuple[list[Any], list[Any]]:
    """(fit part, validation slice) of one fold: the ``fold``-th learning request of each tool
    with two or more (and more than ``fold``) is validation, the tool's others are fit; a
    tool's only learning request is validation in fold 0."""
    groups: dict[str, list[Any]] = {}
    for q in learn:
        groups.setdefault(sorted(q.gold)[0], []).append(q)
    fit_part: list[Any] = []
    validation: list[Any] = []
    for members in groups.values():
        if len(members) >= 2 and fold < len(members):
            validation.append(members[fold])
            fit_part.extend(m for i, m in enumerate(members) if i != fold)
        elif len(members) == 1 and fold == 0:
            # A tool learned once is validation in the first fold: a request for a tool the
            # tenant never ran, where only other tools' runs are near (the test halves hold
            # many; a vote fitted without them lets those runs outvote the right tool).
            validation.append(members[0])
        else:
            fit_part.extend(members)
    return fit_part, validation


def revote(evidence: Evidence, *, vote: Vote) -> Evidence:
    """The same evidence with the learned feature recomputed under ``vote``."""
    known = set(evidence.features) | set(evidence.dense)
    best = max(evidence.dense.values(), default=None)
    votes = {
        t: v
        for t, v in tool_votes(evidence.intents, vote=vote, best_dense=best).items()
        if t in known
    }
    features = {}
    for tool, values in evidence.features.items():
        rest = {k: v for k, v in values.items() if k != "learned"}
        if votes.get(tool):
            rest["learned"] = votes[tool]
        features[tool] = rest
    return replace(evidence, features=features)


def learned_vectors(learned: Learned, *, k: float) -> dict[str, np.ndarray]:
    """The tool vectors of a protocol point's learned runs (cached per point and ``k``):
    every run kept, as a shipped version that passed its hold-out check would."""

    def make() -> dict[str, np.ndarray]:
        fitted = tool_vectors(learned.descriptions, learned.runs, k=k)
        return {tool: vector for tool, (vector, _) in fitted.items()}

    return per_point(learned, ("tool vectors", k), make)


def with_tool_vectors(judged: Judged, *, mix: Mix) -> Evidence:
    """The evidence with the ``toolvec`` feature as a search reads it: every tool with a
    vector is a candidate (one outside the list is scored at the list's lowest cosine)."""
    evidence = judged.evidence
    if judged.learned is None or judged.vector is None or not judged.learned.runs:
        return evidence
    # As the search: the gain over the tool's dense cosine, the list's lowest for a tool
    # outside it (``hybrid.gather_evidence``).
    lowest = min(evidence.dense.values(), default=0.0)
    query = np.asarray(judged.vector, np.float32)
    gained = {
        tool: float(vector @ query) - evidence.dense.get(tool, lowest)
        for tool, vector in learned_vectors(judged.learned, k=mix.k).items()
    }
    features = {tool: dict(values) for tool, values in evidence.features.items()}
    for tool, gain in gained.items():
        if gain:
            features.setdefault(tool, {})["toolvec"] = gain
    return replace(evidence, features=features)


def score(
    judged: Sequence[Judged],
    *,
    vote: Vote,
    key: Mapping[str, str],
    scoring: str,
    off: Mapping[str, float] | None = None,
    mix: Mix | None = None,
    adapter: float | Capacity | None = None,
) -> dict[str, float]:
    """Metrics of the hybrid ranking with the vote ``vote`` (its weight in the fusion) and,
    with ``mix``, the tool vectors (else none: their weight is 0); with ``adapter`` (its
    decay), the query adapted (``adapter``)."""
    weights = {
        **WEIGHTS,
        **(off or {}),
        "learned": vote.weight,
        "toolvec": mix.weight if mix else 0.0,
    }
    revoted = []
    for j in judged:
        if adapter is not None:
            j = replace(j, evidence=with_adapter(j, adapter=adapter))
        if mix is not None:
            j = replace(j, evidence=with_tool_vectors(j, mix=mix))
        revoted.append(replace(j, evidence=revote(j.evidence, vote=vote)))
    return evaluate(revoted, weights=weights, key=key, scoring=scoring)


NO_VOTE = Vote(floor=1.0, power=1.0, prior=0.0, weight=0.0)
# The tool vectors' grid: a description weighing as much as half an intent to sixteen, and
# fusion weights from a nudge to replacing the description's cosine with the vector's.
KS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
MIX_WEIGHTS = (0.1, 0.25, 0.5, 0.75, 1.0)


def variants() -> dict[str, tuple[Vote, dict[str, float]]]:
    """Each suspect of the old gap switched on its own, then the fitted vote with each of
    its choices put back to the old one."""
    return {
        "legacy (floor 0.5, squared, saturate at 1, weight 1)": (LEGACY, {}),
        "legacy, weight x3": (replace(LEGACY, weight=3.0), {}),
        "legacy, floor 0.3": (replace(LEGACY, floor=0.3), {}),
        "legacy, floor 0": (replace(LEGACY, floor=0.0), {}),
        "legacy, no saturation (share of evidence)": (replace(LEGACY, saturate=False), {}),
        "legacy, lexical/clause priors off": (LEGACY, ZERO_SHOT_OFF),
        "ungated (2026-11-25 fit: floor 0.3, linear, prior 0.3)": (UNGATED, {}),
        "ungated, floor 0.5": (replace(UNGATED, floor=0.5), {}),
        "ungated, prior 1": (replace(UNGATED, prior=1.0), {}),
        "fitted (gate -0.1, squared, prior 1)": (FITTED, {}),
        "fitted, no gate": (replace(FITTED, gate=None), {}),
        "fitted, gate 0": (replace(FITTED, gate=0.0), {}),
        "fitted, prior 0.3": (replace(FITTED, prior=0.3), {}),
        "fitted, lexical/clause priors off": (FITTED, ZERO_SHOT_OFF),
    }


# The tool vectors on their own (no vote), as the validation fit chose them
# (`--fit`: fit_tool_vectors, 2026-11-26); the search uses them beside the vote with
# ``tool_vectors.FITTED_MIX`` (fit_combined).
ALONE_MIX = Mix(k=2.0, weight=1.0)


def mix_variants() -> dict[str, tuple[Vote, Mix]]:
    """The tool vectors alone and beside the vote, with each fitted choice moved."""
    return {
        "tool vectors alone (k 2, weight 1)": (NO_VOTE, ALONE_MIX),
        "tool vectors alone, k 8": (NO_VOTE, replace(ALONE_MIX, k=8.0)),
        "tool vectors alone, weight 0.25": (NO_VOTE, replace(ALONE_MIX, weight=0.25)),
        f"combined (fitted vote + tool vectors k {FITTED_MIX.k:g}, weight {FITTED_MIX.weight:g})": (
            FITTED,
            FITTED_MIX,
        ),
        "combined, tool vector weight 0.25": (FITTED, replace(FITTED_MIX, weight=0.25)),
    }


def adapter_variants() -> dict[str, tuple[Vote, float]]:
    """The query adapter (bench only) alone and beside the vote, at each decay tried."""
    out = {f"adapter, decay {d}": (NO_VOTE, d) for d in DECAYS}
    out["adapter + fitted vote"] = (FITTED, FITTED_DECAY)
    return out


def ablation(judged: Sequence[Judged], *, key: Mapping[str, str], scoring: str) -> dict[str, Any]:
    out = {
        name: score(judged, vote=vote, key=key, scoring=scoring, off=off)
        for name, (vote, off) in variants().items()
    }
    for name, (vote, mix) in mix_variants().items():
        out[name] = score(judged, vote=vote, key=key, scoring=scoring, mix=mix)
    for name, (vote, decay) in adapter_variants().items():
        out[name] = score(judged, vote=vote, key=key, scoring=scoring, adapter=decay)
    return out


def fit_adapter(
    sets: Mapping[str, tuple[Sequence[Judged], Mapping[str, str], str]],
) -> dict[str, Any]:
    """The adapter's decay on the validation slices (no vote): mean over sets of
    top-1 + @5 + @10 per decay tried."""
    table = {}
    for decay in DECAYS:
        total = sum(
            sum(score(judged, vote=NO_VOTE, key=key, scoring=scoring, adapter=decay).values())
            for judged, key, scoring in sets.values()
        )
        table[str(decay)] = round(total / max(1, len(sets)), 4)
    return {"objective_by_decay": table, "fitted": float(max(table, key=lambda d: table[d]))}


def adapter_grid(
    sets: Mapping[str, tuple[Sequence[Judged], Mapping[str, str], str]],
    *,
    fitted_on: Sequence[str],
) -> dict[str, Any]:
    """Every ``CAPACITIES`` adapter (no vote) on every set's validation slice: per set its
    top-1 / @5 / @10, and the objective (mean over the ``fitted_on`` sets of their sum)."""
    rows = []
    for capacity in CAPACITIES:
        per_set = {
            name: score(judged, vote=NO_VOTE, key=key, scoring=scoring, adapter=capacity)
            for name, (judged, key, scoring) in sets.items()
        }
        objective = sum(sum(per_set[n].values()) for n in fitted_on) / max(1, len(fitted_on))
        rows.append({**vars(capacity), "objective": round(objective, 4), "sets": per_set})
    return {"fitted_on": list(fitted_on), "grid": sorted(rows, key=lambda r: -r["objective"])}


def fit_mix(
    sets: Mapping[str, tuple[Sequence[Judged], Mapping[str, str], str]], *, vote: Vote = NO_VOTE
) -> dict[str, Any]:
    """The tool vectors' best (k, weight) on the validation slices, the vote as ``vote``:
    the mean over sets of top-1 + @5 + @10; ties go to the first in grid order."""
    best: tuple[float, Mix] | None = None
    table = []
    for k, weight in itertools.product(KS, MIX_WEIGHTS):
        mix = Mix(k=k, weight=weight)
        total = 0.0
        for judged, key, scoring in sets.values():
            total += sum(score(judged, vote=vote, key=key, scoring=scoring, mix=mix).values())
        total /= max(1, len(sets))
        table.append((round(total, 4), mix))
        if best is None or total > best[0] + 1e-9:
            best = (total, mix)
    assert best is not None
    without = 0.0
    for judged, key, scoring in sets.values():
        without += sum(score(judged, vote=vote, key=key, scoring=scoring).values())
    return {
        "objective": round(best[0], 4),
        "objective_without_tool_vectors": round(without / max(1, len(sets)), 4),
        "fitted": vars(best[1]),
        "best_ten": [
            {"objective": t, **vars(m)} for t, m in sorted(table, key=lambda r: -r[0])[:10]
        ],
        "in_use": vars(FITTED_MIX),
    }


def fit_vote(
    sets: Mapping[str, tuple[Sequence[Judged], Mapping[str, str], str]],
    *,
    adapter: float | None = None,
) -> dict[str, Any]:
    """The grid's best vote on the validation slices: the mean over sets of top-1 + @5 + @10
    (each set counts alike, whatever its size), with ``adapter`` (its decay) the query
    adapted as the consolidation would, and no set's metric below the same setting without
    the vote. Ties go to the first in grid order."""
    bases = {
        name: score(judged, vote=NO_VOTE, key=key, scoring=scoring, adapter=adapter)
        for name, (judged, key, scoring) in sets.items()
    }
    best: tuple[float, Vote] | None = None
    table = []
    grid = itertools.product(FLOORS, POWERS, PRIORS, WEIGHT_GRID, GATES)
    for floor, power, prior, weight, gate in grid:
        vote = Vote(floor=floor, power=power, prior=prior, weight=weight, gate=gate)
        total = 0.0
        allowed = True
        for name, (judged, key, scoring) in sets.items():
            got = score(judged, vote=vote, key=key, scoring=scoring, adapter=adapter)
            allowed &= all(got[m] >= bases[name][m] - 0.005 for m in got)
            total += sum(got.values())
        total /= max(1, len(sets))
        table.append((round(total, 4), vote))
        if allowed and (best is None or total > best[0] + 1e-9):
            best = (total, vote)
    without = sum(sum(b.values()) for b in bases.values()) / max(1, len(sets))
    top = sorted(table, key=lambda r: -r[0])[:10]
    fields = ("floor", "power", "prior", "weight", "gate")
    return {
        "objective": round(best[0], 4) if best else None,
        "objective_without_vote": round(without, 4),
        "fitted": {k: getattr(best[1], k) for k in fields} if best else None,
        "best_ten": [{"objective": t, **vars(v)} for t, v in top],
        "in_use": {k: getattr(FITTED, k) for k in fields},
    }
