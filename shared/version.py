"""The package's version, as installed (``pyproject.toml``): what ``serverInfo`` and the API report."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("agentcards")
except PackageNotFoundError:  # a checkout run without installing it
    VERSION = "0+unknown"
