"""A Celery app whose one task batches like the learning worker's ingestion (``ReliableBatches``)
and records what it received; each batch then sleeps, so one is in flight when Redis dies.

Run by ``test_batches_after_reconnect`` as a real worker process (no embedding model needed).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from celery import Celery

from workers.learning.batching import ReliableBatches

FLUSH_EVERY = 10
# Kombu's default, spelt out: a message fetched and never acked comes back after this.
VISIBILITY_TIMEOUT_S = 3600

app = Celery("batch-test", broker=os.environ.get("BATCH_TEST_BROKER", "memory://"))
app.conf.update(
    worker_prefetch_multiplier=20,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT_S},
)


@app.task(
    base=ReliableBatches,
    name="batch_test.record",
    flush_every=FLUSH_EVERY,
    flush_interval=0.05,
    acks_late=True,
    reject_on_worker_lost=True,
)
def record(requests: list[Any]) -> None:
    """Append each message's token to the output file, then hold the pool process a while."""
    with Path(os.environ["BATCH_TEST_OUT"]).open("a") as out:
        out.writelines(f"{r.args[0]}\n" for r in requests)
    time.sleep(float(os.environ.get("BATCH_TEST_HOLD_S", "3")))
