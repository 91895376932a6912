"""Smoke test of `agentcards bench sandbox`: the JSON has its documented shape (timing is not asserted)."""

from __future__ import annotations

import os
import sys

import pytest

from deploy.bench.sandbox import run


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="needs root")
def test_bench_sandbox_json_shape() -> None:
    out = run(n=3)
    assert out["benchmark"] == "sandbox"
    for key in (
        "sandbox_start_to_first_instruction",
        "sandbox_start_cold_no_prespawn",
        "bare_python_I_S_pass",
        "bridge_tool_call_roundtrip",
        "typescript_start_to_first_instruction",
        "typescript_run_total",
        "bare_deno_run_empty_file",
        "typescript_bridge_tool_call_roundtrip",
    ):
        assert {"n", "p50_ms", "p99_ms"} <= set(out[key]), key
    assert out["layers"]["seccomp"] is True
    assert "bwrap_python_cold" in out["alternatives"]
