"""A downstream server that answers 2026-07-28 tool calls from an older engine (results
without ``resultType``, tools that cannot ask their client mid-call): the MCP conformance
suite's own reference server does, and it is published to no registry, so
tests/integration/older_engine_server.py answers as it was seen to on the wire. Through
``/mcp/servers/older`` every scenario that passes directly passes, at both revisions: the
toolhost reads untagged results as complete and calls the server's tools at 2025-11-25,
which ``/v1/servers`` shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.mcp_servers import compare_with_direct, older_engine_server
from tests.stack import E2EStack, stack_fixture

# As test_reference_conformance.py's stack (a direct call holds a sandbox slot while its
# tool waits for an answer the suite never gives): its own, since both mode on /mcp would
# list two servers' tools under the same bare names.
older = stack_fixture(
    lambda tmp: {"older": older_engine_server()},
    learning=False,
    sandbox_slots=4,
    mcp_client_request_timeout_s=8.0,
)

# Fail directly at 2026-07-28 (their results carry no resultType) and pass through the
# gateway, which tags what it relays.
UNTAGGED_DIRECTLY = {
    "tools-call-image", "tools-call-audio", "tools-call-embedded-resource",
    "tools-call-mixed-content", "tools-call-simple-text", "tools-call-error",
    "tools-call-with-progress",
}  # fmt: skip
# Answered by the older engine through the gateway only at 2025-11-25 (tools that ask their
# client mid-call, subscriptions): what a 2026-07-28 session alone lost.
ASKS_MID_CALL = {
    "tools-call-sampling", "tools-call-elicitation", "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums", "resources-subscribe", "resources-unsubscribe",
}  # fmt: skip


def test_the_server_is_spoken_to_at_the_revision_it_holds(older: E2EStack) -> None:
    with older.client() as client:
        (server,) = client.get("/v1/servers").json()["servers"]
        tools = {t["name"] for t in client.get("/v1/tools").json()["tools"]}
    assert server["state"] == "ready" and server["protocol_version"] == "2026-07-28"
    fallback = server["protocol_fallback"]
    assert fallback["protocolVersion"] == "2025-11-25", server
    assert (
        fallback["for"] == ["tools/call", "resources/subscribe"]
        and "resultType" in fallback["reason"]
    )
    # The tools it serves only at 2026-07-28 (its own InputRequiredResults) are still there.
    assert {"test_sampling", "test_input_required_result_sampling"} <= tools


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_every_scenario_that_passes_directly_passes_through_the_gateway(
    older: E2EStack, revision: str, tmp_path: Path
) -> None:
    url = f"{older.gateway_url}/mcp/servers/older"
    direct = older_engine_server()["url"]
    passed, through, report = compare_with_direct(direct, url, revision, tmp_path)
    assert passed and through >= passed, report
    if revision == "2025-11-25":
        assert passed >= ASKS_MID_CALL | {"tools-call-image", "tools-call-with-logging"}, report
    else:
        assert not passed & UNTAGGED_DIRECTLY and through >= UNTAGGED_DIRECTLY, report
        assert "input-required-result-multi-round" in through, report  # 2026-only tools
