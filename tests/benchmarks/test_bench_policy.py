"""`bench policy`'s generated files are what it says: N valid policies, and its three kinds
of call are decided as named (allowed, forbidden, nothing permits)."""

from __future__ import annotations

from pathlib import Path

from deploy.bench.policy import _decisions, policy_text
from shared.policy.engine import PolicyEngine


def test_the_generated_files_validate_and_decide_each_kind(tmp_path: Path) -> None:
    path = tmp_path / "p.cedar"
    path.write_text(policy_text(100))
    engine = PolicyEngine(path)  # validated against the shipped schema, else PolicyInvalid
    assert engine.loaded is not None and engine.loaded.count == 100
    timings = _decisions(engine, 5)  # raises when a kind is decided otherwise
    assert set(timings) == {"allow", "forbid", "no_permit"}
