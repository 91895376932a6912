"""The ONNX backends: the packaged MiniLM exported once, float equal to torch's, int8 close to it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shared.embeddings import Embedder

TEXTS = [
    "x",
    "read a file",
    "send an email to the finance team with the quarterly report attached",
    "remember that Alice works at Acme",
    "東京の天気を教えてください",
]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return np.asarray(Embedder(model_name="all-MiniLM-L6-v2").encode_reference(TEXTS))


def _embedder(backend: str, models_dir: Path) -> Embedder:
    return Embedder(
        model_name="all-MiniLM-L6-v2", backend=backend, device="cpu", models_dir=models_dir
    )


def test_the_float_graph_gives_the_models_vectors(models_dir: Path, reference: np.ndarray) -> None:
    # One padded batch: the mask is an input of the graph, not a constant of the export.
    vectors = np.asarray(_embedder("onnx", models_dir).embed(TEXTS))
    assert vectors.shape == (len(TEXTS), 384)
    assert np.min(np.sum(vectors * reference, axis=1)) > 0.9999


def test_int8_weights_stay_close_and_are_reused(models_dir: Path, reference: np.ndarray) -> None:
    vectors = np.asarray(_embedder("onnx-int8", models_dir).embed_query(TEXTS))
    assert np.min(np.sum(vectors * reference, axis=1)) > 0.98
    (graph,) = models_dir.glob("*-onnx/model-int8.onnx")
    made = graph.stat().st_mtime_ns
    _embedder("onnx-int8", models_dir).embed(["again"])  # a new process's load: no new export
    assert graph.stat().st_mtime_ns == made
