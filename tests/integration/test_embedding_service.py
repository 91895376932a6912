"""Embeddings from the gateway: the toolhost and learning workers ask it over Redis instead of
each loading torch and the model, and fall back to a model of their own when no gateway answers."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from shared.config import Settings
from shared.embeddings import EmbeddingServer, get_embedder
from shared.embeddings.service import GatewayEmbedder
from tests.integration.mcp_servers import example_server
from tests.stack import E2EStack, stack_fixture, wait_until

stack = stack_fixture(lambda tmp: {"example": example_server(tmp)})

CHILD = "workers.learning.consolidator"  # the pass's process, a child of the pool process
TEXTS = ["add two numbers", "remember that Alice works at Acme"]


def maps_torch(pid: int) -> bool:
    with open(f"/proc/{pid}/maps") as f:
        return any("libtorch_cpu" in line for line in f)


def process_tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:  # gone (or a zombie) meanwhile
        return []


def test_only_the_gateway_holds_the_model(stack: E2EStack) -> None:
    """Tools are searchable, runs are learned and consolidated soon after (the stack runs no
    beat: the pass was queued by ingestion), while the toolhost and the learning worker
    (its pool process too) never load torch: the gateway embedded for them, and the pass
    trained without it, in a child process that then exited."""
    tenant_id = f"t-footprint-{uuid.uuid4().hex[:8]}"
    tenant = stack.as_new_tenant(tenant_id)
    with tenant.client() as client:
        hits = client.post("/v1/tools/search", json={"query": "add two numbers"}).json()["hits"]
        assert hits[0]["id"] == "example:add"
        run = client.post(
            "/v1/executions?wait=true",
            json={
                "code": "return await mcp.example.add(a=args['a'], b=3)",
                "args": {"a": 4},
                "intent": "add three to a number, as a footprint check",
            },
        ).json()
    assert run["status"] == "succeeded", run
    assert run["capability"]["status"] == "created", run
    with stack.db() as conn:
        row = conn.execute(
            "SELECT intent_embedding IS NOT NULL AS embedded FROM capabilities WHERE id = %s",
            (run["capability"]["id"],),
        ).fetchone()
        assert row is not None and row["embedded"]

        def passes() -> list[dict[str, Any]]:
            return conn.execute(
                "SELECT t.runs_seen, a.trained_on FROM tool_vector_versions t "
                "JOIN query_adapters a USING (tenant_id, version) WHERE t.tenant_id = %s",
                (tenant_id,),
            ).fetchall()

        wait_until(passes, what="the tenant's consolidation pass soon after its run")
        assert passes()[0]["runs_seen"] == 1
    # The pass's child process is gone once its rows are committed and reported.
    learning = stack.procs["learning"].proc.pid
    wait_until(
        lambda: not [p for p in process_tree(learning) if CHILD in _cmdline(p)],
        what="the pass's process to exit",
    )

    assert maps_torch(stack.procs["gateway"].proc.pid)
    for name in ("toolhost", "learning"):
        tree = process_tree(stack.procs[name].proc.pid)
        assert len(tree) >= (2 if name == "learning" else 1)  # the worker and its pool process
        assert not [p.pid for p in tree if maps_torch(p.pid)], f"{name} loaded torch"


@pytest.fixture
def gateway_settings(redis_url: str) -> Settings:
    return Settings(
        redis_url=redis_url, database_url="postgresql://unused/x", embeddings_from="gateway"
    )


@pytest.fixture
def server(gateway_settings: Settings) -> Iterator[EmbeddingServer]:
    embedder = get_embedder(gateway_settings)
    embedder.embed(["loaded before it serves, as the gateway's warm-up does"])
    served = EmbeddingServer(redis_url=gateway_settings.redis_url or "", embedder=embedder).start()
    yield served
    served.stop()


def test_the_gateway_answers_with_its_own_vectors(
    gateway_settings: Settings, server: EmbeddingServer
) -> None:
    asker = GatewayEmbedder(gateway_settings)
    assert asker.embed(TEXTS) == get_embedder(gateway_settings).embed(TEXTS)
    assert asker.embed([]) == []
    assert not asker.local


def test_no_gateway_or_another_model_means_a_model_of_its_own(
    gateway_settings: Settings, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    expected = get_embedder(gateway_settings).embed(TEXTS)
    alone = GatewayEmbedder(gateway_settings, startup_grace_s=1)
    with caplog.at_level(logging.WARNING, logger="shared.embeddings.service"):
        assert alone.embed(TEXTS) == expected
    assert alone.local
    assert "no gateway serves embeddings with 'all-MiniLM-L6-v2'" in caplog.text

    # A gateway with another model refuses (vectors of two models must never mix).
    other = get_embedder(
        gateway_settings.model_copy(
            update={"embedding_model": "paraphrase-x", "embedding_dim": 384}
        )
    )
    served = EmbeddingServer(redis_url=redis_url, embedder=other).start()
    try:
        caplog.clear()
        mismatched = GatewayEmbedder(gateway_settings)
        with caplog.at_level(logging.WARNING, logger="shared.embeddings.service"):
            assert mismatched.embed(TEXTS[:1]) == expected[:1]
        assert mismatched.local
        assert "this gateway embeds with 'paraphrase-x', not 'all-MiniLM-L6-v2'" in caplog.text
    finally:
        served.stop()
