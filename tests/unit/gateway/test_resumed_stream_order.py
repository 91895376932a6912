"""A resumed stream sends a live message unless the replay before it sent it already."""

from __future__ import annotations

from services.gateway.mcp.replicas.replay import entry_order, sent_already


def test_entry_ids_order_by_time_then_sequence() -> None:
    assert entry_order("1795980863681-0") == (1795980863681, 0)
    assert entry_order("1795980863681-1") > entry_order("1795980863681-0")  # type: ignore[operator]
    assert entry_order("1795980863690-0") > entry_order("1795980863681-9")  # type: ignore[operator]
    # A priming id, a quick answer's empty id, garbage: not an entry id.
    for other in ("p::2", "p:1795980863681-0:2", "", None, "12-x", "-1"):
        assert entry_order(other) is None, other


def test_a_live_message_the_replay_sent_is_not_sent_again() -> None:
    replayed_up_to = "1795980863681-0"
    assert sent_already("1795980863681-0", replayed_up_to)  # stored before the replay read it
    assert sent_already("1795980863680-5", replayed_up_to)
    assert not sent_already("1795980863681-1", replayed_up_to)  # stored after: only live
    # Nothing replayed (or an id that is no entry): everything live goes out.
    assert not sent_already("1795980863681-1", None)
    assert not sent_already("", replayed_up_to)
