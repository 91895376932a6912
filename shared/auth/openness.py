"""Whether a gateway serves callers without a key, in the words `up`, `status` and `keys` print."""

from __future__ import annotations

from shared.config import Settings

CLOSE_HINT = "`agentcards keys create --tenant <name>` makes every caller need a key"


def open_reason(settings: Settings, *, keys_exist: bool) -> str | None:
    """Why the gateway serves callers without a key, or None when every caller needs one.

    With no active key and no OAuth issuer, the gateway serves loopback callers as tenant
    ``default`` (services/gateway/auth.py; it refuses to listen beyond loopback then)."""
    if not settings.auth:
        return "open: AGENTCARDS_AUTH=off, no key is checked; every caller runs as tenant 'default'"
    if keys_exist or settings.oauth:
        return None
    return (
        "open: no API key is active, so every caller on this machine runs as tenant 'default' "
        f"without one; {CLOSE_HINT}"
    )
