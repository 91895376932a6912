"""The research sets and the learned protocol's choice of sets."""

from __future__ import annotations

from deploy.bench import datasets as shipped
from research.search import datasets


def test_research_sets_are_the_shipped_ones_and_two_request_sets() -> None:
    names = [s.name for s in datasets.all_sets()]
    assert set(names) - {s.name for s in shipped.all_sets()} == {
        "real_servers_issue11",
        "real_servers_issue31",
    }
    # Held out whole: weights are never fitted on them, unlike the two sets they were tuned on.
    assert [s.name for s in datasets.all_sets() if not s.tuned] == [
        "more_servers",
        "real_servers_issue11",
        "real_servers_issue31",
        "bfcl_single",
        "bfcl_multi",
        "nestful",
        "bfcl_ast",
    ]
    issue31 = datasets.real_servers_issue31()
    ids = {t.id for t in issue31.tools}
    assert len(issue31.queries) == 250 and all(q.gold and q.gold <= ids for q in issue31.queries)


def test_learned_variants_are_chosen_on_the_tuning_sets_only() -> None:
    names = {s.name for s in datasets.all_sets()}
    assert set(datasets.LEARNED_TUNING) | set(datasets.LOOK_AFTER) <= names
    assert not set(datasets.LEARNED_TUNING) & set(datasets.LOOK_AFTER)
