"""`bench footprint`'s measurement: roles from a stack's state file, MCP servers kept out of the total."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from deploy.bench.footprint import read_rollup, stack_samples, summarise
from deploy.launcher.state import StackState

# A stand-in toolhost: a process with a child of its own, as a stdio MCP server is.
PARENT = "import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"


@pytest.fixture
def toolhost() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", PARENT])
    deadline = time.monotonic() + 10
    while not psutil.Process(proc.pid).children() and time.monotonic() < deadline:
        time.sleep(0.05)
    yield proc
    for child in psutil.Process(proc.pid).children(recursive=True):
        child.kill()
    proc.kill()
    proc.wait()


def test_the_table_counts_our_processes_and_lists_servers_apart(
    toolhost: subprocess.Popen[bytes],
) -> None:
    rollup = read_rollup(os.getpid())
    assert rollup["Pss"] > 0 and rollup["Rss"] >= rollup["Pss"]

    state = StackState(
        supervisor_pid=os.getpid(),
        database_url="",
        redis_url="",
        processes={"toolhost": toolhost.pid},
    )
    samples = stack_samples(state)
    assert sorted(s.role for s in samples) == ["mcp-server", "supervisor", "toolhost"]
    server = next(s for s in samples if s.role == "mcp-server")
    assert "sleep" in server.command

    table = summarise(samples, others=0)
    counted = [s for s in samples if s.role != "mcp-server"]
    assert table["total_pss_mib"] == round(sum(s.pss for s in counted) / 1024, 1)
    assert set(table["by_role"]) == {"supervisor", "toolhost"}
    assert [p["pid"] for p in table["mcp_servers"]["processes"]] == [server.pid]
    assert table["meets_target"] is (table["total_pss_mib"] < table["target_pss_mib"])
