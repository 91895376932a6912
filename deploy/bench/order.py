"""The order in which a benchmark's alternating kinds are sampled, round by round.

Every sample leaves work behind it (a run's learning message, a proxy's logging, a session's
router tasks), which the next sample pays for; in a fixed order one kind always pays for the
same other kind, and comes first after a different set of processes went idle. Here each
round is a permutation of the kinds, every permutation once per block, blocks shuffled by a
fixed seed: each kind follows each other kind about as often, and every run of a benchmark
samples in the same orders."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence


def rounds(kinds: Sequence[str], n: int, *, seed: int) -> list[tuple[str, ...]]:
    """The kinds' order in each of ``n`` rounds."""
    shuffle = random.Random(seed)
    out: list[tuple[str, ...]] = []
    while len(out) < n:
        block = list(itertools.permutations(kinds))
        shuffle.shuffle(block)
        out.extend(block)
    return out[:n]
