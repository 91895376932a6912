"""Sentence embeddings, offline: the configured sentence-transformers model, plus a Postgres cache.

``embedder`` holds the process-wide model, ``model`` loads and runs it, ``plan`` cuts a
search request's texts into forward passes, ``cache`` stores vectors by text hash.
"""

from shared.embeddings.cache import embed_cached, text_hash, vector_to_list
from shared.embeddings.embedder import Embedder, get_embedder

__all__ = ["Embedder", "embed_cached", "get_embedder", "text_hash", "vector_to_list"]
