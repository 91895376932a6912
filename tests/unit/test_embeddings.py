"""The packaged embedding model loads offline and gives normalized, meaningful vectors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shared.config import Settings
from shared.embeddings import Embedder, get_embedder, text_hash
from shared.errors import ConfigError


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return get_embedder(Settings(embedding_model="all-MiniLM-L6-v2"))


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_are_384_d_unit_length_in_input_order(embedder: Embedder) -> None:
    texts = ["read a file", "send an email", "read a file"]
    vectors = embedder.embed(texts)
    assert len(vectors) == 3 and all(len(v) == 384 for v in vectors)
    assert all(math.isclose(_dot(v, v), 1.0, rel_tol=1e-4) for v in vectors)
    assert _dot(vectors[0], vectors[2]) == pytest.approx(1.0, abs=1e-5)
    assert embedder.dim == 384


def test_similar_intents_are_closer_than_unrelated_ones(embedder: Embedder) -> None:
    commits, recent, weather = embedder.embed(
        ["analyze the git commits of last week", "summarize recent commits in the repository",
         "what is the weather in Paris tomorrow"]
    )  # fmt: skip
    assert _dot(commits, recent) > _dot(commits, weather) + 0.2


def test_batching_does_not_change_results(embedder: Embedder) -> None:
    texts = [f"task number {i}" for i in range(40)]  # more than one batch of 32
    together = embedder.embed(texts)
    alone = embedder.embed([texts[35]])[0]
    assert _dot(together[35], alone) == pytest.approx(1.0, abs=1e-4)
    assert embedder.embed([]) == []


def test_one_embedder_per_process_and_model() -> None:
    settings = Settings(embedding_model="all-MiniLM-L6-v2")
    assert get_embedder(settings) is get_embedder(settings)


def test_a_model_of_the_wrong_dimension_is_refused() -> None:
    with pytest.raises(ConfigError, match="768"):
        Embedder(model_name="all-MiniLM-L6-v2", expected_dim=768).embed(["x"])


def test_text_hash_depends_on_model_and_text() -> None:
    base = text_hash(model="m1", text="hello")
    assert base == text_hash(model="m1", text="hello")
    assert base != text_hash(model="m2", text="hello")
    assert base != text_hash(model="m1", text="hello ")
    assert text_hash(model="a", text="bc") != text_hash(model="ab", text="c")


def test_embed_agrees_with_the_models_own_encode(embedder: Embedder) -> None:
    """The direct (bf16 where native) forward pass stays what sentence-transformers computes."""
    texts = ["fetch invoices and store them", "what is the weather in Paris tomorrow", "x"]
    reference = np.asarray(embedder.encode_reference(texts))
    fast = np.asarray(embedder.embed(texts))
    assert (fast * reference).sum(axis=1).min() > 0.999


def test_query_passes_agree_with_the_models_own_encode(embedder: Embedder) -> None:
    """Grouped query passes (padded batches, a text past the model's 256-token limit) too."""
    texts = [
        "read a file",
        "summarise the quarterly report and email it to the finance team",
        "find flights",
        " ".join(["invoice"] * 400),  # truncated to max_seq_length, as encode does
    ]
    reference = np.asarray(embedder.encode_reference(texts))
    fast = np.asarray(embedder.embed_query(texts))
    assert (fast * reference).sum(axis=1).min() > 0.999


def test_embed_query_gives_the_same_vectors_with_one_or_two_workers() -> None:
    texts = ["summarise the quarterly report", "email it to the finance team", "x" * 50]
    one = Embedder(model_name="all-MiniLM-L6-v2", query_workers=1).embed_query(texts)
    two = Embedder(model_name="all-MiniLM-L6-v2", query_workers=2).embed_query(texts)
    assert np.allclose(one, two, atol=1e-4)
