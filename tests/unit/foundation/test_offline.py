"""Nothing downloads models at run time: entry points go offline, the library only checks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shared.embeddings import Embedder
from shared.errors import ConfigError
from shared.offline import OFFLINE_ENV


def _run(script: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _without_offline_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in OFFLINE_ENV}


@pytest.mark.parametrize("value", [None, "0"])
def test_loading_a_model_in_a_process_not_started_offline_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", value)
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE not set: models are never downloaded"):
        Embedder(model_name="all-MiniLM-L6-v2").embed(["x"])
    assert os.environ.get("HF_HUB_OFFLINE") == value  # refused, not switched behind our back


def test_embedding_leaves_the_environment_as_the_process_set_it() -> None:
    # "true"/"yes" are offline to Hugging Face too; a library that set "1" would show.
    env = _without_offline_env() | {"HF_HUB_OFFLINE": "true", "TRANSFORMERS_OFFLINE": "yes"}
    script = (
        "import os, torch\n"  # torch sets KMP_* on import: its own
        "before = dict(os.environ)\n"
        "from shared.config import Settings\n"
        "from shared.embeddings import get_embedder\n"
        "embedder = get_embedder(Settings(embedding_model='all-MiniLM-L6-v2'))\n"
        "embedder.embed(['read a file']); embedder.embed_query(['send it', 'by mail'])\n"
        "print(dict(os.environ) == before)\n"
    )
    assert _run(script, env) == "True"


def _module_script(module: str) -> str:
    return f"import {module}"


def _main_script(package: str) -> str:
    # Runs the package's __main__ with its server's main() replaced: nothing is served.
    return f"import runpy, {package}.app as a; a.main = lambda: None; runpy.run_module('{package}')"


@pytest.mark.parametrize(
    "script",
    [
        _main_script("services.gateway"),
        _main_script("services.toolhost"),
        _module_script("workers.learning.celery_app"),  # learning workers, beat, Flower
        _module_script("deploy.cli.main"),  # agentcards: bench, demo, mcp
    ],
    ids=["gateway", "toolhost", "learning-worker", "cli"],
)
def test_every_process_that_embeds_starts_offline(script: str) -> None:
    check = "\nimport os; print([os.environ.get(k) for k in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE')])"
    # Importing the Celery app reads settings; nothing connects.
    urls = {
        "AGENTCARDS_DATABASE_URL": "postgresql://unused/x",
        "AGENTCARDS_REDIS_URL": "redis://unused",
    }
    assert _run(script + check, _without_offline_env() | urls) == "['1', '1']"
