"""Tool search as the gateway serves it (REST and MCP): audit, embed once, then hybrid fusion."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from anyio import to_thread
from psycopg_pool import PoolClosed

from services.gateway.ops.audit import audit
from services.gateway.ops.models.tools import ToolHit, ToolSearchRequest, ToolSearchResponse
from services.gateway.state import GatewayState
from shared.auth.audit import AuditAction
from shared.auth.patterns import cached_patterns
from shared.auth.principal import Principal
from shared.config import DEFAULT_TENANT
from shared.db import autocommit
from shared.embeddings import Embedder, get_embedder
from shared.runtime import freeze_long_lived
from shared.search.hybrid import embed_texts_for_query, hybrid_tool_search
from shared.tools.declarations import with_declarations
from shared.tools.returns import returns_line

# Agents repeat searches (retries, the same step in many runs); an embedding costs
# 10-40 ms and a cached one nothing. 512 queries of at most 5 vectors of 384 floats: 4 MB.
QUERY_CACHE_SIZE = 512


class QueryEmbeddings:
    """A small LRU of search-request embeddings ([query, *clauses]) per model."""

    def __init__(self, *, size: int = QUERY_CACHE_SIZE) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], list[list[float]]] = OrderedDict()

    def get(self, embedder: Embedder, query: str) -> list[list[float]]:
        """The vectors of ``embed_texts_for_query(query)``, computed at most once while cached."""
        key = (embedder.model_name, query)
        with self._lock:
            vectors = self._cache.get(key)
            if vectors is not None:
                self._cache.move_to_end(key)
                return vectors
        vectors = embedder.embed_query(embed_texts_for_query(query))
        with self._lock:
            self._cache[key] = vectors
            self._cache.move_to_end(key)
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return vectors


QUERY_EMBEDDINGS = QueryEmbeddings()

# A key narrowed by an allow-list searches SCOPED_FACTOR times its limit (at most MAX_SCOPED)
# before the out-of-scope hits are dropped, so the page still fills with tools it may call.
SCOPED_FACTOR = 5
MAX_SCOPED = 200

log = logging.getLogger(__name__)


def warm_up(state: GatewayState) -> None:
    """Load what a search needs before the first one comes: the model (~6 s cold), the
    tools' words, their PageRanks and the graph, then the encoder's kernel for each pass
    size a search's texts are likely to need. Runs once, in the background, at start."""
    try:
        embedder = get_embedder(state.settings)
        vectors = embedder.embed_query(["warm up"])
        # A context tool, so the graph is read too.
        _search(state, query="warm up", vectors=vectors, limit=1, context_tools=["warm:up"])
        embedder.warm_passes()
    except PoolClosed:  # the gateway stopped first
        return
    except Exception as exc:  # the first search loads instead
        log.warning("search warm-up stopped: %s", exc)
    freeze_long_lived("gateway")  # the model stays: no full collection walks it again


async def ranked_tools(
    state: GatewayState,
    *,
    query: str,
    limit: int,
    context_tools: Sequence[str] = (),
    tenant_id: str,
) -> list[dict[str, Any]]:
    """Best tools for a task in words: semantic, words, graph and the tenant's past runs."""
    embedder = get_embedder(state.settings)
    vectors = await to_thread.run_sync(QUERY_EMBEDDINGS.get, embedder, query)
    return await to_thread.run_sync(
        lambda: _search(
            state,
            query=query,
            vectors=vectors,
            limit=limit,
            context_tools=context_tools,
            tenant_id=tenant_id,
        )
    )


async def search_tools(
    state: GatewayState, *, body: ToolSearchRequest, principal: Principal
) -> ToolSearchResponse:
    """REST's `POST /v1/tools/search` and MCP's `search_tools`: the search audited, then
    ``ranked_tools`` as the one response model both return."""
    await audit(
        state,
        principal=principal,
        action=AuditAction.SEARCH,
        args=body.model_dump(mode="json"),
        details={"kind": "tools"},
    )
    patterns = principal.tool_patterns
    hits = await ranked_tools(
        state,
        query=body.query,
        # A narrowed key: rank more, so its own tools can fill the page after the filter.
        limit=body.limit if patterns is None else min(body.limit * SCOPED_FACTOR, MAX_SCOPED),
        context_tools=body.context_tools,
        tenant_id=principal.tenant_id,
    )
    if patterns is not None:
        hits = scoped_hits(hits, patterns, include_out_of_scope=body.include_out_of_scope)
    hits = [{**h, "returns": returns_line(h.get("output_schema"))} for h in hits[: body.limit]]
    if body.declarations == "typescript":
        hits = with_declarations(hits)
    return ToolSearchResponse(query=body.query, hits=[ToolHit.model_validate(h) for h in hits])


def scoped_hits(
    hits: list[dict[str, Any]], patterns: Sequence[str], *, include_out_of_scope: bool
) -> list[dict[str, Any]]:
    """The hits the allow-list lets the caller call, in rank order; then, when asked, the
    others marked ``runnable: false`` with the reason."""
    scope = cached_patterns(tuple(patterns))
    allowed = [h for h in hits if scope.allows(h["id"])]
    if not include_out_of_scope:
        return allowed
    reason = f"outside this API key's allow-list ({', '.join(patterns)})"
    others = [
        {**h, "runnable": False, "not_runnable_reason": reason}
        for h in hits
        if not scope.allows(h["id"])
    ]
    return allowed + others


def _search(
    state: GatewayState,
    *,
    query: str,
    vectors: list[list[float]],
    limit: int,
    context_tools: Sequence[str],
    tenant_id: str = DEFAULT_TENANT,
) -> list[dict[str, Any]]:
    """``hybrid_tool_search`` on a pooled connection, given ``[query, *clauses]`` vectors."""
    # Read-only: in autocommit, the search is two round trips without BEGIN/COMMIT.
    with state.pool.connection() as pooled, autocommit(pooled) as conn:
        return hybrid_tool_search(
            conn,
            query=query,
            query_embedding=vectors[0],
            clause_embeddings=vectors[1:],
            limit=limit,
            context_tools=context_tools,
            tenant_id=tenant_id,
        )
