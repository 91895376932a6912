"""The MCP Apps part of a tool's ``_meta`` the toolhost keeps for Apps clients."""

from __future__ import annotations

from shared.tools.apps import tool_apps_meta


def test_only_the_apps_keys_of_a_tool_s_meta_are_kept() -> None:
    meta = {
        "ui": {"resourceUri": "ui://dash/app.html"},
        "ui/resourceUri": "ui://dash/app.html",
        "other/vendor": {"x": 1},
    }
    assert tool_apps_meta(meta) == {
        "ui": {"resourceUri": "ui://dash/app.html"},
        "ui/resourceUri": "ui://dash/app.html",
    }
    assert tool_apps_meta({"other/vendor": 1}) is None
    assert tool_apps_meta(None) is None
    assert tool_apps_meta({"ui": "not an object"}) is None
