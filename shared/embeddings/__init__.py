"""Sentence embeddings, offline: the configured sentence-transformers model, plus a Postgres cache.

``embedder`` holds the process-wide model, ``model`` loads and runs it, ``plan`` cuts a
search request's texts into forward passes, ``cache`` stores vectors by text hash, ``service``
lets the gateways embed for the toolhost and learning workers.
"""

from shared.embeddings.cache import embed_cached, text_hash, vector_to_list
from shared.embeddings.embedder import Embedder, Embeds, get_embedder
from shared.embeddings.service import EmbeddingServer, embedder_for

__all__ = [
    "Embedder",
    "EmbeddingServer",
    "Embeds",
    "embed_cached",
    "embedder_for",
    "get_embedder",
    "text_hash",
    "vector_to_list",
]
