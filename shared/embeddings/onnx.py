"""A sentence model run by ONNX Runtime, in float32 or with int8 weights (the ``onnx`` extra).

The graph is exported once from the model's own files (Transformer → mean Pooling →
Normalize, the shape sentence-transformers' ``encode`` computes) and kept beside the
unpacked models (``AGENTCARDS_HOME/models/<name>-onnx/``); ``onnx-int8`` quantizes its
weights dynamically (activations stay float, scaled per pass). Export and quantization
read only local files; a process that finds them done loads them in about a second.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shared.errors import ConfigError, DependencyError

if TYPE_CHECKING:
    import torch

    from shared.embeddings.encoders import Encoder

log = logging.getLogger(__name__)

# Legacy (TorchScript) export at opset 17: every op of BERT and MPNet encoders exports.
_OPSET = 17
# The feed-forward block's second matrix, as transformers names it in BERT and MPNet
# ("/model/encoder/layer.3/output/dense/MatMul"; the attention's is ".../attention/output/...").
_DOWN_PROJECTION = re.compile(r"/layer\.\d+/output/dense/MatMul$")


def onnx_file(source: Path, *, model_name: str, models_dir: Path, int8: bool) -> Path:
    """The exported graph of the model in ``source`` (exported and quantized when absent)."""
    weights = source / "model.safetensors"
    stamp = weights.stat().st_size if weights.is_file() else 0
    folder = models_dir / f"{model_name.replace('/', '--')}-{stamp}-onnx"
    plain, quantized = folder / "model.onnx", folder / "model-int8.onnx"
    wanted = quantized if int8 else plain
    if wanted.is_file():
        return wanted
    folder.mkdir(parents=True, exist_ok=True)
    if not plain.is_file():
        _atomic(plain, lambda out: export(source, out))
    if int8 and not quantized.is_file():
        _atomic(quantized, lambda out: quantize(plain, out))
    return wanted


def export(source: Path, out: Path) -> None:
    """Export the model in ``source`` as one graph: ids and mask in, unit vectors out."""
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:  # pragma: no cover - transformers comes with sentence-transformers
        raise DependencyError(f"exporting to ONNX needs transformers ({exc})") from exc
    # Eager attention traces to plain ops whatever the padding; the fused kernels'
    # masks are traced as constants of the example batch.
    from shared.embeddings.bert import mean_pool

    class Pooled(torch.nn.Module):
        """The model, then mean pooling over real tokens and unit length."""

        def __init__(self) -> None:
            super().__init__()
            self.model = AutoModel.from_pretrained(str(source), attn_implementation="eager")

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            tokens = self.model(input_ids=input_ids, attention_mask=attention_mask)
            return mean_pool(tokens.last_hidden_state, attention_mask)

    graph = Pooled().eval()
    ids = torch.ones((2, 8), dtype=torch.long)
    mask = torch.ones((2, 8), dtype=torch.long)
    mask[1, 5:] = 0
    dynamic = {0: "batch", 1: "tokens"}
    log.info("exporting %s to ONNX", source)
    torch.onnx.export(
        graph,
        (ids, mask),
        str(out),
        input_names=["input_ids", "attention_mask"],
        output_names=["embedding"],
        dynamic_axes={"input_ids": dynamic, "attention_mask": dynamic, "embedding": {0: "batch"}},
        opset_version=_OPSET,
        dynamo=False,
    )


def quantize(plain: Path, out: Path) -> None:
    """int8 weights (dynamic quantization: activations are scaled per pass), except the
    feed-forward down-projections, which stay float."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # One scale per output channel: MiniLM's vectors keep cosine 0.992-0.996 with the float
    # model's, against 0.962-0.978 with one scale per matrix. The down-projection's input
    # (after GELU) has outliers that one int8 scale per pass cannot hold: quantized, mpnet's
    # vectors fell to cosine 0.90-0.94 with the float ones; kept float, 0.977-0.993.
    graph = onnx.load(str(plain), load_external_data=False).graph
    keep = [n.name for n in graph.node if _DOWN_PROJECTION.search(n.name)]
    quantize_dynamic(
        str(plain),
        str(out),
        weight_type=QuantType.QInt8,
        per_channel=True,
        nodes_to_exclude=keep,
    )


class OnnxModel:
    """The ``Model`` of an exported graph: the model's tokenizer, one ORT session."""

    def __init__(self, source: Path, graph: Path, *, threads: int, providers: list[str]) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        config = json.loads((source / "config.json").read_text(encoding="utf-8"))
        limits = json.loads((source / "sentence_bert_config.json").read_text(encoding="utf-8"))
        self.dim = int(config["hidden_size"])
        self._tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
        padding = self._tokenizer.padding or {}
        self.pad_id = int(padding.get("pad_id", config.get("pad_token_id") or 0))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=int(limits["max_seq_length"]))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._encoder = _SessionEncoder(
            ort.InferenceSession(str(graph), sess_options=options, providers=providers)
        )

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]

    def fast_encoder(self) -> Encoder:
        return self._encoder

    def encode(self, texts: Sequence[str], *, batch_size: int) -> list[list[float]]:
        from shared.embeddings.encoders import run_batches

        return run_batches(
            self._encoder, self.token_ids(texts), batch_size=batch_size, pad=self.pad_id
        )


def load_onnx(
    source: Path, *, model_name: str, models_dir: Path, backend: str, threads: int, device: str
) -> OnnxModel:
    """The model in ``source`` on ONNX Runtime (``backend`` one of ``BACKENDS``)."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise DependencyError(
            f"AGENTCARDS_EMBEDDING_BACKEND={backend} needs ONNX Runtime: install the extra, "
            "`pip install 'agentcards[onnx]'`"
        ) from None
    if not (source / "config.json").is_file() or not (source / "tokenizer.json").is_file():
        raise ConfigError(
            f"AGENTCARDS_EMBEDDING_BACKEND={backend} needs a model directory with config.json "
            f"and tokenizer.json; {model_name!r} has none"
        )
    graph = onnx_file(
        source, model_name=model_name, models_dir=models_dir, int8=backend == "onnx-int8"
    )
    providers = ["CPUExecutionProvider"]
    if device == "cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise ConfigError(
                "AGENTCARDS_EMBEDDING_DEVICE=cuda with an ONNX backend needs onnxruntime-gpu "
                "and a GPU it can see"
            )
        providers.insert(0, "CUDAExecutionProvider")
    log.info(
        "embedding model %r runs on ONNX Runtime (%s, %s)", model_name, graph.name, providers[0]
    )
    return OnnxModel(source, graph, threads=threads, providers=providers)


class _SessionEncoder:
    """The ``Encoder`` of an ORT session: torch ids in, torch unit vectors out."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        import torch

        (out,) = self._session.run(
            ["embedding"],
            {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()},
        )
        return torch.from_numpy(np.asarray(out, dtype=np.float32))


def _atomic(path: Path, write: Any) -> None:
    """``write(tmp)`` then rename onto ``path``: concurrent processes never read half a file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide it from the stack's other users
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
