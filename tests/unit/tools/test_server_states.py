"""The aggregate of a server's per-replica states: ready anywhere is ready."""

from __future__ import annotations

from typing import Any

from shared.tools.servers import NO_REPLICA_REASON, aggregate


def _row(state: str, at: float, error: str | None = None) -> dict[str, Any]:
    return {"state": state, "last_error": error, "updated_at": at}


def test_one_ready_replica_makes_the_server_ready() -> None:
    assert aggregate([_row("retrying", 2, "crashed"), _row("ready", 1)]) == ("ready", None)


def test_down_everywhere_keeps_the_newest_error() -> None:
    rows = [_row("retrying", 1, "old"), _row("retrying", 3, "new"), _row("retrying", 2, "mid")]
    assert aggregate(rows) == ("retrying", "new")


def test_a_first_attempt_is_the_best_state_short_of_ready() -> None:
    rows = [_row("retrying", 2, "timed out"), _row("connecting", 1)]
    assert aggregate(rows) == ("connecting", "timed out")


def test_no_live_replica_means_down() -> None:
    assert aggregate([]) == ("down", NO_REPLICA_REASON)
