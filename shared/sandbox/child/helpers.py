"""Standard-library modules agent code finds as globals, no import needed: ``asyncio.gather(...)`` just works.

The zygote imports them once before forking (they cost an execution nothing), and
every execution's globals (the main body's and each capability's) name them.
``import json`` and friends work too, as for any stdlib module: the sandbox's root
holds the interpreter's stdlib, read-only, and nothing else.
"""

from __future__ import annotations

import importlib
import types

# execute_code's description (services/gateway/mcp/server.py) lists these from here.
HELPER_MODULES: tuple[str, ...] = (
    "asyncio",
    "json",
    "re",
    "math",
    "datetime",
    "itertools",
    "collections",
    "functools",
    "statistics",
    "base64",
    "time",
)


def helper_globals() -> dict[str, types.ModuleType]:
    """``{"asyncio": <module asyncio>, ...}`` for an execution's globals (imports on first use)."""
    return {name: importlib.import_module(name) for name in HELPER_MODULES}
