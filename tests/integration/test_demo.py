"""`agentcards demo` on a fresh home: the whole showcase runs and every step succeeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_demo_plays_every_step(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
    env |= {"AGENTCARDS_HOME": str(tmp_path / "home"), "COLUMNS": "220", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "deploy.cli.main", "demo"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "capability 'count_words_sample_text_file' (created)" in out
    assert "matched 'count_words_sample_text_file'" in out and "unrelated intent: 0 matches" in out
    assert "27 words in recipes.md" in out and "bad args -> 422" in out
    assert "tool_failures: example:fail" in out and "capability not saved" in out
    assert "/dashboard" in out
    assert "failed" not in out.split("summary")[-1]
