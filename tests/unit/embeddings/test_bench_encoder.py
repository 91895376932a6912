"""`agentcards bench search --embedding-model/--backend`: the encoder measured, or a usage error."""

from __future__ import annotations

import os
from typing import Any

import pytest
from typer.testing import CliRunner

from deploy.cli import bench
from deploy.cli.main import app


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str | None]]:
    """The encoder settings each bench run saw (the bench itself is not run)."""
    for name in ("AGENTCARDS_EMBEDDING_MODEL", "AGENTCARDS_EMBEDDING_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    seen: list[dict[str, str | None]] = []

    def run(module: str, **_: Any) -> None:
        seen.append(
            {
                "module": module,
                "model": os.environ.get("AGENTCARDS_EMBEDDING_MODEL"),
                "backend": os.environ.get("AGENTCARDS_EMBEDDING_BACKEND"),
            }
        )

    monkeypatch.setattr(bench, "_run", run)
    # The options set the environment the bench (and the gate's sides) inherit: undone after.
    monkeypatch.setattr(os, "environ", os.environ.copy())
    return seen


def test_the_encoder_options_reach_the_bench(measured: list[dict[str, str | None]]) -> None:
    args = ["bench", "search", "--embedding-model", "all-mpnet-base-v2", "--backend", "onnx-int8"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert measured == [{"module": "search", "model": "all-mpnet-base-v2", "backend": "onnx-int8"}]


def test_without_them_the_configured_encoder_is_measured(
    measured: list[dict[str, str | None]],
) -> None:
    assert CliRunner().invoke(app, ["bench", "search"]).exit_code == 0
    assert measured == [{"module": "search", "model": None, "backend": None}]


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--embedding-model", "no-such-model", "unknown embedding model 'no-such-model'"),
        ("--backend", "tensorflow", "torch"),
    ],
)
def test_an_unknown_encoder_is_a_usage_error_before_anything_runs(
    measured: list[dict[str, str | None]], option: str, value: str, said: str
) -> None:
    result = CliRunner().invoke(app, ["bench", "search", option, value])
    assert result.exit_code == 2
    assert said in result.output
    assert measured == []
