"""The helper modules agent code gets as globals are stdlib modules, imported once."""

from __future__ import annotations

import sys

from shared.sandbox.child import helpers


def test_helper_modules_are_stdlib_and_import() -> None:
    assert {"asyncio", "json", "re", "math", "datetime", "itertools", "collections"} <= set(
        helpers.HELPER_MODULES
    )
    assert all(name in sys.stdlib_module_names for name in helpers.HELPER_MODULES)
    modules = helpers.helper_globals()
    assert list(modules) == list(helpers.HELPER_MODULES)
    assert all(modules[name] is sys.modules[name] for name in modules)
