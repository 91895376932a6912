"""Secrets sealed into the mcpServers file open only for their server and variable, with the key."""

from __future__ import annotations

import pytest

from shared.errors import ConfigError
from shared.privacy.keys import PiiKeys
from shared.privacy.sealed import is_sealed, seal, unseal

KEYS = PiiKeys(current=b"k" * 32)
OTHER = PiiKeys(current=b"o" * 32)


def test_a_sealed_value_opens_for_its_place_only() -> None:
    sealed = seal(KEYS, server="github", name="TOKEN", value="ghp_123")
    assert is_sealed(sealed) and "ghp_123" not in sealed
    assert unseal(KEYS, server="github", name="TOKEN", value=sealed) == "ghp_123"
    assert unseal(KEYS, server="github", name="TOKEN", value="plain") == "plain"
    with pytest.raises(ConfigError, match="does not open"):
        unseal(KEYS, server="other", name="TOKEN", value=sealed)
    with pytest.raises(ConfigError, match="PII key this stack does not have"):
        unseal(OTHER, server="github", name="TOKEN", value=sealed)
    rotated = PiiKeys(current=b"n" * 32, previous=b"k" * 32)
    assert unseal(rotated, server="github", name="TOKEN", value=sealed) == "ghp_123"
