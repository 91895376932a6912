"""`bench e2e`'s rounds: no run kind always follows the same kind (a run leaves work behind it
that the next sample pays for), and every round samples each kind once."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

from deploy.bench.e2e import KINDS, ORDER_SEED
from deploy.bench.order import rounds as kinds_in_rounds


def _orders(n: int) -> list[tuple[str, ...]]:
    return kinds_in_rounds(KINDS, n, seed=ORDER_SEED)


def test_each_kind_follows_each_other_kind_about_as_often() -> None:
    rounds = _orders(100)
    assert len(rounds) == 100 and all(sorted(r) == sorted(KINDS) for r in rounds)
    after = Counter(pairwise(k for r in rounds for k in r))
    for kind in ("tool", "no_tool"):
        others = [after[(before, kind)] for before in KINDS if before != kind]
        # Within a round each ordered pair is adjacent in two of the six orders.
        assert min(others) >= 30 and max(others) - min(others) <= 5, after
    assert _orders(100) == rounds  # the same orders in every run and on every side
