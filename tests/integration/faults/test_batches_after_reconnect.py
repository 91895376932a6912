"""A batching worker that lived through a Redis restart consumes again, and loses nothing.

The learning worker's ``ReliableBatches`` under a real broker outage: one batch is in
the pool, a full batch waits for the busy pool process and more messages wait in the
buffer when Redis is SIGKILLed. Celery clears its event loop's timers on the connection
error; a batching task that kept its old flush timer would buffer every later message
without ever flushing a partial batch (seen: a learning worker reconnected, then
ingested nothing until killed). The pool discards the waiting batch with the old
connection; its messages come back at once, not after the visibility timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery

from deploy.launcher.embedded import EmbeddedRedis
from tests.harness import track
from tests.integration.faults.accounting import poll_until
from tests.integration.faults.batch_app import FLUSH_EVERY, VISIBILITY_TIMEOUT_S
from tests.stack import REPO


@pytest.fixture
def worker(own_redis: EmbeddedRedis, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A real worker of the batch test app, concurrency 1; (output file, log file)."""
    out, log = tmp_path / "received.txt", tmp_path / "worker.log"
    out.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")} | {
        "PYTHONPATH": str(REPO),  # this checkout's code
        "PYTHONSAFEPATH": "1",
        "BATCH_TEST_BROKER": own_redis.url,
        "BATCH_TEST_OUT": str(out),
        "BATCH_TEST_HOLD_S": "6",
    }
    with log.open("ab") as sink:
        popen = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "tests.integration.faults.batch_app",
                "worker", "--concurrency", "1", "--without-gossip", "--without-mingle",
                "--loglevel", "INFO", "-n", f"batch-{tmp_path.name}@%h",
            ],
            cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        proc = track(popen)  # its group is stopped at exit if the test is cut short
    try:
        poll_until(lambda: " ready." in log.read_text(), what="batch worker ready")
        yield out, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _received(out: Path) -> set[str]:
    return set(out.read_text().split())


def test_a_batching_worker_consumes_again_after_redis_restarts(
    own_redis: EmbeddedRedis, worker: tuple[Path, Path], request: pytest.FixtureRequest
) -> None:
    out, log = worker
    client = Celery("batch-client", broker=own_redis.url)
    client.conf.broker_connection_retry_on_startup = True
    client.send_task("batch_test.record", args=["first"])
    poll_until(lambda: "first" in _received(out), what="the first batch in the pool")
    # A full batch (flush_every) handed to the busy pool, and three more in the buffer.
    before = [f"before-{i}" for i in range(FLUSH_EVERY + 3)]
    for token in before:
        client.send_task("batch_test.record", args=[token])
    time.sleep(1.5)  # fetched (unacked, on the AOF, fsynced every second) and still held
    assert not set(before) & _received(out)  # the first batch still holds the only process
    own_redis.process.send_signal(signal.SIGKILL)
    own_redis.process.wait()
    # Down longer than the worker takes to notice: kombu's own restore of the unacked
    # messages, when it closes the dropped channel, fails (a faster restart lets it work).
    poll_until(lambda: "Connection to broker lost" in log.read_text(), what="the loss noticed")
    time.sleep(2)
    restarted = own_redis.restart()
    request.addfinalizer(restarted.stop)
    client = Celery("batch-client-2", broker=restarted.url)
    client.conf.broker_connection_retry_on_startup = True
    poll_until(lambda: log.read_text().count("Connected to") >= 2, what="the worker reconnected")
    after = [f"after-{i}" for i in range(3)]
    for token in after:  # fewer than a full batch: only the flush timer hands them over
        client.send_task("batch_test.record", args=[token])
    poll_until(
        lambda: set(after) | set(before) <= _received(out),
        what="every message, before and after the restart, consumed (a discarded batch "
        f"left to the broker would come back after {VISIBILITY_TIMEOUT_S} s)",
        timeout_s=60,
    )
    print(f"\nbatches after a Redis restart: received {sorted(_received(out))}")
