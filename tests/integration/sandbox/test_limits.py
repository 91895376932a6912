"""Resource attacks: each hits its limit, gets its structured error type, and the host keeps serving."""

from __future__ import annotations

from dataclasses import replace

from tests.integration.sandbox.conftest import Run


async def test_fast_memory_bomb(run: Run, host_intact) -> None:
    outcome = await run("b = bytearray(2 * 1024**3)\nlen(b)")
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "memory_limit"
    assert "AGENTCARDS_SANDBOX_MEMORY_MB" in outcome.error["message"]
    await host_intact()


async def test_slow_memory_bomb(run: Run, host_intact) -> None:
    code = """
chunks = []
while True:
    chunks.append(bytearray(4 << 20))
    for i in range(0, len(chunks[-1]), 4096):
        chunks[-1][i] = 1
"""
    outcome = await run(code)
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "memory_limit"
    assert "AGENTCARDS_SANDBOX_MEMORY_MB" in outcome.error["message"]
    await host_intact()


async def test_memory_bomb_across_processes(run: Run, host_intact) -> None:
    code = """
import os, time
for _ in range(6):
    if os.fork() == 0:
        hog = bytearray(200 << 20)
        for i in range(0, len(hog), 4096):
            hog[i] = 1
        time.sleep(30)
        os._exit(0)
time.sleep(30)
"""
    outcome = await run(code)
    # The cgroup caps the group's memory; the wall clock ends the sleeping parent.
    assert outcome.status in ("timeout", "failed")
    await host_intact()


async def test_cpu_spin_hits_cpu_limit(run: Run, limits, host_intact) -> None:
    outcome = await run(
        "while True:\n    pass", limits=replace(limits, wall_time_s=6.0, cpu_time_s=1)
    )
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "cpu_limit"
    assert (
        "CPU time limit of 1s exceeded (AGENTCARDS_SANDBOX_CPU_TIME_S)" in outcome.error["message"]
    )
    await host_intact()


async def test_sleep_forever_times_out(run: Run, host_intact) -> None:
    outcome = await run("import time\ntime.sleep(10**6)")
    assert outcome.status == "timeout"
    assert outcome.error is not None and outcome.error["type"] == "timeout"
    await host_intact()


async def test_gigabyte_of_output_is_truncated(run: Run, limits, host_intact) -> None:
    code = """
line = "x" * (1 << 20)
for _ in range(1024):
    print(line)
"done"
"""
    outcome = await run(code)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == "done"
    assert outcome.stdout_truncated is True
    assert len(outcome.stdout.encode()) <= limits.stdout_bytes
    await host_intact()


async def test_oversized_result_is_output_limit(run: Run, host_intact) -> None:
    outcome = await run('"x" * (5 << 20)')
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "output_limit"
    await host_intact()
