"""The finished row as its worker publishes it on the run's channel: a follower tells it from an
event and gets the row back with its types (shared/executions/carried.py)."""

from __future__ import annotations

import datetime as dt
from uuid import uuid4

import orjson

from shared.executions.carried import ROW_MESSAGE, decode_row, encode_row, row_in_message


def test_the_row_message_gives_the_row_back_with_its_types() -> None:
    row = {
        "id": uuid4(),
        "status": "succeeded",
        "result": {"n": 2**62, "ü": [1.5, None]},
        "finished_at": dt.datetime(2026, 11, 29, 4, 0, tzinfo=dt.UTC),
    }
    raw = encode_row(row)
    assert raw is not None
    for message in (ROW_MESSAGE + raw, (ROW_MESSAGE + raw).decode()):  # bytes, or decoded
        carried = row_in_message(message)
        assert carried is not None and decode_row(carried) == row


def test_an_event_is_no_row_message() -> None:
    event = orjson.dumps({"type": "execution.finished", "status": "succeeded", "seq": 3})
    assert row_in_message(event) is None
    assert row_in_message(event.decode()) is None
