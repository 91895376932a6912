"""`agentcards demo`: on a fresh home, and on a running stack it cannot or can only partly use."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from deploy.launcher.embedded import free_port
from deploy.launcher.state import StackState
from shared.config import Settings
from tests.conftest import server_dir
from tests.integration.mcp_servers import example_server, time_server, wait_for, write_config

AGENTCARDS = [sys.executable, "-m", "deploy.cli.main"]
HEADER = "what happened"  # the step table's column header: once per printed table


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
    env |= {"AGENTCARDS_HOME": str(home), "COLUMNS": "220", "HF_HUB_OFFLINE": "1"}
    return env | extra


def _demo(env: dict[str, str]) -> tuple[int, str]:
    """Run the demo with stdout piped, as CI and `| tee` do."""
    done = subprocess.run(
        [*AGENTCARDS, "demo"], env=env, capture_output=True, text=True, timeout=400
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def _summary_row(out: str, step: str) -> str:
    summary = out.split("summary")[-1]
    return next(line for line in summary.splitlines() if step in line)


def test_demo_plays_every_step(tmp_path: Path) -> None:
    # Where the temporary stack's home goes (tempfile's TMPDIR): outside pytest's tmp root,
    # which Postgres' own user cannot traverse.
    scratch = server_dir("demo-tmp")
    code, out = _demo(_env(tmp_path / "home", TMPDIR=str(scratch)))
    assert code == 0, out[-4000:]
    # The temporary stack is gone with everything under its home (pgserver's lock file too),
    # and no URL of it is printed: nothing would answer there.
    left = sorted(
        p for p in scratch.rglob("*") if p.relative_to(scratch).parts[0].startswith("agentcards-")
    )
    assert left == [], left
    assert "/dashboard" not in out and "agentcards demo --keep" in out
    # What the wait was spent on is said, the stop included in the total (not hidden after it).
    up, stopped, total = (
        float(re.search(rf"{what} ([\d.]+)s", out)[1])  # type: ignore[index]
        for what in ("temporary stack up in", "temporary stack stopped in", "demo took")
    )
    assert out.index("temporary stack stopped in") < out.index("demo took")
    assert total + 0.15 >= up + stopped, out[-2000:]  # each rounded to 0.1 s
    assert "capability 'count_words_sample_text_file' (created)" in out
    assert "matched 'count_words_sample_text_file'" in out and "unrelated intent: 0 matches" in out
    assert "27 words in recipes.md" in out and "bad args -> 422" in out
    assert "tool_failures: example:fail" in out and "capability not saved" in out
    assert "failed" not in out.split("summary")[-1]
    assert out.count(HEADER) == 1, out  # piped: the summary alone, not the live frame too


@contextmanager
def _running_stack(home: Path, servers: dict[str, Any]) -> Iterator[tuple[str, dict[str, str]]]:
    """`agentcards up` with these MCP servers until each is ready; `agentcards down` after.

    Started by the CLI, not tests/stack.py: the demo finds the stack as a user's, by its home."""
    env = _env(
        home,
        AGENTCARDS_MCP_CONFIG=str(write_config(home / f"mcp-{len(servers)}.json", servers)),
        AGENTCARDS_GATEWAY_PORT=str(free_port()),
        AGENTCARDS_FLOWER_PORT=str(free_port()),
        AGENTCARDS_EMBEDDED_REDIS_PORT=str(free_port()),
        AGENTCARDS_SANDBOX_WORKERS="1",
    )
    log = home / "up.log"
    with log.open("w") as sink:
        proc = subprocess.Popen([*AGENTCARDS, "up"], env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        try:
            state = wait_for(lambda: _healthy(proc, log, home), timeout_s=180, what="all healthy")
            url = state.urls["gateway"]
            wait_for(lambda: _ready(url, servers), timeout_s=120, what=f"{sorted(servers)} ready")
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}; `agentcards up` said:\n{log.read_text()[-3000:]}"
            ) from exc
        yield url, env
    finally:
        subprocess.run([*AGENTCARDS, "down"], env=env, capture_output=True, timeout=60)
        proc.wait(60)


