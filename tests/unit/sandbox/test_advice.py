"""Limit messages name real settings and the request field; helper modules are stdlib; network errors are recognised."""

from __future__ import annotations

import errno
import socket

import pytest

from shared.config import Settings
from shared.sandbox.child import advice, wire
from shared.sandbox.child.result import ResultTooLarge, encode_result
from shared.sandbox.limits import SandboxLimits

SETTINGS = [value for name, value in vars(advice).items() if name.endswith("_SETTING")]


@pytest.mark.parametrize("variable", SETTINGS)
def test_each_named_setting_is_a_settings_field(variable: str) -> None:
    field = variable.removeprefix("AGENTCARDS_").lower()
    assert variable.startswith("AGENTCARDS_") and field in Settings.model_fields


def test_the_max_wall_time_default_follows_settings() -> None:
    default = Settings.model_fields["sandbox_max_wall_time_s"].default
    assert SandboxLimits().max_wall_time_s == default


def test_sizes_read_as_people_write_them() -> None:
    assert advice.size(4 << 20) == "4 MiB (4194304 bytes)"
    assert advice.size(64 << 10) == "64 KiB (65536 bytes)"
    assert advice.size(1500) == "1500 bytes"


def test_a_too_large_result_names_its_setting() -> None:
    with pytest.raises(ResultTooLarge, match="AGENTCARDS_SANDBOX_RESULT_BYTES"):
        encode_result("x" * 2000, max_bytes=1024)


def test_an_over_budget_value_carries_its_limit() -> None:
    with pytest.raises(wire.ValueOverBudget) as caught:
        wire.dumps_bounded("x" * 2000, max_bytes=1024)
    assert caught.value.max_bytes == 1024 and isinstance(caught.value, wire.ValueTooLarge)


def test_wall_time_advice_below_and_at_the_server_maximum() -> None:
    below = advice.wall_time_exceeded(30, 300)
    assert "`timeout_s`" in below and "at most 300s" in below
    assert "AGENTCARDS_SANDBOX_MAX_WALL_TIME_S" in below
    at_max = advice.wall_time_exceeded(300, 300)
    assert "`timeout_s` cannot go above it" in at_max
    assert "AGENTCARDS_SANDBOX_MAX_WALL_TIME_S" in at_max
    assert "asyncio.gather" in below
    typescript = advice.wall_time_exceeded(30, 300, language="typescript")
    assert "Promise.all" in typescript and "asyncio" not in typescript


def _permission_error_raised_here() -> PermissionError:
    try:
        raise PermissionError(errno.EPERM, "Operation not permitted")  # as a file refusal would
    except PermissionError as exc:
        return exc


def test_network_errors_get_the_hint() -> None:
    dns = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    assert advice.network_hint(dns) == advice.NO_NETWORK
    unreachable = OSError(errno.ENETUNREACH, "Network is unreachable")
    assert advice.network_hint(unreachable) == advice.NO_NETWORK
    wrapped = RuntimeError("fetch failed")
    wrapped.__cause__ = dns
    assert advice.network_hint(wrapped) == advice.NO_NETWORK


def test_other_errors_do_not() -> None:
    assert advice.network_hint(ValueError("x")) is None
    assert advice.network_hint(PermissionError(errno.EPERM, "not from socket")) is None
    assert advice.network_hint(_permission_error_raised_here()) is None  # not from socket
    loop = ValueError("a")
    loop.__context__ = ValueError("b")
    loop.__context__.__context__ = loop  # a cycle ends the walk
    assert advice.network_hint(loop) is None
