"""The query pass planner: exhaustive and unchanged up to 8 texts, greedy past 8, bounded input."""

from __future__ import annotations

import pytest

from shared.embeddings.plan import EXHAUSTIVE_MAX_TEXTS, MAX_PLAN_TEXTS, query_plan


def test_query_plan_keeps_one_short_text_in_one_pass() -> None:
    assert query_plan([10], workers=2) == [[[0]]]


def test_query_plan_does_not_pad_short_clauses_to_a_long_query() -> None:
    # One worker: the four clauses share a pass, the 60-token query has its own.
    assert query_plan([60, 15, 14, 12, 10], workers=1) == [[[4, 3, 2, 1], [0]]]


def test_query_plan_puts_passes_side_by_side_on_two_workers() -> None:
    plan = query_plan([60, 15, 14, 12, 10], workers=2)
    assert sorted(sorted(i for p in share for i in p) for share in plan) == [[0], [1, 2, 3, 4]]
    # Two texts of similar length: one each, rather than one padded pass on one worker.
    assert sorted(query_plan([40, 38], workers=2)) == [[[0]], [[1]]]


# Plans an exhaustive search finds (every assignment of passes to numbered workers), ties
# included: the planner gives the same passes in the same order, up to 8 texts.
PLANS_BEFORE = [
    ([12, 12, 12], 2, [[[0]], [[1, 2]]]),
    ([25, 9, 14, 9], 2, [[[1, 3, 2]], [[0]]]),
    ([60, 15, 14, 12, 10], 3, [[[4, 3, 2, 1]], [[0]]]),
    ([7, 7, 7, 7, 7, 7], 2, [[[0, 1, 2]], [[3, 4, 5]]]),
    ([30, 5, 30, 5, 30, 5], 3, [[[1], [0]], [[3], [2]], [[5], [4]]]),
    ([100, 90, 80, 20, 18, 16, 6], 2, [[[6], [5, 4, 3], [0]], [[2, 1]]]),
    ([64, 10, 11, 40, 41, 9, 120, 12], 1, [[[5, 1, 2, 7], [3, 4], [0], [6]]]),
    ([64, 10, 11, 40, 41, 9, 120, 12], 2, [[[5, 1, 2, 7], [3], [0]], [[4], [6]]]),
    ([64, 10, 11, 40, 41, 9, 120, 12], 3, [[[5, 1], [3, 4]], [[2, 7], [0]], [[6]]]),
    ([20, 20, 20, 20, 20, 20, 20, 20], 4, [[[0, 1]], [[2, 3]], [[4, 5]], [[6, 7]]]),
]


@pytest.mark.parametrize(("lengths", "workers", "plan"), PLANS_BEFORE)
def test_up_to_8_texts_the_plan_is_the_one_every_plan_search_found(
    lengths: list[int], workers: int, plan: list[list[list[int]]]
) -> None:
    assert query_plan(lengths, workers=workers) == plan


def test_8_texts_on_16_workers_use_at_most_one_worker_per_text() -> None:
    # Alike workers are tried once, where an exhaustive search would try 8^8 assignments.
    plan = query_plan([40, 41, 42, 43, 44, 45, 46, 47], workers=16)
    assert sorted(i for share in plan for run in share for i in run) == list(range(8))
    assert len(plan) == 8  # similar lengths: one pass each, all side by side


def _texts(plan: list[list[list[int]]]) -> list[int]:
    return sorted(i for share in plan for run in share for i in run)


def test_past_8_texts_short_ones_are_not_padded_to_long_ones() -> None:
    lengths = [10] * 5 + [60] * 4
    assert len(lengths) > EXHAUSTIVE_MAX_TEXTS
    # The costlier pass first, to the idlest worker.
    assert query_plan(lengths, workers=1) == [[[5, 6, 7, 8], [0, 1, 2, 3, 4]]]
    assert query_plan(lengths, workers=2) == [[[5, 6, 7, 8]], [[0, 1, 2, 3, 4]]]


def test_past_8_texts_every_worker_gets_a_share_and_every_text_one_pass() -> None:
    lengths = [20 + i % 3 for i in range(MAX_PLAN_TEXTS)]  # alike: one pass would take all
    plan = query_plan(lengths, workers=4)
    assert len(plan) == 4
    assert _texts(plan) == list(range(MAX_PLAN_TEXTS))
    assert max(len(run) for share in plan for run in share) <= MAX_PLAN_TEXTS // 4


def test_more_texts_than_a_search_request_has_are_refused() -> None:
    with pytest.raises(ValueError, match=f"more than a search request's {MAX_PLAN_TEXTS}"):
        query_plan([10] * (MAX_PLAN_TEXTS + 1), workers=2)
