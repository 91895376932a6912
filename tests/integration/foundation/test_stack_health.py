"""A stack child that never gets healthy: `up` and the harness say which one, and why."""

from __future__ import annotations

import pytest

from deploy.launcher.harness import temporary_stack
from shared.errors import DependencyError

pytestmark = pytest.mark.integration


def test_a_child_never_healthy_is_named_with_the_end_of_its_log(pg_url: str) -> None:
    # A gateway told to listen beyond loopback with no API key refuses at every start.
    with (
        pytest.raises(DependencyError) as raised,
        temporary_stack(
            database_url=pg_url,
            env="test",
            timeout_s=15,
            extra_env={"AGENTCARDS_GATEWAY_HOST": "0.0.0.0"},
        ),
    ):
        pass
    message = str(raised.value)
    assert "stack not healthy after 15s" in message and "'gateway'" in message
    assert "--- last lines of gateway.log ---" in message
    assert "refusing to listen on 0.0.0.0" in message  # the reason, without opening the log
