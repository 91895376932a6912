"""The stack's PII key: where it comes from, and the keys derived from it.

``AGENTCARDS_PII_KEY`` (urlsafe base64 of 32 bytes) when set (compose, Kubernetes, a
multi-host stack); otherwise ``<home>/pii.key``, created (mode 0600) by the first process
that needs it (`agentcards up` does at start). From it come, by HMAC-SHA256 with distinct
labels, the vault's AES-GCM key and each tenant's token key for each period of
``AGENTCARDS_PII_TOKEN_TTL_S`` (a value keeps its token for that period).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from shared.config import Settings
from shared.errors import ConfigError

KEY_FILE = "pii.key"


def new_key() -> str:
    """A fresh key in the form ``AGENTCARDS_PII_KEY`` takes."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def decode_key(text: str, *, name: str = "AGENTCARDS_PII_KEY") -> bytes:
    """The 32 key bytes of ``text``; a ConfigError names the setting when it is not one."""
    try:
        raw = base64.urlsafe_b64decode(text.strip().encode())
    except (ValueError, TypeError):
        raw = b""
    if len(raw) != 32:
        raise ConfigError(f"{name} must be urlsafe base64 of 32 bytes (`agentcards pii new-key`)")
    return raw


def ensure_key_file(home: Path) -> Path:
    """``<home>/pii.key``, created with a fresh key if absent (several processes may race)."""
    path = home / KEY_FILE
    if path.exists():
        return path
    home.mkdir(parents=True, exist_ok=True)
    tmp = home / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(new_key() + "\n")
    try:
        os.link(tmp, path)  # atomic: the first process's key wins, the others read it
    except FileExistsError:
        pass
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return path


@dataclass(frozen=True)
class PiiKeys:
    """The current key (and the previous one, during a rotation), and what derives from them."""

    current: bytes
    previous: bytes | None = None
    ttl_s: int = 86_400

    @classmethod
    def from_settings(cls, settings: Settings) -> PiiKeys:
        if settings.pii_key is not None:
            current = decode_key(settings.pii_key.get_secret_value())
        else:
            path = ensure_key_file(settings.home)
            current = decode_key(path.read_text(), name=str(path))
        previous = None
        if settings.pii_key_previous is not None:
            previous = decode_key(
                settings.pii_key_previous.get_secret_value(), name="AGENTCARDS_PII_KEY_PREVIOUS"
            )
        return cls(current=current, previous=previous, ttl_s=settings.pii_token_ttl_s)

    def token_key(self, tenant_id: str, now: float | None = None) -> bytes:
        """The tenant's token key for the current period."""
        period = int((time.time() if now is None else now) // self.ttl_s)
        return _derive(self.current, f"token\x00{tenant_id}\x00{period}")

    def expires_at(self, now: float | None = None) -> float:
        """When a token made now stops resolving: the end of the next period."""
        period = int((time.time() if now is None else now) // self.ttl_s)
        return float((period + 2) * self.ttl_s)

    def vault_keys(self) -> dict[str, bytes]:
        """AES-GCM keys by key id, current first."""
        keys = {key_id(self.current): _derive(self.current, "vault")}
        if self.previous is not None:
            keys[key_id(self.previous)] = _derive(self.previous, "vault")
        return keys


def key_id(key: bytes) -> str:
    """A short public name of a key (stored beside what it encrypted)."""
    return hashlib.sha256(b"agentcards-pii-key-id\x00" + key).hexdigest()[:12]


def _derive(key: bytes, label: str) -> bytes:
    return hmac.new(key, label.encode(), hashlib.sha256).digest()
