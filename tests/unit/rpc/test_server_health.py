"""A server's health across toolhost replicas: served when ready anywhere, the others named."""

from __future__ import annotations

from shared.rpc.heartbeat import ToolhostBeat, replicas_ready, server_health


def _beat(pid: int, state: str, error: str | None = None, *, ready: bool = True) -> ToolhostBeat:
    return ToolhostBeat(
        pid=pid,
        host="h",
        started_at=0.0,
        ready=ready,
        servers={"example": state},
        errors={"example": error} if error else {},
    )


def test_a_server_ready_on_one_replica_is_ready_and_names_where_it_is_down() -> None:
    health = server_health([_beat(1, "retrying", "crashed"), _beat(2, "ready")])["example"]
    assert (health.state, health.error) == ("ready", None)
    assert health.down_on == {"h:1": "crashed"}
    assert health.degraded and not health.failed


def test_a_server_down_on_every_replica_fails_with_an_error() -> None:
    health = server_health([_beat(1, "retrying", "crashed"), _beat(2, "retrying", "hung")])
    assert health["example"].state == "retrying"
    assert health["example"].failed
    assert set(health["example"].down_on) == {"h:1", "h:2"}


def test_a_first_attempt_ranks_above_a_failed_one_and_is_not_failed() -> None:
    health = server_health([_beat(1, "retrying", "crashed"), _beat(2, "connecting")])["example"]
    assert health.state == "connecting" and not health.failed


def test_only_serving_replicas_with_the_server_ready_take_its_calls() -> None:
    beats = [_beat(1, "retrying"), _beat(2, "ready"), _beat(3, "connecting")]
    assert replicas_ready(beats, "example") == ["h:2"]
    stopping = _beat(4, "ready", ready=False)  # draining: it pops nothing any more
    assert replicas_ready([*beats, stopping], "example") == ["h:2"]
    assert replicas_ready(beats, "other") == []
