"""What a tool is embedded as: its server's name beside its own, so the server's purpose
counts when the description does not state it."""

from __future__ import annotations

from shared.tools.store import search_text


def test_the_server_name_leads_the_searched_text() -> None:
    text = search_text(
        server="memory",
        name="add_observations",
        description="Add new observations to existing entities in the knowledge graph",
    )
    assert text == (
        "memory add_observations: Add new observations to existing entities in the knowledge graph"
    )
