"""Tool search as the gateway serves it (REST and MCP): embed once, then hybrid fusion."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from anyio import to_thread

from services.gateway.config import GatewayState
from shared.embeddings import get_embedder
from shared.search.hybrid import embed_texts_for_query, hybrid_tool_search


async def search_tools(
    state: GatewayState, *, query: str, limit: int, context_tools: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Best tools for a task in words: semantic + lexical + graph signals, each hit explained."""
    texts = embed_texts_for_query(query)
    vectors = await to_thread.run_sync(get_embedder(state.settings).embed, texts)

    def search() -> list[dict[str, Any]]:
        with state.pool.connection() as conn:
            return hybrid_tool_search(
                conn,
                query=query,
                query_embedding=vectors[0],
                clause_embeddings=vectors[1:],
                limit=limit,
                context_tools=context_tools,
            )

    return await to_thread.run_sync(search)
