"""docs/configuration.md is the settings' own descriptions: every setting has one, the file is current."""

from __future__ import annotations

from pathlib import Path

from deploy.docs_config import COMMAND, render, undescribed
from shared.config import Settings

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_every_setting_says_what_it_does() -> None:
    assert undescribed() == [], (
        f"settings without Field(description=...) in shared/config.py: {undescribed()}"
    )


def test_the_configuration_doc_is_generated_from_the_settings() -> None:
    assert DOC.read_text() == render(), f"docs/configuration.md is stale: run `{COMMAND}`"


def test_the_doc_lists_every_setting_by_its_variable() -> None:
    text = DOC.read_text()
    for name in Settings.model_fields:
        assert f"| `AGENTCARDS_{name.upper()}` |" in text, name
