"""Who may be re-run after its worker died: only `"retry": "safe"`, and only N times."""

from __future__ import annotations

import pytest

from shared.recovery.lost import may_rerun


@pytest.mark.parametrize(
    ("retry", "attempts", "expected"),
    [
        ("never", 1, False),  # the default: never re-run
        (None, 1, False),  # a row from before retries existed
        ("safe", 1, True),
        ("safe", 2, True),
        ("safe", 3, False),  # 1 run + 2 re-runs: used up
    ],
)
def test_only_safe_runs_with_re_runs_left_are_re_run(
    retry: str | None, attempts: int, expected: bool
) -> None:
    assert may_rerun({"retry": retry, "attempts": attempts}, max_retries=2) is expected


def test_no_re_runs_allowed_means_none() -> None:
    assert not may_rerun({"retry": "safe", "attempts": 1}, max_retries=0)
