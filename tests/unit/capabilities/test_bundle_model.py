"""The import bundle's validation: what a bundle must hold, named field by field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from shared.capabilities.bundle import Bundle

ENTRY: dict[str, Any] = {
    "id": "a",
    "family": "a",
    "name": "greet",
    "description": "Greet.",
    "code": "return 1",
    "intent": "greet",
    "aliases": ["say hi"],
    "tools_used": [],
    "parameters_schema": {"type": "object", "properties": {}},
    "source": "manual",
    "version": 1,
    "stats": {
        "usage_count": 0,
        "success_count": 0,
        "failure_count": 0,
        "success_rate": 0.0,
        "avg_duration_ms": 0.0,
        "created_at": "2026-11-23T10:00:00+00:00",
        "last_used": None,
        "promoted_at": None,
    },
}


def _bundle(**entry: Any) -> dict[str, Any]:
    return {
        "format": "agentcards.capabilities",
        "format_version": 1,
        "capabilities": [{**ENTRY, **entry}],
    }


def test_a_well_formed_bundle_validates() -> None:
    parsed = Bundle.model_validate(_bundle())
    assert parsed.capabilities[0].stats.created_at.year == 2026


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        ({"version": 0}, ("capabilities", 0, "version")),
        ({"source": "elsewhere"}, ("capabilities", 0, "source")),
        ({"intent": ""}, ("capabilities", 0, "intent")),
        ({"aliases": "say hi"}, ("capabilities", 0, "aliases")),
        ({"code": "return '\x00'"}, ("capabilities", 0, "code")),
        (
            {"stats": {**ENTRY["stats"], "usage_count": -1}},
            ("capabilities", 0, "stats", "usage_count"),
        ),
        ({"version": 2**31}, ("capabilities", 0, "version")),
        (  # beyond a Postgres integer: refused by name, never a 500 at insert
            {"stats": {**ENTRY["stats"], "success_count": 2**31}},
            ("capabilities", 0, "stats", "success_count"),
        ),
        ({"extra": 1}, ("capabilities", 0, "extra")),
    ],
)
def test_a_bad_entry_is_named_by_its_path(entry: dict[str, Any], where: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as caught:
        Bundle.model_validate(_bundle(**entry))
    assert [e["loc"] for e in caught.value.errors()] == [where]