def _healthy(proc: subprocess.Popen[bytes], log: Path, home: Path) -> StackState | None:
    assert proc.poll() is None, "`agentcards up` exited"
    if "all healthy" not in log.read_text():
        return None
    return StackState.load(Settings(home=home).run_dir)


def _ready(url: str, servers: dict[str, Any]) -> bool:
    listed = httpx.get(f"{url}/v1/servers", timeout=5).json()["servers"]
    return {s["name"] for s in listed if s["state"] == "ready"} >= set(servers)


def _keys(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [*AGENTCARDS, "keys", *args], env=env, capture_output=True, text=True, timeout=60
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_demo_on_running_stacks_never_reports_a_failure_as_ok(tmp_path: Path) -> None:
    home = server_dir("demo")  # embedded Postgres must be reachable by its own user
    empty = home / "no-sample-files"
    empty.mkdir()
    broken = example_server(tmp_path, EXAMPLE_SAMPLE_DIR=str(empty))
    try:
        # 1. The running stack serves `example`, but without its sample files: the demo
        #    uses it, the first run fails for real, and so do the steps that need it.
        first = "first run becomes a capability"
        with _running_stack(home, {"example": broken, "time": time_server()}) as (url, env):
            code, out = _demo(_env(home))
            assert code != 0, out[-4000:]
            assert "starting a temporary stack" not in out
            assert re.search(rf"step failed: {first}: execution \S+ failed: .*no such file", out)
            assert "failed" in _summary_row(out, first) and " ok " not in _summary_row(out, first)
            for later in (
                "a paraphrased intent matches it",
                "re-run the capability with other args",
            ):
                assert "failed" in _summary_row(out, later), out
                assert f"step failed: {later}: needs the capability of '{first}'" in out
            assert " ok " in _summary_row(out, "a failing tool: run reported, not saved")
            assert out.count(HEADER) == 1, out
            assert f"dashboard: {url}/dashboard" in out  # the running stack's, still serving

            # Once the stack has a key, the demo needs one too: without it, it says so at
            # once (no temporary stack); with AGENTCARDS_API_KEY it plays on the stack again.
            created = _keys(env, "create", "--tenant", "demo")
            key = next(line for line in created.splitlines() if line.startswith("ack_"))
            wait_for(
                lambda: httpx.get(f"{url}/v1/tools", timeout=5).status_code == 401,
                timeout_s=15,
                what="the gateway refusing requests without a key",
            )
            code, out = _demo(env)
            assert code == 1, out[-4000:]
            assert "needs an API key: set AGENTCARDS_API_KEY" in out, out[-4000:]
            assert "starting a temporary stack" not in out
            code, out = _demo(env | {"AGENTCARDS_API_KEY": key})
            _keys(
                env, "revoke", re.findall(r"key id\s+(\S+)", created)[0], "--yes"
            )  # anonymous again
        assert code != 0 and "starting a temporary stack" not in out, out[-4000:]
        assert re.search(rf"step failed: {first}: execution \S+ failed: .*no such file", out), out
        assert " ok " in _summary_row(out, "a failing tool: run reported, not saved")

        # 2. Restarted without `example` (still in its database, now removed): the demo
        #    sees that the stack cannot serve it and plays every step on a temporary one.
        with _running_stack(home, {"time": time_server()}) as (url, env):
            servers = httpx.get(f"{url}/v1/servers", timeout=5).json()["servers"]
            assert {s["name"]: s["state"] for s in servers}["example"] == "removed"
            code, out = _demo(env)
        assert code == 0, out[-4000:]
        assert "the running stack cannot serve the demo (no available example:" in out
        assert "starting a temporary stack" in out
        assert "capability 'count_words_sample_text_file' (created)" in out
        assert "failed" not in out.split("summary")[-1]
        assert out.count(HEADER) == 1, out
    finally:
        shutil.rmtree(home, ignore_errors=True)
