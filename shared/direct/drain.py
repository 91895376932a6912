"""The drainer: direct calls' records from the Redis stream to Postgres, in batches, each once.

Every gateway runs one (a thread), as a consumer of one group on ``DIRECT_RECORDS_STREAM``.
A batch is read (``XREADGROUP``), written in one transaction (``records.write_records``:
``ON CONFLICT`` on the execution id, so a record written twice is written once), then the
entries are acknowledged and deleted. Learning is told of the new rows in one message a
``LEARN_EVERY_S`` at most: every batch written meanwhile, together.

Nothing is lost when a process dies: a record is in the stream before its call is answered
(Redis runs with AOF); an entry read by a drainer that died before acknowledging it stays
pending, and any drainer takes it over once it has been idle ``CLAIM_IDLE_S``
(``XAUTOCLAIM``); a drainer that failed to write (Postgres down) reads its own pending
entries again before new ones. A row written but not acknowledged is written again as a
no-op; its learning message, then not sent again, is resent by the beat's sweep of
unlearned executions, as is one a drainer held when it died (at most ``LEARN_EVERY_S`` of
rows: learning is what a record waits for, never an answer or an audit row).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import redis
from redis.exceptions import ResponseError

from shared.direct.records import decode_record, write_records
from shared.queues import DIRECT_RECORDS_GROUP, DIRECT_RECORDS_STREAM

log = logging.getLogger(__name__)

Row = dict[str, Any]
Entry = tuple[bytes, dict[bytes, bytes]]

# Entries read per batch: one transaction each.
BATCH = 200
# After the first new entries, how long a drainer waits for more to write them together.
# Sequential calls of one session come every ~10 ms: 0.2 s gathers ~20 of them into one
# transaction, one learning message and one acknowledgement (at 0.05 s, ~4); what a record
# waits for is its Postgres row and its learning, never its call's answer.
LINGER_S = 0.2
# How often at most a drainer sends learning a message, naming every row it wrote since the
# last one. Each message costs the gateway a Celery send and the learning worker a receive, a
# batch's fixed statements and round trips, an acknowledgement and Flower's task events:
# at 100 calls/s, one a second instead of one per 0.2 s batch. A run's learning (a session's
# graph edge) then lags its call by a second or so.
LEARN_EVERY_S = 1.0
# How long one read blocks for new entries (the stop flag is checked between reads).
BLOCK_MS = 1000
# An entry pending this long was read by a drainer that died (a live one writes a batch in
# milliseconds, or keeps retrying its own): another drainer takes it over.
CLAIM_IDLE_S = 5.0
# How often a drainer looks for such entries (at most: never less often than they may idle).
CLAIM_EVERY_S = 2.0


class Drainer:
    """One consumer of the records stream; ``run`` until ``stop``, or ``drain`` in a test."""

    def __init__(
        self,
        *,
        client: redis.Redis,
        connection: Callable[[], AbstractContextManager[psycopg.Connection[Row]]],
        learn: Callable[[list[str]], object],
        consumer: str,
        claim_idle_s: float = CLAIM_IDLE_S,
        learn_every_s: float = LEARN_EVERY_S,
    ) -> None:
        self._client = client
        self._connection = connection
        self._learn = learn
        self._consumer = consumer
        self._claim_idle_ms = int(claim_idle_s * 1000)
        self._claim_every_s = min(CLAIM_EVERY_S, claim_idle_s)
        self._own_pending = True  # at start, and after a failed write: ours first
        self._next_claim = 0.0
        self._stop = threading.Event()
        self._grouped = False
        self._learn_every_s = learn_every_s
        self._unlearned: list[str] = []  # written, learning not yet told
        self._learned_at = -learn_every_s  # when it was last told (the first batch: at once)
        self.written = 0

    def stop(self) -> None:
        """End ``run`` after the batch in hand."""
        self._stop.set()

    def run(self) -> None:
        """Drain until ``stop``; errors are logged and retried with backoff."""
        failures = 0
        try:
            while not self._stop.is_set():
                try:
                    self.drain(block_ms=BLOCK_MS)
                    failures = 0
                except (redis.RedisError, psycopg.Error) as exc:
                    failures += 1
                    delay = min(5.0, 0.1 * 2**failures)
                    log.warning("direct records: %s; again in %.1f s", exc, delay)
                    self._stop.wait(delay)
        finally:
            self._tell_learning(force=True)

    def drain(self, *, block_ms: int | None = None) -> int:
        """Write one batch (this consumer's pending entries, then others' idle ones, then new
        ones, blocking up to ``block_ms`` for them); how many entries it held."""
        if not self._grouped:
            self._ensure_group()
        try:
            entries = self._pending() or self._claimed() or self._new(block_ms)
        except ResponseError as exc:
            if "NOGROUP" in str(exc):  # a Redis that lost the group (and its stream)
                self._grouped = False
            raise
        if entries:
            try:
                self._write(entries)
            except BaseException:
                self._own_pending = True  # read, not written: they come first next time
                raise
        self._tell_learning()
        return len(entries)

    def _tell_learning(self, *, force: bool = False) -> None:
        """One learning message for the rows written since the last, once ``learn_every_s``
        has passed since it (``force``: now). ``learn`` never raises (``send_ingests``)."""
        if not self._unlearned:
            return
        now = time.monotonic()
        if not force and now < self._learned_at + self._learn_every_s:
            return
        ids, self._unlearned = self._unlearned, []
        self._learned_at = now
        self._learn(ids)

    def _ensure_group(self) -> None:
        try:
            self._client.xgroup_create(
                DIRECT_RECORDS_STREAM, DIRECT_RECORDS_GROUP, id="0", mkstream=True
            )
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._grouped = True

    def _pending(self) -> list[Entry]:
        if not self._own_pending:
            return []
        entries = self._read("0", None)
        if not entries:
            self._own_pending = False
        return entries

    def _claimed(self) -> list[Entry]:
        now = time.monotonic()
        if now < self._next_claim:
            return []
        self._next_claim = now + self._claim_every_s
        reply: Any = self._client.xautoclaim(
            DIRECT_RECORDS_STREAM,
            DIRECT_RECORDS_GROUP,
            self._consumer,
            min_idle_time=self._claim_idle_ms,
            start_id="0-0",
            count=BATCH,
        )
        claimed: list[Entry] = list(reply[1])
        if claimed:
            log.info("direct records: took over %d entries of a stopped drainer", len(claimed))
        return claimed

    def _new(self, block_ms: int | None) -> list[Entry]:
        if block_ms is not None and self._unlearned:  # back in time to tell learning
            due_s = self._learned_at + self._learn_every_s - time.monotonic()
            block_ms = max(1, min(block_ms, int(due_s * 1000) + 1))
        entries = self._read(">", block_ms)
        if entries and len(entries) < BATCH and block_ms is not None:
            # A few more calls are usually on their way: one batch (one transaction, one
            # acknowledgement) for them costs less than one each, on the gateway's CPU.
            self._stop.wait(LINGER_S)
            entries += self._read(">", None)
        return entries

    def _read(self, start: str, block_ms: int | None) -> list[Entry]:
        reply: Any = self._client.xreadgroup(
            DIRECT_RECORDS_GROUP,
            self._consumer,
            {DIRECT_RECORDS_STREAM: start},
            count=BATCH,
            block=block_ms,
        )
        if not reply:
            return []
        return list(reply[0][1])

    def _write(self, entries: Sequence[Entry]) -> None:
        records, ids = [], [entry_id for entry_id, _ in entries]
        for entry_id, fields in entries:
            if not fields:  # deleted after it was read: written already
                continue
            try:
                records.append(decode_record(fields))
            except ValueError as exc:  # never writable: dropped, said loudly
                log.error("direct records: entry %r dropped: %s", entry_id, exc)
        with self._connection() as conn:
            written = write_records(conn, records)
        self._unlearned += written  # told with the next message (``_tell_learning``)
        pipe = self._client.pipeline(transaction=False)
        pipe.xack(DIRECT_RECORDS_STREAM, DIRECT_RECORDS_GROUP, *ids)
        pipe.xdel(DIRECT_RECORDS_STREAM, *ids)
        pipe.execute()
        self.written += len(written)
