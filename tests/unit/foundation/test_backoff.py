"""The supervisor's restart pacing: doubling while a process crash-loops, 1 s again once it held up."""

from __future__ import annotations

from deploy.launcher.backoff import HEALTHY_RESET_S, MAX_BACKOFF_S, Backoff


def _crash_and_restart(backoff: Backoff, now: float) -> tuple[float, float]:
    """The process dies at ``now``: (delay, time of the restart)."""
    delay = backoff.exited(now)
    assert delay is not None
    assert not backoff.due(now + delay - 0.01)
    assert backoff.due(now + delay)
    backoff.started(now + delay)
    return delay, now + delay


def test_a_crash_looping_process_waits_longer_each_time_up_to_the_cap() -> None:
    backoff = Backoff()
    backoff.started(0.0)
    now, delays = 1.0, []
    for _ in range(7):
        delay, now = _crash_and_restart(backoff, now + 0.5)
        delays.append(delay)
    assert delays == [1, 2, 4, 8, 16, MAX_BACKOFF_S, MAX_BACKOFF_S]
    assert backoff.restarts == 7


def test_a_process_that_held_up_is_restarted_after_one_second_again() -> None:
    backoff = Backoff()
    backoff.started(0.0)
    now = 1.0
    for _ in range(4):
        _, now = _crash_and_restart(backoff, now + 0.5)
    delay, now = _crash_and_restart(backoff, now + HEALTHY_RESET_S)
    assert delay == 1
    assert backoff.restarts == 5


def test_a_death_is_scheduled_once_however_often_it_is_seen() -> None:
    backoff = Backoff()
    backoff.started(0.0)
    assert backoff.exited(1.0) == 1
    assert backoff.exited(1.5) is None
    assert backoff.restarts == 0
