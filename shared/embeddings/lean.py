"""A mean-pooled BERT sentence model read straight from its files, without sentence-transformers.

Importing sentence-transformers costs a process about 6 CPU-seconds and the memory of
transformers, scikit-learn and SciPy, where torch alone costs under 2; every gateway pays it at
start. A model directory of one common shape needs none of it: a BERT ``config.json``, the
weights in ``model.safetensors``, a ``tokenizer.json``, and the sentence-transformers
``modules.json`` naming Transformer → mean Pooling (→ Normalize) with a
``sentence_bert_config.json`` that gives ``max_seq_length``. The packaged all-MiniLM-L6-v2 is one.
``read_lean`` reads such a directory into a ``LeanModel`` (weights with ``safetensors``, the
tokenizer with ``tokenizers``, the forward pass ``BertEncoder``); any other directory gives
None and the model loads through sentence-transformers (``model.load_model``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from shared.embeddings.bert import BertEncoder
from shared.embeddings.encoders import Encoder, compute_dtype, run_batches

FILES = ("config.json", "model.safetensors", "tokenizer.json", "modules.json")
_MODULES = "sentence_transformers.models."
# The Transformer's options that change what it computes; a model that sets any loads the
# general way.
_TRANSFORMER_OPTIONS = ("model_args", "tokenizer_args", "config_args", "processor_kwargs")


class LeanModel:
    """The model's tokenizer and forward passes; vectors equal sentence-transformers' float32
    ``encode(normalize_embeddings=True)`` (tests/unit/embeddings/test_lean.py)."""

    def __init__(self, directory: Path, *, config: dict[str, Any], max_seq_length: int) -> None:
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        self.directory = directory
        self.config = config
        self.max_seq_length = max_seq_length
        self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        # Padded positions are masked, so the pad id changes no vector; encode pads with it.
        padding = self._tokenizer.padding or {}
        self.pad_id = int(padding.get("pad_id", config.get("pad_token_id") or 0))
        # tokenizer.json may carry its own padding and truncation (MiniLM's pads every text
        # to 128): ids are cut at the model's limit, as encode cuts them, and padded per pass.
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_seq_length)
        self.dim = int(config["hidden_size"])
        weights = load_file(str(directory / "model.safetensors"))
        dtype = compute_dtype()
        self._encoder = BertEncoder(weights, config, dtype)
        # The float32 reference is built on first use (benchmarks); the same encoder where
        # the fast one already computes in float32.
        self._reference: BertEncoder | None = self._encoder if dtype == torch.float32 else None

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, with the special tokens, cut at ``max_seq_length``."""
        return [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]

    def fast_encoder(self) -> Encoder:
        """The forward pass ``Embedder.embed`` runs (bfloat16 where the CPU has it natively)."""
        return self._encoder

    def encode(self, texts: Sequence[str], *, batch_size: int) -> list[list[float]]:
        """Float32 vectors of ``texts`` in batches of similar length: sentence-transformers'
        ``encode`` computed by the float32 ``BertEncoder`` (equal to the module to 1e-5)."""
        if self._reference is None:
            from safetensors.torch import load_file

            # Loaded again rather than kept: the float32 copy is only for baselines.
            self._reference = BertEncoder(
                load_file(str(self.directory / "model.safetensors")), self.config, torch.float32
            )
        return run_batches(
            self._reference, self.token_ids(texts), batch_size=batch_size, pad=self.pad_id
        )


def read_lean(directory: Path) -> LeanModel | None:
    """The model in ``directory`` if it has the shape described above, else None."""
    shape = _shape(directory)
    if shape is None:
        return None
    config, max_seq_length = shape
    try:
        return LeanModel(directory, config=config, max_seq_length=max_seq_length)
    except KeyError:  # weights named otherwise than a BertModel's own (a "bert." prefix…)
        return None


def _shape(directory: Path) -> tuple[dict[str, Any], int] | None:
    """The BERT config and ``max_seq_length`` of a directory of the lean shape, else None."""
    if not all((directory / name).is_file() for name in FILES):
        return None
    config = _json(directory / "config.json")
    modules = _json(directory / "modules.json")
    if not (isinstance(config, dict) and BertEncoder.supports(config)):
        return None
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        return None
    types = [str(m.get("type", "")).removeprefix(_MODULES) for m in modules]
    if types[:2] != ["Transformer", "Pooling"] or types[2:] not in ([], ["Normalize"]):
        return None
    if modules[0].get("path") != "":
        return None
    transformer = _json(directory / "sentence_bert_config.json")
    pooling = _json(directory / str(modules[1].get("path", "")) / "config.json")
    st_config = _json(directory / "config_sentence_transformers.json")
    if not isinstance(transformer, dict) or not isinstance(pooling, dict):
        return None
    max_seq_length = transformer.get("max_seq_length")
    if (
        not isinstance(max_seq_length, int)
        or not 0 < max_seq_length <= int(config.get("max_position_embeddings", 0))
        or transformer.get("do_lower_case", False)
        or any(transformer.get(option) for option in _TRANSFORMER_OPTIONS)
        or not _mean_pooling(pooling, dim=int(config["hidden_size"]))
        # A default prompt is prepended to every text by encode.
        or (isinstance(st_config, dict) and st_config.get("default_prompt_name"))
    ):
        return None
    return config, max_seq_length


def _mean_pooling(pooling: dict[str, Any], *, dim: int) -> bool:
    """True for a Pooling config that averages the token vectors and nothing else."""
    if pooling.get("word_embedding_dimension", dim) != dim:
        return False
    if "pooling_mode" in pooling:  # sentence-transformers >= 5 writes one name
        return pooling["pooling_mode"] == "mean"
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v}
    return modes == {"pooling_mode_mean_tokens"}


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
