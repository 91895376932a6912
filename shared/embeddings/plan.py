"""Forward passes for a search request's few texts: fewest padded tokens on the busiest worker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

# Cost of one forward pass on this CPU class, measured at one thread in bfloat16 with
# the lean BERT encoder: a fixed ~1.7 ms (the weights are read whatever the batch) plus
# ~0.145 ms per padded token. Only their ratio matters: it decides when padding beats
# another pass.
PASS_COST_TOKENS = 12.0
# Up to 8 texts every plan is tried: at most 2^7 cuts into runs and 4,140 ways to share
# 8 runs among alike workers (the Bell number), 17k plans before pruning (2.2k on two
# workers). Past that the count explodes (9 texts: 95k, 12: 23M): a greedy cut instead.
EXHAUSTIVE_MAX_TEXTS = 8
# A search request has a query and at most a few clauses; more texts are a batch, which
# ``Embedder.embed`` cuts into fixed-size batches instead.
MAX_PLAN_TEXTS = 64

Plan = list[list[list[int]]]  # per worker, its passes; a pass is a list of text indices


def query_plan(lengths: Sequence[int], *, workers: int = 1) -> Plan:
    """Forward passes for texts of these token counts, as one list of passes per worker.

    A pass pads to its longest text and costs ``PASS_COST_TOKENS`` + rows x longest;
    the plan minimises the busiest worker's cost, then the total (less CPU). Texts are
    sorted by length and cut into contiguous runs (optimal for this cost): up to
    ``EXHAUSTIVE_MAX_TEXTS`` texts every cut and every sharing of runs is tried, past
    it the cut is greedy. More than ``MAX_PLAN_TEXTS`` texts raise ValueError.
    """
    if len(lengths) > MAX_PLAN_TEXTS:
        raise ValueError(
            f"{len(lengths)} texts is more than a search request's {MAX_PLAN_TEXTS}: "
            "embed them in fixed batches (Embedder.embed)"
        )
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    workers = max(1, workers)
    if len(order) > EXHAUSTIVE_MAX_TEXTS:
        return _greedy(lengths, order, workers)
    return _exhaustive(lengths, order, workers)


def _cost(lengths: Sequence[int], run: list[int]) -> float:
    """A pass over ``run`` (sorted by length): its fixed cost plus every row padded to the last."""
    return PASS_COST_TOKENS + len(run) * lengths[run[-1]]


def _exhaustive(lengths: Sequence[int], order: list[int], workers: int) -> Plan:
    """The best plan of all; of equal ones, the first in (cut, owners) lexicographic order."""
    n = len(order)
    best = _Best()
    for cuts in range(1 << max(0, n - 1)):  # bit k set: a pass ends after the k-th text
        runs, start = [], 0
        for k in range(n):
            if k == n - 1 or cuts >> k & 1:
                runs.append(order[start : k + 1])
                start = k + 1
        _share(runs, [_cost(lengths, run) for run in runs], workers, best)
    return best.plan


@dataclass
class _Best:
    """The best plan so far and its (busiest worker, total) cost."""

    key: tuple[float, float] = (float("inf"), float("inf"))
    plan: Plan = field(default_factory=lambda: [[]])


def _share(runs: list[list[int]], costs: list[float], workers: int, best: _Best) -> None:
    """Every sharing of ``runs`` among ``workers``; into ``best`` when strictly better.

    Workers are alike, so owners are numbered in order of first use (the first pass goes
    to worker 0, a later one to a used worker or the next): each sharing is tried once,
    as its lexicographically first numbering. A partial sharing already no better than
    ``best`` is dropped: the passes still to give can only add to its load.
    """
    total, owners, load = sum(costs), [0] * len(runs), [0.0] * workers

    def extend(position: int, used: int) -> None:
        key = (max(load), total)
        if key >= best.key:
            return
        if position == len(runs):
            shares: Plan = [[] for _ in range(workers)]
            for owner, run in zip(owners, runs, strict=True):
                shares[owner].append(run)
            best.key, best.plan = key, [share for share in shares if share]
            return
        for owner in range(min(used + 1, workers)):
            owners[position] = owner
            load[owner] += costs[position]
            extend(position + 1, max(used, owner + 1))
            load[owner] -= costs[position]

    extend(0, 0)


def _greedy(lengths: Sequence[int], order: list[int], workers: int) -> Plan:
    """Cut the sorted texts greedily, then give the costliest pass to the idlest worker."""
    # A pass holds at most an equal share of the texts, so every worker gets some.
    rows = -(-len(order) // workers)
    runs: list[list[int]] = []
    for i in order:
        run = runs[-1] if runs else None
        # Join the current pass while padding its rows up to this text costs less
        # than another pass would.
        if (
            run
            and len(run) < rows
            and len(run) * (lengths[i] - lengths[run[-1]]) < PASS_COST_TOKENS
        ):
            run.append(i)
        else:
            runs.append([i])
    load = [0.0] * workers
    shares: Plan = [[] for _ in range(workers)]
    for run in sorted(runs, key=lambda r: _cost(lengths, r), reverse=True):
        idlest = min(range(workers), key=load.__getitem__)
        load[idlest] += _cost(lengths, run)
        shares[idlest].append(run)
    return [share for share in shares if share]
