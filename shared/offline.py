"""Nothing downloads models at run time: entry points switch Hugging Face libraries offline.

The libraries read these variables when first imported, so each process entry point
(gateway and toolhost ``__main__``, the learning Celery app, the CLI) calls
``go_offline`` before anything imports them; the embedding library only checks.
"""

from __future__ import annotations

import os
import sys

from shared.errors import ConfigError

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
_TRUE = {"1", "ON", "YES", "TRUE"}  # what huggingface_hub reads as set


def go_offline() -> None:
    """Set ``OFFLINE_ENV`` in this process (and its children): for entry points only."""
    os.environ.update(OFFLINE_ENV)


def require_offline() -> None:
    """Raise ConfigError unless this process started offline, before any model is loaded."""
    unset = [name for name in OFFLINE_ENV if os.environ.get(name, "").upper() not in _TRUE]
    if unset:
        raise ConfigError(
            f"{' and '.join(unset)} not set: models are never downloaded at run time; start "
            "the process through its entry point (agentcards, python -m services.…, the "
            "Celery apps) or export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1"
        )
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None and not getattr(constants, "HF_HUB_OFFLINE", True):
        raise ConfigError(
            "huggingface_hub was imported before HF_HUB_OFFLINE was set, so it would still "
            "reach the hub: call shared.offline.go_offline() first thing at the entry point"
        )
